"""TM2xx — devices and transfers: where tensors are placed and who decides it."""

from __future__ import annotations

import ast

from ..registry import documented, rule
from ..scope import Context, has_kwargs_splat, keyword, terminal_name
from ._common import is_cuda_literal, is_cuda_move, move_target, unparse

_DEVICE_SELECTION_HINT = (
    'Choose the device once: `device = torch.device("cuda" if torch.cuda.is_available() else "cpu")`'
    " and use `.to(device)`."
)


@rule("TM201", "cuda-call", "info", calls={"cuda"})
def cuda_call(call: ast.Call, ctx: Context) -> None:
    """
    ## What it does
    Flags `.cuda()` calls outside `nn.Module` methods (TM102 covers those).

    ## Why is this bad?
    `.cuda()` hardcodes one kind of device: the notebook fails on a CPU-only or Apple-silicon
    machine, and every such call has to be edited to change devices.

    ## Example
    ```python
    model = Net().cuda()
    x = x.cuda()
    ```

    ## Use instead
    ```python
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = Net().to(device)
    x = x.to(device)
    ```
    """
    if not isinstance(call.func, ast.Attribute) or ctx.in_module_method:
        return
    if ctx.qualname(call.func) == "torch.cuda":
        return
    ctx.flag(
        call,
        f"`{unparse(call.func.value, 40)}.cuda()` hardcodes the CUDA device.",
        _DEVICE_SELECTION_HINT,
    )


@rule("TM202", "hardcoded-device", "info", calls={"to"}, nodes=(ast.keyword,))
def hardcoded_device(node: ast.AST, ctx: Context) -> None:
    """
    ## What it does
    Flags a literal `"cuda"`/`"cuda:N"` passed as `device=` or to `.to(...)`.

    ## Why is this bad?
    The code cannot run on a machine without that GPU, and moving it to another device means
    editing every literal.

    ## Example
    ```python
    x = torch.zeros(3, device="cuda")
    y = y.to("cuda:0")
    ```

    ## Use instead
    ```python
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    x = torch.zeros(3, device=device)
    y = y.to(device)
    ```
    """
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


@rule("TM203", "load-without-map-location", "warning", calls={"load"})
def load_without_map_location(call: ast.Call, ctx: Context) -> None:
    """
    ## What it does
    Flags `torch.load(f)` without `map_location=`.

    ## Why is this bad?
    The tensors are restored onto the device they were saved from: loading a GPU checkpoint
    fails on a machine without that GPU, and on a GPU machine it first lands everything on
    `cuda:0`, spiking its memory.

    ## Example
    ```python
    state = torch.load("ckpt.pt")
    ```

    ## Use instead
    ```python
    state = torch.load("ckpt.pt", map_location=device)
    ```
    """
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


@rule("TM204", "cuda-in-dataset", "warning", calls={"cuda", "to", "DataLoader"})
def cuda_in_dataset(call: ast.Call, ctx: Context) -> None:
    """
    ## What it does
    Flags `.cuda()` and `.to(<cuda device>)` inside a `Dataset.__getitem__`/`__iter__` or a
    `collate_fn`.

    ## Why is this bad?
    With `num_workers > 0` these run in worker processes: CUDA there fails to initialise or
    creates one CUDA context per worker, and with `num_workers=0` the copies are synchronous.

    ## Example
    ```python
    def __getitem__(self, i):
        return self.x[i].cuda()
    ```

    ## Use instead
    ```python
    def __getitem__(self, i):
        return self.x[i]                 # CPU tensor
    loader = DataLoader(ds, pin_memory=True, num_workers=4)
    for x in loader:
        x = x.to(device, non_blocking=True)
    ```
    """
    if terminal_name(call.func) == "DataLoader":
        _callback_moves(ctx, call)
        return
    where = _in_data_worker_code(ctx)
    if where is None or not is_cuda_move(ctx, call):
        return
    _flag_worker_move(ctx, call, where)


documented(
    "TM205",
    "mixed-device-model",
    "error",
    "live",
    """
    ## What it does
    Flags a live module instance whose parameters and buffers live on more than one device
    (often a tensor attribute left behind by TM106 after `model.to(device)`). A model split
    across devices on purpose, where every submodule sits on one device, is reported as info.

    ## Why is this bad?
    The forward pass fails with "Expected all tensors to be on the same device", or silently
    copies between devices on every call.

    ## Example
    ```python
    model = Net()          # holds self.scale = torch.ones(4), a plain tensor
    model.to("cuda")       # parameters move, the plain tensor stays on the CPU
    ```

    ## Use instead
    ```python
    self.register_buffer("scale", torch.ones(4))   # in __init__: buffers follow .to()
    model.to(device)
    ```
    """,
)
