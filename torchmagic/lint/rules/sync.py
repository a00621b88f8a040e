"""TM3xx — CPU-GPU synchronisation: code that makes the CPU wait for the GPU."""

from __future__ import annotations

import ast

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
from ..registry import check
from ._common import unparse

# Receivers that are certainly not tensors: `.item()`/`.tolist()` on them is no GPU sync.
_NOT_TENSOR = frozenset(
    {NUMBER, STRING, NDARRAY, LIST, DICT, MODULE, OPTIMIZER, SCHEDULER, LOADER, DATASET, DEVICE, DTYPE}
    | {NONE, SHAPE, STATE_DICT}
)
_SYNC_METHODS = frozenset({"item", "tolist", "numpy", "cpu", "nonzero"})


def _every_n_steps(ctx: Context, call: ast.Call) -> bool:
    """The call sits in the body of an `if ... % N ...:` (statement or conditional expression)
    inside the innermost loop."""
    loop = ctx.loops[-1].node if ctx.loops else None
    stack = [*ctx.stack, call]
    for i in range(len(stack) - 2, -1, -1):
        node, child = stack[i], stack[i + 1]
        if node is loop:
            return False
        if isinstance(node, ast.If):
            in_body = any(child is s for s in node.body)
        elif isinstance(node, ast.IfExp):
            in_body = child is node.body
        else:
            continue
        if in_body and any(
            isinstance(b, ast.BinOp) and isinstance(b.op, ast.Mod) for b in ast.walk(node.test)
        ):
            return True
    return False


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


@check("TM301", calls=_SYNC_METHODS | {"synchronize", "print"})
def sync_in_loop(call: ast.Call, ctx: Context) -> None:
    if not ctx.in_loop or ctx.loops[-1].inner_loop_seen:
        return  # after an inner loop: once per epoch is the fix, not the problem
    func = call.func
    if isinstance(func, ast.Name):
        if func.id != "print":
            return
        shown = _tensor_in_print(ctx, call)
        if shown is None:
            return
        label = f"print({unparse(shown, 40)})"
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
            label = f"{unparse(func.value, 40)}.{func.attr}()"
        else:
            return
    else:
        return
    info = _every_n_steps(ctx, call)
    ctx.flag(
        call,
        f"`{label}` inside a loop makes the CPU wait for the GPU "
        + ("each time it runs (here every N steps)." if info else "on every iteration."),
        "Accumulate on the device (`total += loss.detach()`) and read the value once after the"
        " loop, or only every N steps.",
        severity="info" if info else None,
    )


def _test_label(node: ast.AST) -> str:
    if isinstance(node, ast.If):
        return f"if {unparse(node.test, 40)}"
    if isinstance(node, ast.While):
        return f"while {unparse(node.test, 40)}"
    if isinstance(node, ast.Assert):
        return f"assert {unparse(node.test, 40)}"
    return f"... if {unparse(node.test, 40)} else ..."  # type: ignore[attr-defined]


@check("TM302", nodes=(ast.If, ast.While, ast.Assert, ast.IfExp))
def tensor_in_condition(node: ast.If | ast.While | ast.Assert | ast.IfExp, ctx: Context) -> None:
    test = node.test
    if not ctx.is_tensor(test):
        return
    ctx.flag(
        node if not isinstance(node, ast.IfExp) else test,
        f"`{_test_label(node)}` converts a tensor to a Python bool, which waits for the GPU.",
        "Keep the decision on the device (`torch.where`, masks, `torch.clamp`) or synchronise"
        " once, deliberately, outside hot loops.",
    )
