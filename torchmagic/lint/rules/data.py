"""TM8xx — data loading."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from weakref import WeakKeyDictionary

from ...report import Fix
from ..context import Context, LoopInfo
from ..fixes import fix_of
from ..kinds import LOADER, MODULE
from ..nodes import has_kwargs_splat, keyword, remember, terminal_name
from ..registry import check
from ._common import chain_root, declared_options, is_cuda_move, live_function, move_target, unparse

_WRAPPERS = ("enumerate", "tqdm", "iter", "zip")
NOTES = "TM801"  # ctx.notes key: module-level loader names -> built with pin_memory=True?


def _unwrap(it: ast.AST) -> ast.AST:
    """`loader` in `enumerate(tqdm(loader))`."""
    for _ in range(4):
        if isinstance(it, ast.Call) and it.args:
            name = it.func.id if isinstance(it.func, ast.Name) else getattr(it.func, "attr", None)
            if name in _WRAPPERS:
                it = it.args[0]
                continue
        break
    return it


def _is_loader_call(ctx: Context, node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and (ctx.qualname(node.func) or "").endswith("DataLoader")


def _loader_calls(ctx: Context, it: ast.AST) -> list[ast.Call]:
    """The `DataLoader(...)` calls a loop may iterate over, through names, `enumerate`/`tqdm`,
    and containers of loaders (`loaders[phase]` with `loaders = {x: DataLoader(...) for x in ...}`)."""
    it = _unwrap(it)
    pick = isinstance(it, ast.Subscript)
    if pick:
        it = it.value  # type: ignore[attr-defined]
    for _ in range(4):
        if isinstance(it, ast.Name):
            origin = ctx.origin(it)
            if origin is None:
                return []
            it = _unwrap(origin)
            continue
        break
    if _is_loader_call(ctx, it):
        return [it]  # type: ignore[list-item]
    if not pick:
        return []
    if isinstance(it, (ast.DictComp,)):
        items: list[ast.AST] = [it.value]
    elif isinstance(it, (ast.ListComp, ast.GeneratorExp)):
        items = [it.elt]
    elif isinstance(it, ast.Dict):
        items = [v for v in it.values if v is not None]
    elif isinstance(it, (ast.List, ast.Tuple)):
        items = list(it.elts)
    else:
        return []
    return [i for i in items if _is_loader_call(ctx, i)]  # type: ignore[misc]


def _unpinned(loader: ast.Call) -> bool:
    if has_kwargs_splat(loader):
        return False
    pin = keyword(loader, "pin_memory")
    return pin is None or (isinstance(pin, ast.Constant) and pin.value is False)


def _mentions_torch_accelerator(node: ast.AST) -> bool:
    return any(isinstance(sub, ast.Attribute) and sub.attr == "accelerator" for sub in ast.walk(node))


def _batch_move(ctx: Context, call: ast.Call) -> bool:
    """A copy to CUDA: `.cuda()`, `.to("cuda")`, `.to(device)` with a CUDA device, or a device
    from `torch.accelerator.current_accelerator()`."""
    if is_cuda_move(ctx, call):
        return True
    if not (isinstance(call.func, ast.Attribute) and call.func.attr == "to"):
        return False
    target = move_target(call)
    if target is None:
        return False
    if isinstance(target, ast.Name):
        origin = ctx.origin(target)
        return origin is not None and (
            _mentions_torch_accelerator(origin) or _chosen_at_run_time(ctx, origin)
        )
    return _mentions_torch_accelerator(target)


def _cpu_by_default(ctx: Context, option: str) -> bool:
    """`parser.add_argument("--device", default="cpu")`: the script runs on the CPU unless told."""
    tree = ctx.stack[0] if ctx.stack else None
    if tree is None:
        return False
    declared = declared_options(tree).get(option)
    default = declared[0] if declared else None
    return isinstance(default, ast.Constant) and default.value == "cpu"


def _chosen_at_run_time(ctx: Context, origin: ast.AST) -> bool:
    """`torch.device(opt.device)` / `torch.device(args.device)`, or `DEVICE = args.device`: a
    device the user picks when running the script (a CUDA one on a GPU machine), not a CPU literal."""
    if (
        isinstance(origin, ast.Attribute)
        and isinstance(origin.value, ast.Name)
        and origin.value.id
        in ("args", "opt", "opts", "options", "cfg", "config", "hparams", "flags", "FLAGS")
        and origin.attr in ("device", "cuda_device", "gpu_device")
    ):
        return not _cpu_by_default(ctx, origin.attr)
    return (
        isinstance(origin, ast.Call)
        and ctx.qualname(origin.func) == "torch.device"
        and bool(origin.args)
        and not isinstance(origin.args[0], ast.Constant)
    )


def _targets(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _from_numpy(ctx: Context, move: ast.Call) -> bool:
    """`torch.from_numpy(batch.data).to(device)`: the loader yields NumPy arrays (a custom
    batch object), turned into a tensor after it; pinning only applies to tensors."""
    value = move.func.value if isinstance(move.func, ast.Attribute) else None
    while (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr != "from_numpy"
    ):
        value = value.func.value  # `torch.from_numpy(x).float().to(device)`
    return isinstance(value, ast.Call) and ctx.qualname(value.func) == "torch.from_numpy"


_REORDERS = frozenset({"transpose", "permute", "t", "swapaxes", "movedim"})


def _host_copy_chain(node: ast.AST | None) -> bool:
    """`batch.long().transpose(1, 0).contiguous()`, `batch.clone()`: methods that copy the batch
    into new (pageable) host memory, a reordered view made contiguous or a clone; a pinned batch
    would be copied out of its pinned pages before the move."""
    methods: list[str] = []
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        methods.append(node.func.attr)
        node = node.func.value
    methods.reverse()  # in the order they run
    if "clone" in methods:
        return True
    return "contiguous" in methods and any(m in _REORDERS for m in methods[: methods.index("contiguous")])


def _rebuilt_on_host(ctx: Context, move: ast.Call) -> bool:
    """`video = preprocess(video)` ... `video[a:b].cuda()`: what is copied is a new tensor that
    a plain function of the code built on the CPU after the loader (or a host copy of the batch,
    `x = x.transpose(1, 0).contiguous()`), so pinning the loader's batches would pin tensors that
    are thrown away."""
    value = chain_root(move.func.value) if isinstance(move.func, ast.Attribute) else None
    if not isinstance(value, ast.Name):
        return False
    origin = ctx.origin(value)
    if origin is None and isinstance(ctx.loop_source(value.id), ast.Name):
        # `adjs = [adj.to(device) for adj in adjs]`: the items of what `adjs` held before
        value = ctx.loop_source(value.id)
        origin = ctx.origin(value)
        if origin is not None and any(n is move for n in ast.walk(origin)):
            origin = ctx.earlier_origin(value.id)
        if origin is None:
            unpacked = ctx.last_unpacking(value)  # `n_id, size, adjs = sample(edge_index, seeds)`
            origin = unpacked.value if unpacked is not None else None
    elif origin is not None and any(n is move for n in ast.walk(origin)):
        origin = ctx.earlier_origin(value.id)  # `x = x.to(device)`: what `x` was before the move
    if _host_copy_chain(origin):
        return True
    return (
        isinstance(origin, ast.Call)
        and isinstance(origin.func, ast.Name)
        and not (ctx.qualname(origin.func) or "").startswith("torch.")
        and origin.func.id not in ctx.classes
        and ctx.kind(origin.func) != MODULE
        and bool(origin.args)
    )


def _moves_batches(ctx: Context, loop: LoopInfo) -> bool:
    """The loop copies something to the GPU itself, or hands its batch to a function of this
    source that does (`for x, y in loader: train_step(x, y)`)."""
    if any(
        _batch_move(ctx, c) and not _from_numpy(ctx, c) and not _rebuilt_on_host(ctx, c) for c in loop.calls
    ):
        return True
    target = getattr(loop.node, "target", None)
    names = _targets(target) if target is not None else set()
    for c in loop.calls:
        if not isinstance(c.func, ast.Name) or not any(
            isinstance(a, ast.Name) and a.id in names for a in (*c.args, *(k.value for k in c.keywords))
        ):
            continue
        fn = ctx.origin(c.func)
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
            isinstance(sub, ast.Call) and _batch_move(ctx, sub) for sub in ast.walk(fn)
        ):
            return True
    return False


@dataclass
class _State:
    # functions that iterate one of their parameters as a loader and move its batches:
    # name -> {(position, parameter name)}
    moving_params: dict[str, set[tuple[int, str]]] = field(default_factory=dict)
    flagged: set[int] = field(default_factory=set)  # id() of loader calls already reported
    keep: list[ast.AST] = field(default_factory=list)  # keeps those ids from being reused


_states: WeakKeyDictionary[Context, _State] = WeakKeyDictionary()


def _serves_device_tensors(ctx: Context, loader: ast.Call) -> bool:
    """`DataLoader(TensorDataset(x.to(device), y.to(device)))`, also through a name: the
    batches are slices of tensors already on the GPU, so nothing is copied from host memory
    (and `pin_memory=True` would raise on them)."""
    dataset = loader.args[0] if loader.args else keyword(loader, "dataset")
    if isinstance(dataset, ast.Name):
        dataset = ctx.origin(dataset)
    if not (
        isinstance(dataset, ast.Call) and terminal_name(dataset.func) == "TensorDataset" and dataset.args
    ):
        return False
    return all(isinstance(a, ast.Call) and _batch_move(ctx, a) for a in dataset.args)


def _flag_loader(ctx: Context, loader: ast.Call) -> None:
    state = _states.setdefault(ctx, _State())
    if id(loader) in state.flagged or _serves_device_tensors(ctx, loader):
        return
    state.flagged.add(id(loader))
    state.keep.append(loader)
    ctx.flag(
        loader,
        f"`{unparse(loader, 50)}` feeds batches that are copied to the GPU from pageable memory.",
        "Pass `pin_memory=True` and move batches with `.to(device, non_blocking=True)`.",
        fix=_pin_fix(ctx, loader),
        needs_accelerator=True,
    )


def _pin_fix(ctx: Context, loader: ast.Call) -> Fix:
    # unsafe: the same batches, but page-locked host memory is a scarcer resource
    pin = next((kw for kw in loader.keywords if kw.arg == "pin_memory"), None)
    edit = (
        ctx.edits.replace(pin.value, "True")
        if pin is not None
        else ctx.edits.add_keyword(loader, "pin_memory=True")
    )
    return fix_of("Pass `pin_memory=True`", [edit], "unsafe")


def _live_unpinned_loader(ctx: Context, it: ast.AST) -> str | None:
    """The name of a live DataLoader (built in an earlier cell) the loop iterates over, when it
    was built without `pin_memory=True`; read from the instance's own `__dict__`, no getattr."""
    it = _unwrap(it)
    if not isinstance(it, ast.Name) or ctx.live_kind(it.id) != LOADER:
        return None
    obj = ctx.live_object(it.id)
    try:
        pinned = object.__getattribute__(obj, "__dict__").get("pin_memory")
    except Exception:
        return None
    return it.id if pinned is False else None


def _earlier_cell_unpinned(ctx: Context, it: ast.AST) -> str | None:
    """A module-level loader of an earlier notebook cell (known from its source) built without
    `pin_memory=True`, that this source does not rebind."""
    it = _unwrap(it)
    if isinstance(it, ast.Subscript):
        it = it.value
    local = ctx.frame is not ctx.frames[0] and isinstance(it, ast.Name) and it.id in ctx.frame.names
    if not isinstance(it, ast.Name) or it.id in ctx.frames[0].values or local:
        return None
    known = ctx.notes.get(NOTES, {})
    return it.id if known.get(it.id) is False else None


def _param_position(ctx: Context, it: ast.AST) -> tuple[str, int, str] | None:
    """(function, position, parameter) when the loop iterates a parameter of its function."""
    it = _unwrap(it)
    fn = ctx.frame.node
    if not isinstance(it, ast.Name) or not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    if ctx.origin(it) is not None:
        return None
    params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    if it.id in params:
        return fn.name, params.index(it.id), it.id
    if it.id in {a.arg for a in fn.args.kwonlyargs}:
        return fn.name, -1, it.id
    return None


@check("TM801", loops=True, finish=True)
def dataloader_pin_memory(loop: LoopInfo | ast.Module, ctx: Context) -> None:
    if isinstance(loop, ast.Module):
        _finish(ctx, loop)
        return
    node = loop.node
    if not isinstance(node, (ast.For, ast.AsyncFor)) or ctx.kind(node.iter) not in (LOADER, None):
        return
    if not _moves_batches(ctx, loop):
        return
    loaders = _loader_calls(ctx, node.iter)
    if loaders:
        for loader in loaders:
            if _unpinned(loader):
                _flag_loader(ctx, loader)
        return
    name = _live_unpinned_loader(ctx, node.iter) or _earlier_cell_unpinned(ctx, node.iter)
    if name is not None:
        _flag_earlier_loader(ctx, node, name)
        return
    where = _param_position(ctx, node.iter)
    if where is not None:
        fn, pos, param = where
        _states.setdefault(ctx, _State()).moving_params.setdefault(fn, set()).add((pos, param))


def _module_level_calls(tree: ast.Module) -> list[ast.Call]:
    """Calls made at module level (where a loader's name means the module-level loader), not
    inside function or class bodies."""
    out: list[ast.Call] = []
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Call):
            out.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return out


def _carry_moving_functions(ctx: Context, tree: ast.Module, state: _State) -> dict[str, set[tuple[int, str]]]:
    """The functions that move the batches of a loader they are given: this source's, and
    those of earlier notebook cells (`def train(model, device, loader)` in one cell,
    `train(model, DEVICE, train_loader)` in a later one). A function this source defines
    again replaces the earlier one."""
    carried: dict[str, set[tuple[int, str]]] = ctx.notes.setdefault(NOTES + ".moving", {})
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            carried.pop(node.name, None)
    carried.update({name: set(params) for name, params in state.moving_params.items()})
    return carried


def _live_moving_params(ctx: Context, name: str) -> set[tuple[int, str]]:
    """For a function of an earlier cell in the kernel (its source parsed): the parameters it
    iterates as a loader while moving the batches to the GPU."""
    fn = live_function(ctx, name)
    if fn is None or name in ctx.frames[0].values:
        return set()
    return remember(fn, "tm801.moving", lambda: _moving_params_of(ctx, fn))


def _moving_params_of(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[tuple[int, str]]:
    params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    out: set[tuple[int, str]] = set()
    for loop in ast.walk(fn):
        if not isinstance(loop, (ast.For, ast.AsyncFor)):
            continue
        it = _unwrap(loop.iter)
        if not (isinstance(it, ast.Name) and it.id in params):
            continue
        if any(isinstance(c, ast.Call) and _batch_move(ctx, c) for c in ast.walk(loop)):
            out.add((params.index(it.id), it.id))
    return out


def _flag_earlier_loader(ctx: Context, anchor: ast.AST, name: str, mover: str | None = None) -> None:
    """A loader of an earlier cell whose batches go to the GPU: at the `for` line that moves
    them, or at the call that hands it to a function (`mover`) that does. In a file or notebook
    once per loader (a kernel checks each cell alone)."""
    seen = ctx.notes.setdefault(NOTES + ".reported", {})
    if name in seen and ctx.namespace is None:
        return
    seen[name] = True
    copied = f"`{mover}` copies" if mover is not None else "are copied"
    ctx.flag(
        anchor,
        f"`{name}` (a DataLoader built without `pin_memory=True`) feeds batches that {copied} to the"
        " GPU from pageable memory.",
        "Rebuild it with `pin_memory=True` and move batches with `.to(device, non_blocking=True)`.",
        needs_accelerator=True,
    )


def _finish(ctx: Context, tree: ast.Module) -> None:
    """Loaders handed to a function that iterates them and moves the batches
    (`test(model, device, test_loader)`), and module-level loaders for the next cells."""
    state = _states.setdefault(ctx, _State())
    moving = _carry_moving_functions(ctx, tree, state)
    if moving or ctx.namespace is not None:
        for call in _module_level_calls(tree):
            if not isinstance(call.func, ast.Name):
                continue
            wanted = moving.get(call.func.id) or _live_moving_params(ctx, call.func.id)
            if not wanted:
                continue
            for pos, param in wanted:
                arg = call.args[pos] if 0 <= pos < len(call.args) else keyword(call, param)
                if arg is None or isinstance(arg, ast.Starred):
                    continue
                for loader in _loader_calls(ctx, arg):
                    if _unpinned(loader):
                        _flag_loader(ctx, loader)
                name = _earlier_cell_unpinned(ctx, arg) or _live_unpinned_loader(ctx, arg)
                if name is not None:
                    _flag_earlier_loader(ctx, call, name, call.func.id)
    known = ctx.notes.setdefault(NOTES, {})
    for name, value in ctx.frames[0].values.items():
        loaders = _loader_calls(ctx, ast.Subscript(value=value, slice=ast.Constant(0), ctx=ast.Load()))
        if loaders:
            known[name] = not any(_unpinned(x) for x in loaders)
        else:
            known.pop(name, None)
