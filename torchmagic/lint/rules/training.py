"""TM5xx — the training loop: optimizer, scheduler and mode bookkeeping."""

from __future__ import annotations

import ast

from ..context import Context, LoopInfo
from ..fixes import fix_of
from ..kinds import OPTIMIZER, SCHEDULER
from ..nodes import enclosing_branches, is_name, names_bound_to
from ..registry import check
from ._common import name_like, unparse, unparse_operand, word_of


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


# `zero_grad()`, and the names libraries give their own (moolib's `accumulator.zero_gradients()`,
# Paddle-style `clear_grad()`)
_ZEROING = frozenset(
    {"zero_grad", "zero_grads", "zero_gradients", "clear_grad", "clear_grads", "clear_gradients"}
)


@check("TM501", loops=True)
def missing_zero_grad(loop: LoopInfo, ctx: Context) -> None:
    backward = step = None
    for call in loop.calls:
        m = _method(call)
        if m in _ZEROING:
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
    if sched is None or _schedule_of_its_own(ctx, sched.func.value):  # type: ignore[attr-defined]
        return
    if _given_the_epoch(loop, sched):
        return
    ctx.flag(
        sched,
        f"`{unparse(sched, 40)}` runs before the optimizer's `step()` in this loop, skipping the schedule's first value.",
        "Step the scheduler after the optimizer: `optimizer.step()` then `scheduler.step()`.",
    )


def _given_the_epoch(loop: LoopInfo, call: ast.Call) -> bool:
    """`scheduler.step(epoch=epoch)`, `scheduler.step(epoch)` with the loop's own counter: the
    scheduler sets the value of the epoch it is told (its closed form), so stepping at the
    start of each epoch skips nothing."""
    if any(k.arg == "epoch" for k in call.keywords):
        return True
    target = getattr(loop.node, "target", None)
    counters = {n.id for n in ast.walk(target) if isinstance(n, ast.Name)} if target is not None else set()
    return len(call.args) == 1 and isinstance(call.args[0], ast.Name) and call.args[0].id in counters


# packages whose schedules are PyTorch's own (transformers' `get_*_schedule_with_warmup` build a
# `LambdaLR`)
_TORCH_SCHEDULES = ("torch.", "transformers.")


def _schedule_of_its_own(ctx: Context, recv: ast.AST) -> bool:
    """The scheduler is built by a class from outside PyTorch (imported from another package, or
    defined here on no PyTorch scheduler): its `step()` need not skip a first value. A PyTorch
    scheduler applies its first value when it is built, so stepping before the optimizer skips
    it; a class of its own (a Noam schedule that reads `max(step, 1)`, timm's per-epoch
    schedulers) has its own contract. Where `recv` is a parameter, the file's bindings of the
    same name say what is passed in."""
    built = ctx.built_by(recv)
    if built is not None:
        builders = [built]
    else:
        name = word_of(recv)
        if not name or not ctx.stack or ctx.origin(recv) is not None:
            return False
        builders = []
        for node in ast.walk(ctx.stack[0]):
            if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
                continue
            if any(word_of(t) == name for t in node.targets):
                builders.append(ctx.qualname(node.value.func))
    return bool(builders) and all(b is not None and _class_outside_torch(ctx, b) for b in builders)


def _class_outside_torch(ctx: Context, qualname: str) -> bool:
    head, _, last = qualname.rpartition(".")
    if not last[:1].isupper() or qualname.startswith(_TORCH_SCHEDULES):
        return False  # a function (whose return is unknown), or PyTorch's own
    if head:
        return True  # imported from another package
    info = ctx.classes.get(last)
    if info is None:
        return False
    return not any((ctx.qualname(base) or "").startswith(_TORCH_SCHEDULES) for base in info.node.bases)


def _plateau(ctx: Context, recv: ast.AST) -> bool | None:
    """True for ReduceLROnPlateau (whose `step(metric)` is right), None when unknown. A name
    that some branch binds to one (`if kind == "plateau": sched = ReduceLROnPlateau(...)`
    `else: sched = LambdaLR(...)`) may be one: the call is then taken as its step."""
    scope = ctx.frame.node or (ctx.stack[0] if ctx.stack else None)
    if isinstance(recv, ast.Name) and scope is not None:
        plateaus = names_bound_to(scope, lambda c: (ctx.qualname(c.func) or "").endswith("ReduceLROnPlateau"))
        if recv.id in plateaus:
            return True
    built = ctx.built_by(recv)
    if built is None:
        return None
    return built.endswith("ReduceLROnPlateau")


def _epoch_argument(call: ast.Call) -> ast.AST | None:
    if call.args:
        return call.args[0]
    return next((kw.value for kw in call.keywords if kw.arg == "epoch"), None)


def _loop_from_zero(ctx: Context) -> tuple[ast.For, str, int] | None:
    """The innermost `for v in range(N)` (or `range(0, N)`) around the call, its variable, and
    the index in its body of the statement that holds the call."""
    if not ctx.loops:
        return None
    loop = ctx.loops[-1].node
    if not (isinstance(loop, ast.For) and isinstance(loop.target, ast.Name)):
        return None
    it = loop.iter
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"):
        return None
    if len(it.args) == 2 and not (isinstance(it.args[0], ast.Constant) and it.args[0].value == 0):
        return None
    if len(it.args) not in (1, 2):
        return None
    for i, stmt in enumerate(loop.body):
        if any(stmt is n for n in ctx.stack):
            return loop, loop.target.id, i
    return None


@check("TM503", calls={"step"})
def scheduler_epoch_arg(call: ast.Call, ctx: Context) -> None:
    arg = _epoch_argument(call)
    if arg is None or not isinstance(call.func, ast.Attribute):
        return
    recv = call.func.value
    if ctx.kind(recv) != SCHEDULER:
        return
    if _plateau(ctx, recv) is not False:
        return  # ReduceLROnPlateau.step(metric) is correct; unknown classes are not flagged
    sched = unparse_operand(recv, 30)
    message = f"`{unparse(call, 50)}` passes the deprecated epoch argument."
    # `step(e)` puts the schedule at epoch e; `step()` adds one to the scheduler's own count,
    # which starts at 0 when it is built. Only where the two agree is the argument dropped.
    loop = _loop_from_zero(ctx)
    if loop is not None:
        node, var, index = loop
        last = index == len(node.body) - 1
        if (
            last
            and isinstance(arg, ast.BinOp)
            and isinstance(arg.op, ast.Add)
            and is_name(arg.left, var)
            and isinstance(arg.right, ast.Constant)
            and arg.right.value == 1
        ):
            ctx.flag(
                call,
                message,
                f"`{sched}.step()` at the end of each epoch gives the same schedule: before epoch"
                f" `{var}` the scheduler has then been stepped `{var}` times.",
                # unsafe: the same epochs, but the rate is then updated step by step rather than
                # in closed form, and the count is off where the run resumes at a later epoch
                fix=fix_of("Drop the epoch argument", [ctx.edits.between(call.func, call, "()")], "unsafe"),
            )
            return
        if is_name(arg, var) and not last:
            ctx.flag(
                call,
                message,
                f"Call `{sched}.step()` without arguments at the end of each epoch, after its"
                f" optimizer steps: that gives the same schedule (before epoch `{var}` the scheduler"
                f" has then been stepped `{var}` times). Dropping the argument where it stands would"
                " move every change one epoch earlier.",
            )
            return
    ctx.flag(
        call,
        message,
        f"Call `{sched}.step()` without arguments once per epoch, after the epoch's optimizer"
        " steps. It counts its own calls, which may not match the epoch passed here (epochs"
        " skipped, a run resumed at a later epoch: restore the scheduler's `state_dict()`"
        " instead); check that the rate changes at the same epochs as before.",
    )


def _own_schedule(ctx: Context, recv: ast.AST) -> bool:
    """`sched = ExponentialLR(opt, end_lr, n)` where this source defines `ExponentialLR` with its
    own `get_lr`: a closed-form schedule the code wrote, whose `get_lr()` is its own contract
    (the rate of the current step), not PyTorch's chainable one."""
    origin = ctx.origin(recv) if isinstance(recv, ast.Name) else None
    if not (isinstance(origin, ast.Call) and isinstance(origin.func, ast.Name)):
        return False
    info = ctx.classes.get(origin.func.id)
    return info is not None and any(
        isinstance(n, ast.FunctionDef) and n.name == "get_lr" for n in info.node.body
    )


def _fallback_of_get_last_lr(ctx: Context, call: ast.Call) -> bool:
    """`sched.get_last_lr()[0] if torch_version >= (1, 4) else sched.get_lr()[0]`: the other
    branch already reads `get_last_lr()`; this one is the fallback for a PyTorch without it."""
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "get_last_lr"
        for _, _, other, _ in enclosing_branches([*ctx.stack, call])
        for s in other
        for n in ast.walk(s)
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
    if not _is_scheduler(ctx, recv) or _own_schedule(ctx, recv) or _fallback_of_get_last_lr(ctx, call):
        return
    ctx.flag(
        call,
        f"`{unparse(call, 50)}` returns the rate for the scheduler's internal state, not the last applied one.",
        f"Use `{unparse_operand(recv, 30)}.get_last_lr()`.",
        # unsafe: the value read changes (to the one the optimizer is using)
        fix=fix_of("Read `get_last_lr()`", [ctx.edits.attribute_name(call.func, "get_last_lr")], "unsafe"),
    )
