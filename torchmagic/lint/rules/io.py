"""TM6xx — saving and loading checkpoints."""

from __future__ import annotations

import ast

from ..context import Context
from ..kinds import MODULE
from ..nodes import keyword
from ..registry import check
from ._common import unparse


@check("TM601", calls={"save"})
def save_whole_model(call: ast.Call, ctx: Context) -> None:
    if not call.args or ctx.qualname(call.func) != "torch.save":
        return
    obj = call.args[0]
    if ctx.kind(obj) != MODULE:
        return
    ctx.flag(
        call,
        f"`{unparse(call, 50)}` pickles the whole module, tied to its class path.",
        f"Save the weights: `torch.save({unparse(obj, 30)}.state_dict(), f)`.",
    )


@check("TM602", calls={"load"})
def unsafe_load(call: ast.Call, ctx: Context) -> None:
    if ctx.qualname(call.func) != "torch.load":
        return
    wo = keyword(call, "weights_only")
    if not (isinstance(wo, ast.Constant) and wo.value is False):
        return
    ctx.flag(
        call,
        f"`{unparse(call, 60)}` unpickles arbitrary code from the file.",
        "Drop `weights_only=False` (the default `True` only loads tensors and plain containers).",
    )
