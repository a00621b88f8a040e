"""TM2xx — devices and transfers: where tensors are placed and who decides it."""

from __future__ import annotations

import ast

from ..context import Context
from ..nodes import has_kwargs_splat, keyword, terminal_name
from ..registry import check
from ._common import is_cuda_literal, is_cuda_move, move_target, unparse

_DEVICE_SELECTION_HINT = (
    'Choose the device once: `device = torch.device("cuda" if torch.cuda.is_available() else "cpu")`'
    " and use `.to(device)`."
)


@check("TM201", calls={"cuda"})
def cuda_call(call: ast.Call, ctx: Context) -> None:
    if not isinstance(call.func, ast.Attribute) or ctx.in_module_method:
        return
    if ctx.qualname(call.func) == "torch.cuda":
        return
    ctx.flag(
        call,
        f"`{unparse(call.func.value, 40)}.cuda()` hardcodes the CUDA device.",
        _DEVICE_SELECTION_HINT,
    )


@check("TM202", calls={"to"}, nodes=(ast.keyword,))
def hardcoded_device(node: ast.AST, ctx: Context) -> None:
    if isinstance(node, ast.keyword):
        if node.arg != "device" or not is_cuda_literal(ctx, node.value):
            return
        call = ctx.parent
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "to":
            return  # reported once, for the `.to(...)` call
        where, label = node.value, f"device={unparse(node.value, 40)}"
    else:
        target = move_target(node)  # type: ignore[arg-type]
        if not isinstance(node.func, ast.Attribute) or not is_cuda_literal(ctx, target):  # type: ignore[attr-defined]
            return
        where, label = node, unparse(node, 50)
    ctx.flag(
        where,
        f"`{label}` hardcodes the CUDA device.",
        _DEVICE_SELECTION_HINT,
    )


@check("TM203", calls={"load"})
def load_without_map_location(call: ast.Call, ctx: Context) -> None:
    if ctx.qualname(call.func) != "torch.load":
        return
    if keyword(call, "map_location") is not None or has_kwargs_splat(call) or len(call.args) >= 2:
        return
    ctx.flag(
        call,
        f"`{unparse(call)}` restores tensors onto the device they were saved from.",
        "Pass the target device: `torch.load(f, map_location=device)`.",
    )


_ITEM_METHODS = frozenset({"__getitem__", "__getitems__", "__iter__"})


_WORKER_CALLBACKS = ("collate_fn", "worker_init_fn")


def _in_data_worker_code(ctx: Context) -> str | None:
    """The name of the Dataset method or collate function the walker is inside, if any."""
    if ctx.in_dataset_method and ctx.method in _ITEM_METHODS:
        return f"{ctx.cls.name}.{ctx.method}"  # type: ignore[union-attr]
    for frame in reversed(ctx.frames):
        node = frame.node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and "collate" in node.name.lower():
            return node.name
        if isinstance(node, ast.Lambda):
            # DataLoader(..., collate_fn=lambda batch: ...)
            for anc in reversed(ctx.stack):
                if isinstance(anc, ast.keyword) and anc.arg in _WORKER_CALLBACKS:
                    return f"{anc.arg}=lambda"
    return None


def _callback_moves(ctx: Context, loader: ast.Call) -> None:
    """`DataLoader(ds, collate_fn=fn)` where `fn`, defined in this cell, moves to CUDA."""
    for kw in loader.keywords:
        if kw.arg not in _WORKER_CALLBACKS or not isinstance(kw.value, ast.Name):
            continue
        fn = ctx.origin(kw.value)
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or "collate" in fn.name.lower():
            continue  # unknown, or already reported while walking a `*collate*` function
        for sub in ast.walk(fn):
            if isinstance(sub, ast.Call) and is_cuda_move(ctx, sub):
                _flag_worker_move(ctx, sub, f"{fn.name} (the {kw.arg})")


def _flag_worker_move(ctx: Context, call: ast.Call, where: str) -> None:
    ctx.flag(
        call,
        f"`{unparse(call, 50)}` in `{where}` moves data to the GPU inside DataLoader workers.",
        "Return CPU tensors, use `DataLoader(..., pin_memory=True)` and move each batch in the"
        " loop with `.to(device, non_blocking=True)`.",
    )


@check("TM204", calls={"cuda", "to", "DataLoader"})
def cuda_in_dataset(call: ast.Call, ctx: Context) -> None:
    if terminal_name(call.func) == "DataLoader":
        _callback_moves(ctx, call)
        return
    where = _in_data_worker_code(ctx)
    if where is None or not is_cuda_move(ctx, call):
        return
    _flag_worker_move(ctx, call, where)
