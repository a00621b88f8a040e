"""TM8xx — data loading."""

from __future__ import annotations

import ast

from ..context import Context, LoopInfo
from ..kinds import LOADER
from ..nodes import has_kwargs_splat, keyword
from ..registry import check
from ._common import is_cuda_move, unparse


def _loader_call(ctx: Context, it: ast.AST) -> ast.Call | None:
    """The `DataLoader(...)` call a loop iterates over, through names, `enumerate` and `tqdm`."""
    for _ in range(4):
        if isinstance(it, ast.Call):
            name = it.func.id if isinstance(it.func, ast.Name) else getattr(it.func, "attr", None)
            if name in ("enumerate", "tqdm", "iter") and it.args:
                it = it.args[0]
                continue
            if (ctx.qualname(it.func) or "").endswith("DataLoader"):
                return it
            return None
        if isinstance(it, ast.Name):
            origin = ctx.origin(it)
            if origin is None:
                return None
            it = origin
            continue
        return None
    return None


def _live_unpinned_loader(ctx: Context, it: ast.AST) -> str | None:
    """The name of a live DataLoader (built in an earlier cell) the loop iterates over, when it
    was built without `pin_memory=True`; read from the instance's own `__dict__`, no getattr."""
    while isinstance(it, ast.Call) and it.args:
        name = it.func.id if isinstance(it.func, ast.Name) else getattr(it.func, "attr", None)
        if name not in ("enumerate", "tqdm", "iter"):
            return None
        it = it.args[0]
    if not isinstance(it, ast.Name) or ctx.live_kind(it.id) != LOADER:
        return None
    obj = ctx.live_object(it.id)
    try:
        pinned = object.__getattribute__(obj, "__dict__").get("pin_memory")
    except Exception:
        return None
    return it.id if pinned is False else None


@check("TM801", loops=True)
def dataloader_pin_memory(loop: LoopInfo, ctx: Context) -> None:
    node = loop.node
    if not isinstance(node, (ast.For, ast.AsyncFor)) or ctx.kind(node.iter) not in (LOADER, None):
        return
    loader = _loader_call(ctx, node.iter)
    if loader is None:
        name = _live_unpinned_loader(ctx, node.iter)
        if name is not None and any(is_cuda_move(ctx, c) for c in loop.calls):
            ctx.flag(
                node,
                f"`{name}` (a DataLoader built without `pin_memory=True`) feeds batches that are"
                " copied to the GPU from pageable memory.",
                "Rebuild it with `pin_memory=True` and move batches with `.to(device, non_blocking=True)`.",
            )
        return
    if has_kwargs_splat(loader):
        return
    pin = keyword(loader, "pin_memory")
    if pin is not None and not (isinstance(pin, ast.Constant) and pin.value is False):
        return
    if not any(is_cuda_move(ctx, c) for c in loop.calls):
        return
    ctx.flag(
        loader,
        f"`{unparse(loader, 50)}` feeds batches that are copied to the GPU from pageable memory.",
        "Pass `pin_memory=True` and move batches with `.to(device, non_blocking=True)`.",
    )
