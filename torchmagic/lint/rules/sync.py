"""TM3xx — CPU-GPU synchronisation: code that makes the CPU wait for the GPU.

Both rules speak of the GPU, so they stay silent where no GPU is involved: a value known to
be on the CPU (live device, `.cpu()`-ed, a factory without a device), the CPU-only branch of
`x.cpu().numpy() if x.is_cuda else x.numpy()`, and code with no path to an accelerator at all
(`needs_accelerator`: kept only when the file, notebook or kernel moves something to one).
"""

from __future__ import annotations

import ast

from .. import accelerator
from ..context import Context
from ..kinds import (
    DATASET,
    DEVICE,
    DICT,
    DTYPE,
    LIST,
    LOADER,
    MODULE,
    NDARRAY,
    NONE,
    NUMBER,
    OPTIMIZER,
    SCHEDULER,
    SHAPE,
    STATE_DICT,
    STRING,
    TENSOR_KINDS,
)
from ..nodes import terminal_name
from ..registry import check
from ._common import unparse, unparse_operand

# Receivers that are certainly not tensors: `.item()`/`.tolist()` on them is no GPU sync.
_NOT_TENSOR = frozenset(
    {NUMBER, STRING, NDARRAY, LIST, DICT, MODULE, OPTIMIZER, SCHEDULER, LOADER, DATASET, DEVICE, DTYPE}
    | {NONE, SHAPE, STATE_DICT}
)
_SYNC_METHODS = frozenset({"item", "tolist", "numpy", "cpu", "nonzero"})

PERIODIC, ONCE = "periodic", "once"


def _loop_names(loop: ast.AST) -> set[str]:
    target = getattr(loop, "target", None)
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)} if target is not None else set()


def _is_mod(test: ast.AST) -> bool:
    return any(isinstance(b, ast.BinOp) and isinstance(b.op, ast.Mod) for b in ast.walk(test))


def _is_once(test: ast.AST, loop_names: set[str]) -> bool:
    """`i == 0`, `step == len(loader) - 1`, `epoch == last`: true on one iteration only."""
    if not isinstance(test, ast.Compare) or len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq):
        return False
    sides = [test.left, *test.comparators]
    return any(isinstance(s, ast.Name) and s.id in loop_names for s in sides) or any(
        isinstance(s, ast.Constant) and isinstance(s.value, int) and not isinstance(s.value, bool)
        for s in sides
    )


def _resets_counter(node: ast.If) -> bool:
    """`if seen >= N: ...; seen = 0`: a counter that the guarded block resets."""
    names = {n.id for n in ast.walk(node.test) if isinstance(n, ast.Name)}
    for stmt in node.body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant) and stmt.value.value == 0:
            if any(isinstance(t, ast.Name) and t.id in names for t in stmt.targets):
                return True
    return False


def _is_bounded(test: ast.AST) -> bool:
    """`len(examples) < 5`, `n_shown <= 8` (also within an `and`): a guard that lets a few
    iterations through."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_is_bounded(v) for v in test.values)
    if (
        not isinstance(test, ast.Compare)
        or len(test.ops) != 1
        or not isinstance(test.ops[0], (ast.Lt, ast.LtE))
    ):
        return False
    right = test.comparators[0]
    return isinstance(right, ast.Constant) and isinstance(right.value, int) and right.value <= 16


def guard_kind(ctx: Context, node: ast.AST) -> str | None:
    """How often `node` runs in its innermost loop: on one iteration only (`if i == 0:`),
    every N steps (`if step % N == 0:`, a counter the block resets, or `if step % N: continue`
    before it), or on every iteration (None)."""
    loop = ctx.loops[-1].node if ctx.loops else None
    names = _loop_names(loop) if loop is not None else set()
    stack = [*ctx.stack, node]
    for i in range(len(stack) - 2, -1, -1):
        parent, child = stack[i], stack[i + 1]
        if parent is loop:
            break
        if isinstance(parent, ast.If):
            in_body = any(child is s for s in parent.body)
        elif isinstance(parent, ast.IfExp):
            in_body = child is parent.body
        else:
            continue
        if not in_body:
            continue
        if _is_mod(parent.test):
            return PERIODIC
        if _is_once(parent.test, names) or _is_bounded(parent.test):
            return ONCE
        if isinstance(parent, ast.If) and _resets_counter(parent):
            return PERIODIC
    for stmt in getattr(loop, "body", None) or []:
        if any(stmt is s for s in stack):
            break
        if (
            isinstance(stmt, ast.If)
            and stmt.body
            and isinstance(stmt.body[-1], ast.Continue)
            and _is_mod(stmt.test)
        ):
            return PERIODIC
    return None


def _tensor_in_print(ctx: Context, call: ast.Call) -> ast.AST | None:
    for arg in call.args:
        value = arg.value if isinstance(arg, ast.Starred) else arg
        if isinstance(value, ast.JoinedStr):
            for part in value.values:
                if isinstance(part, ast.FormattedValue) and ctx.is_tensor(part.value):
                    return part.value
        elif ctx.is_tensor(value):
            return value
    return None


MAX_SHORT_LOOP = 16


def _small_int(ctx: Context, node: ast.AST) -> bool:
    """A constant, or a parameter of the enclosing function whose default is one, of at most
    `MAX_SHORT_LOOP` (`def show(images, n=4): for i in range(n): ...`)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int) and node.value <= MAX_SHORT_LOOP
    func = ctx.frame.node
    if isinstance(node, ast.Name) and isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        args = func.args
        positional = [*args.posonlyargs, *args.args]
        defaults = dict(
            zip([a.arg for a in positional[len(positional) - len(args.defaults) :]], args.defaults)
        )
        defaults |= {a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None}
        default = defaults.get(node.id)
        return default is not None and _small_int(ctx, default) and not isinstance(default, ast.Name)
    return False


def _few_iterations(ctx: Context, loop: ast.AST) -> bool:
    """`for i in range(4)`, `for ax in [a, b, c]`, or a loop that stops after a count
    (`if shown == num_images: return`): it runs a handful of times (showing a few images, a few
    layers), which is not where per-iteration syncs cost anything."""
    it = getattr(loop, "iter", None)
    if isinstance(it, ast.Call) and terminal_name(it.func) == "range" and it.args:
        last = it.args[0] if len(it.args) == 1 else it.args[1]
        if _small_int(ctx, last):
            return True
    if isinstance(it, (ast.List, ast.Tuple)) and len(it.elts) <= MAX_SHORT_LOOP:
        return True
    return any(_stops_on_a_count(outer.node) for outer in ctx.loops)


def _stops_on_a_count(loop: ast.AST) -> bool:
    """The loop increments a counter and returns or breaks when it reaches a value."""
    counters = {
        n.target.id
        for n in ast.walk(loop)
        if isinstance(n, ast.AugAssign) and isinstance(n.op, ast.Add) and isinstance(n.target, ast.Name)
    }
    for n in ast.walk(loop):
        if isinstance(n, ast.If) and n.body and isinstance(n.body[-1], (ast.Return, ast.Break)):
            test = n.test
            if isinstance(test, ast.Compare) and isinstance(test.ops[0], (ast.Eq, ast.GtE, ast.Gt)):
                if any(isinstance(x, ast.Name) and x.id in counters for x in [test.left, *test.comparators]):
                    return True
    return False


def _is_epoch_loop(loop: ast.AST) -> bool:
    """`for epoch in range(n_epochs)`, or a full-batch optimisation loop (`opt.step(closure)`,
    as with LBFGS, where each step sees all the data): its own body runs once per epoch."""
    names = _loop_names(loop) | {
        n.id if isinstance(n, ast.Name) else n.attr
        for n in ast.walk(getattr(loop, "iter", ast.Pass()))
        if isinstance(n, (ast.Name, ast.Attribute))
    }
    if any("epoch" in name.lower() for name in names):
        return True
    return any(
        isinstance(n, ast.Call)
        and terminal_name(n.func) == "step"
        and len(n.args) == 1
        and isinstance(n.args[0], ast.Name)
        and "closure" in n.args[0].id.lower()
        for n in ast.walk(loop)
    )


def _host_needs_it(ctx: Context, call: ast.Call) -> bool:
    """The value is needed on the host to go on (`env.step(action.item())`, `vocab[idx.item()]`,
    a token sampled with `torch.multinomial(...)`): keeping it on
    the device is no option, so the advice would not apply."""
    parent = ctx.parent
    if isinstance(parent, ast.Subscript) and parent.slice is call:
        return True
    if isinstance(parent, ast.Call) and call in parent.args:
        return terminal_name(parent.func) in ("step", "range", "randint", "choice", "sample")
    receiver = call.func.value if isinstance(call.func, ast.Attribute) else None
    if isinstance(receiver, ast.Call) and terminal_name(receiver.func) == "multinomial":
        return True
    return False


def _reads_each_element(ctx: Context, loop: ast.AST, value: ast.AST | None) -> bool:
    """`[labels[y.item()] for y in preds]`: the loop walks a tensor (or a list of them) and
    reads each element: one sync per element, where one `.tolist()` would do."""
    if isinstance(loop, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
        targets = {n.id for g in loop.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
        it = loop.generators[0].iter
    else:
        targets, it = _loop_names(loop), getattr(loop, "iter", None)
    if isinstance(value, ast.Name) and value.id in targets:
        return True
    return it is not None and ctx.kind(it) in TENSOR_KINDS


@check("TM301", calls=_SYNC_METHODS | {"synchronize", "print"})
def sync_in_loop(call: ast.Call, ctx: Context) -> None:
    if not ctx.in_loop or ctx.loops[-1].inner_loop_seen:
        return  # after the inner batch loop: once per epoch is the fix, not the problem
    loop = ctx.loops[-1].node
    if _few_iterations(ctx, loop) or _is_epoch_loop(loop):
        return
    func = call.func
    value: ast.AST | None = None
    if isinstance(func, ast.Name):
        if func.id != "print":
            return
        value = _tensor_in_print(ctx, call)
        if value is None:
            return
        label = f"print({unparse(value, 40)})"
    elif isinstance(func, ast.Attribute):
        if func.attr == "synchronize":
            if ctx.qualname(func) != "torch.cuda.synchronize":
                return
            label = "torch.cuda.synchronize()"
        elif func.attr in _SYNC_METHODS:
            if call.args and func.attr in ("item", "tolist", "numpy", "cpu"):
                return  # not the tensor method (e.g. a dict's or a custom object's)
            kind = ctx.kind(func.value)
            if kind in _NOT_TENSOR:
                return
            if func.attr in ("nonzero", "tolist") and kind not in TENSOR_KINDS:
                return  # also pandas/numpy methods: only flagged on known tensors
            if isinstance(func.value, ast.Constant):
                return
            value = func.value
            label = f"{unparse_operand(func.value, 40)}.{func.attr}()"
        else:
            return
    else:
        return
    if _host_needs_it(ctx, call) and not _reads_each_element(ctx, loop, value):
        return
    if guard_kind(ctx, call) is not None:
        # `if i == 0:` runs once; `if step % N == 0:` is the advice itself, already followed
        return
    place = accelerator.ACCELERATOR if value is None else accelerator.where(ctx, value)
    if place == accelerator.CPU or accelerator.in_cpu_branch(ctx, call):
        return  # a CPU tensor: reading it waits for no GPU
    if place == accelerator.ACCELERATOR and isinstance(func, ast.Attribute) and func.attr == "numpy":
        return  # `.numpy()` on a GPU tensor raises rather than waits: not this rule's message
    copies_out = isinstance(func, ast.Attribute) and func.attr == "cpu"
    ctx.flag(
        call,
        f"`{label}` inside a loop makes the CPU wait for the GPU on every iteration.",
        "Keep the results on the device and move them once after the loop; to offload as you go,"
        " copy without waiting (`x.to('cpu', non_blocking=True)`) and call `torch.cuda.synchronize()`"
        " once after the loop, before reading them."
        if copies_out
        else "Accumulate on the device (`total += loss.detach()`) and read the value once after the"
        " loop, or only every N steps.",
        needs_accelerator=place is None,
    )


def _test_label(node: ast.AST) -> str:
    if isinstance(node, ast.If):
        return f"if {unparse(node.test, 40)}"
    if isinstance(node, ast.While):
        return f"while {unparse(node.test, 40)}"
    if isinstance(node, ast.Assert):
        return f"assert {unparse(node.test, 40)}"
    return f"... if {unparse(node.test, 40)} else ..."  # type: ignore[attr-defined]


def _tensors_in(ctx: Context, test: ast.AST) -> list[ast.AST]:
    """The tensor operands of a condition (`pred[i] != y[i]` -> `pred[i]`, `y[i]`)."""
    if isinstance(test, ast.Compare):
        parts = [test.left, *test.comparators]
    elif isinstance(test, ast.BoolOp):
        parts = list(test.values)
    elif isinstance(test, ast.UnaryOp):
        parts = [test.operand]
    else:
        parts = [test]
    return [p for p in parts if ctx.is_tensor(p)]


@check("TM302", nodes=(ast.If, ast.While, ast.Assert, ast.IfExp))
def tensor_in_condition(node: ast.If | ast.While | ast.Assert | ast.IfExp, ctx: Context) -> None:
    test = node.test
    if not ctx.is_tensor(test):
        return
    if (
        ctx.loops
        and any(_is_epoch_loop(loop.node) for loop in ctx.loops)
        and all(_is_epoch_loop(loop.node) or _few_iterations(ctx, loop.node) for loop in ctx.loops)
    ):
        return  # once per epoch (`if val_acc > best_acc:` after the phases)
    places = {accelerator.where(ctx, t) for t in _tensors_in(ctx, test)} or {None}
    if places == {accelerator.CPU} or accelerator.in_cpu_branch(ctx, node):
        return  # a condition on CPU tensors waits for no GPU
    ctx.flag(
        node if not isinstance(node, ast.IfExp) else test,
        f"`{_test_label(node)}` converts a tensor to a Python bool, which waits for the GPU.",
        "Keep the decision on the device (`torch.where`, masks, `torch.clamp`) or synchronise"
        " once, deliberately, outside hot loops.",
        needs_accelerator=accelerator.ACCELERATOR not in places,
    )
