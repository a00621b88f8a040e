"""TM6xx — saving and loading checkpoints."""

from __future__ import annotations

import ast

from ..registry import rule
from ..scope import MODULE, Context, keyword
from ._common import unparse


@rule("TM601", "save-whole-model", "warning", evidence="static + live", calls={"save"})
def save_whole_model(call: ast.Call, ctx: Context) -> None:
    """
    ## What it does
    Flags `torch.save(model, f)` where `model` is an `nn.Module` (resolved from what the name
    was built from, or from the live namespace).

    ## Why is this bad?
    Pickling a module stores the path of its class: the file no longer loads after the class
    is renamed, moved or edited, on another PyTorch version, or without the defining code.

    ## Example
    ```python
    torch.save(model, "model.pt")
    ```

    ## Use instead
    ```python
    torch.save(model.state_dict(), "model.pt")
    model.load_state_dict(torch.load("model.pt", map_location=device))
    ```
    """
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


@rule("TM602", "unsafe-load", "warning", calls={"load"})
def unsafe_load(call: ast.Call, ctx: Context) -> None:
    """
    ## What it does
    Flags `torch.load(..., weights_only=False)`.

    ## Why is this bad?
    It runs the full unpickler: a checkpoint from an untrusted source can execute arbitrary
    code on load.

    ## Example
    ```python
    ckpt = torch.load("ckpt.pt", weights_only=False)
    ```

    ## Use instead
    ```python
    ckpt = torch.load("ckpt.pt", map_location=device)   # weights_only=True is the default
    # save state dicts, not modules, so that weights_only loading works
    ```
    """
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
