"""TM5xx — the training loop: optimizer, scheduler and mode bookkeeping."""

from __future__ import annotations

import ast

from ..context import Context, LoopInfo
from ..fixes import fix_of
from ..kinds import OPTIMIZER, SCHEDULER
from ..registry import check
from ._common import name_like, unparse, unparse_operand


def _is_scheduler(ctx: Context, node: ast.AST | None) -> bool:
    if node is None:
        return False
    kind = ctx.kind(node)
    if kind == SCHEDULER:
        return True
    return kind is None and name_like(node, "sched", "lr_policy")


def _is_optimizer(ctx: Context, node: ast.AST | None) -> bool:
    if node is None:
        return False
    kind = ctx.kind(node)
    if kind == OPTIMIZER:
        return True
    return kind is None and name_like(node, "opt") and not name_like(node, "sched")


def _method(call: ast.Call) -> str | None:
    return call.func.attr if isinstance(call.func, ast.Attribute) else None


def _optimizer_step(ctx: Context, call: ast.Call) -> bool:
    """`opt.step()`, or `scaler.step(opt)` with AMP."""
    if _method(call) != "step":
        return False
    recv = call.func.value  # type: ignore[attr-defined]
    if _is_optimizer(ctx, recv):
        return True
    return bool(call.args) and name_like(recv, "scaler") and _is_optimizer(ctx, call.args[0])


def _scheduler_step(ctx: Context, call: ast.Call) -> bool:
    return _method(call) == "step" and _is_scheduler(ctx, call.func.value)  # type: ignore[attr-defined]


def _clears_grads_by_hand(loop: ast.AST) -> bool:
    """`p.grad = None` or `p.grad.zero_()` somewhere in the loop."""
    for sub in ast.walk(loop):
        if isinstance(sub, ast.Assign) and any(
            isinstance(t, ast.Attribute) and t.attr == "grad" for t in sub.targets
        ):
            return True
        if (
            isinstance(sub, ast.Call)
            and isinstance(sub.func, ast.Attribute)
            and sub.func.attr in ("zero_", "detach_")
            and isinstance(sub.func.value, ast.Attribute)
            and sub.func.value.attr == "grad"
        ):
            return True
    return False


_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _helper(ctx: Context, call: ast.Call) -> ast.AST | None:
    """The definition in this file of the function (or method of the current class) `call` runs."""
    f = call.func
    if isinstance(f, ast.Name):
        target = ctx.origin(f)
        return target if isinstance(target, _FUNCS) else None
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self" and ctx.cls:
        return next((s for s in ctx.cls.node.body if isinstance(s, _FUNCS) and s.name == f.attr), None)
    return None


def _zeroes_in_helper(ctx: Context, call: ast.Call) -> bool:
    """`reset_grad()` whose body calls `zero_grad()` (or clears `.grad` by hand)."""
    fn = _helper(ctx, call)
    if fn is None:
        return False
    for sub in ast.walk(fn):
        if isinstance(sub, ast.Call) and _method(sub) == "zero_grad":
            return True
    return _clears_grads_by_hand(fn)


def _distributed(ctx: Context, loop: ast.AST, step: ast.Call) -> bool:
    """Distributed autograd (RPC): gradients live in a per-iteration context and
    `DistributedOptimizer` has no `zero_grad`. Its `step` takes the context id."""
    recv = step.func.value  # type: ignore[attr-defined]
    if (ctx.built_by(recv) or "").endswith("DistributedOptimizer"):
        return True
    fn = ctx.frame.node
    if isinstance(recv, ast.Name) and isinstance(fn, _FUNCS):
        for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs):
            if a.arg == recv.id and a.annotation is not None:
                if (ctx.qualname(a.annotation) or "").endswith("DistributedOptimizer"):
                    return True
    for sub in ast.walk(loop):
        if isinstance(sub, (ast.Attribute, ast.Name)):
            if (ctx.qualname(sub) or "").startswith("torch.distributed.autograd"):
                return True
    return False


@check("TM501", loops=True)
def missing_zero_grad(loop: LoopInfo, ctx: Context) -> None:
    backward = step = None
    for call in loop.calls:
        m = _method(call)
        if m == "zero_grad":
            return
        if m == "backward" and backward is None:
            backward = call
        elif step is None and _optimizer_step(ctx, call):
            step = call
    if backward is None or step is None or _clears_grads_by_hand(loop.node):
        return
    if any(_zeroes_in_helper(ctx, call) for call in loop.calls):
        return
    if _distributed(ctx, loop.node, step):
        return
    ctx.flag(
        step,
        f"`{unparse(step, 40)}` runs in a loop that never calls `zero_grad()`, so gradients accumulate across steps.",
        f"Call `{unparse_operand(step.func.value, 30)}.zero_grad(set_to_none=True)` at the start of each step.",  # type: ignore[attr-defined]
    )


@check("TM502", loops=True)
def scheduler_before_optimizer(loop: LoopInfo, ctx: Context) -> None:
    sched = None
    for call in loop.calls:
        if _optimizer_step(ctx, call):
            break
        if sched is None and _scheduler_step(ctx, call):
            sched = call
    else:
        return
    if sched is None:
        return
    ctx.flag(
        sched,
        f"`{unparse(sched, 40)}` runs before the optimizer's `step()` in this loop, skipping the schedule's first value.",
        "Step the scheduler after the optimizer: `optimizer.step()` then `scheduler.step()`.",
    )


def _plateau(ctx: Context, recv: ast.AST) -> bool | None:
    """True for ReduceLROnPlateau (whose `step(metric)` is right), None when unknown."""
    built = ctx.built_by(recv)
    if built is None:
        return None
    return built.endswith("ReduceLROnPlateau")


@check("TM503", calls={"step"})
def scheduler_epoch_arg(call: ast.Call, ctx: Context) -> None:
    if not (call.args or any(kw.arg == "epoch" for kw in call.keywords)):
        return
    if not isinstance(call.func, ast.Attribute):
        return
    recv = call.func.value
    if ctx.kind(recv) != SCHEDULER:
        return
    if _plateau(ctx, recv) is not False:
        return  # ReduceLROnPlateau.step(metric) is correct; unknown classes are not flagged
    ctx.flag(
        call,
        f"`{unparse(call, 50)}` passes the deprecated epoch argument.",
        f"Call `{unparse_operand(recv, 30)}.step()` once per epoch (or per step) without arguments.",
        # unsafe: the schedule then counts its own steps, which differs where the argument skipped
        fix=fix_of("Drop the epoch argument", [ctx.edits.between(call.func, call, "()")], "unsafe"),
    )


@check("TM504", calls={"get_lr"})
def scheduler_get_lr(call: ast.Call, ctx: Context) -> None:
    if not isinstance(call.func, ast.Attribute) or call.args:
        return
    recv = call.func.value
    if isinstance(recv, ast.Name) and recv.id == "self":
        return  # a scheduler subclass implementing get_lr
    if isinstance(recv, ast.Call) and isinstance(recv.func, ast.Name) and recv.func.id == "super":
        return
    if not _is_scheduler(ctx, recv):
        return
    ctx.flag(
        call,
        f"`{unparse(call, 50)}` returns the rate for the scheduler's internal state, not the last applied one.",
        f"Use `{unparse_operand(recv, 30)}.get_last_lr()`.",
        # unsafe: the value read changes (to the one the optimizer is using)
        fix=fix_of("Read `get_last_lr()`", [ctx.edits.attribute_name(call.func, "get_last_lr")], "unsafe"),
    )
