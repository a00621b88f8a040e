"""TM2xx — devices and transfers: where tensors are placed and who decides it."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from functools import lru_cache
from types import SimpleNamespace
from weakref import WeakKeyDictionary

from ...report import Fix
from ..accelerator import CPU, where
from ..context import Context
from ..cuda_only import (
    CUDA_UNAVAILABLE,
    comment_declares_cuda_only,
    declares_cuda_only,
    parsed_document,
    text_declares_cuda_only,
)
from ..fixes import fix_of
from ..gpu_placement import Placement, cuda_placement
from ..nodes import (
    SCOPES,
    ancestors,
    block_of,
    device_type_of_literal,
    has_kwargs_splat,
    keyword,
    names_bound_to,
    own_nodes,
    parents_of,
    per_node,
    remember,
    self_attr_name,
    terminal_name,
    top_level_calls,
)
from ..registry import check
from ._common import (
    chain_root,
    format_template,
    is_cuda_literal,
    is_cuda_move,
    move_target,
    unparse,
    unparse_operand,
)
from ._flow import scope_node

_DEVICE_SELECTION_HINT = (
    'Choose the device once: `device = torch.device("cuda" if torch.cuda.is_available() else "cpu")`'
    " and use `.to(device)`."
)


def _names_cuda_flag(test: ast.AST) -> bool:
    """A test that asks whether to use CUDA: `cuda`, `args.cuda`, `use_cuda`, `not args.no_cuda`,
    `torch.cuda.is_available()`, `args.ngpu > 0`, `device.type == "cuda"`, `cfg.device == "gpu"`."""
    for sub in ast.walk(test):
        text = sub.id if isinstance(sub, ast.Name) else sub.attr if isinstance(sub, ast.Attribute) else ""
        low = text.lower()
        if "cuda" in low or "gpu" in low:
            return True
        if (
            isinstance(sub, ast.Constant)
            and isinstance(sub.value, str)
            and sub.value.lower().startswith(("cuda", "gpu"))
        ):
            return True  # `configs.run.device == "gpu"`
        if isinstance(sub, ast.Subscript) and isinstance(sub.slice, ast.Constant):
            key = str(sub.slice.value).lower()
            if "cuda" in key or "gpu" in key:
                return True  # `conf["use_gpu"]`
    return False


_CPU_SWITCHES = frozenset({"cpu", "use_cpu", "cpu_only", "only_cpu", "force_cpu", "on_cpu"})


def _off_branch_of_a_cpu_switch(branch: ast.If | ast.IfExp, child: ast.AST) -> bool:
    """`if not cfg.common.cpu: model.cuda()`, or the `else` of `if args.cpu:`: the CPU switch
    the user sets, read the other way round."""
    test, negated = branch.test, False
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, negated = test.operand, True
    name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else ""
    if name.lower() not in _CPU_SWITCHES:
        return False
    return _in_body(branch, child) == negated


def cuda_flag_attribute(ctx: Context, test: ast.AST) -> bool:
    """`if self.dp:` where the class sets `self.dp = conf["use_gpu"]` (or `= use_cuda`): an
    attribute that holds the caller's CUDA switch under another name (a flag read as it was
    given, not a device the class builds, `torch.device("cuda" if ... else "cpu")`)."""
    cls = next((n for n in reversed(ctx.stack) if isinstance(n, ast.ClassDef)), None)
    if cls is None:
        return False
    flags = _cuda_flag_attributes(cls)
    return any(self_attr_name(sub) in flags for sub in ast.walk(test))


@per_node
def _cuda_flag_attributes(cls: ast.ClassDef) -> frozenset[str]:
    """The `self.` attributes the class sets from a CUDA flag, found once per class."""
    return frozenset(
        attr
        for n in ast.walk(cls)
        if isinstance(n, ast.Assign)
        and isinstance(n.value, (ast.Name, ast.Attribute, ast.Subscript, ast.BoolOp))
        and _names_cuda_flag(n.value)
        and "is_available" not in ast.unparse(n.value)
        for t in n.targets
        if (attr := self_attr_name(t)) is not None
    )


def under_cuda_guard(ctx: Context, call: ast.Call) -> bool:
    """`if args.cuda: x = x.cuda()` or `x.cuda() if use_cuda else x`: the move only happens when
    the user asked for CUDA, so the code already runs on a machine without one."""
    path = [*ctx.stack, call]
    for anc, child in zip(path, path[1:]):
        if (
            isinstance(anc, (ast.With, ast.AsyncWith))
            and child in anc.body
            and _picks_a_cuda_device(ctx, anc)
        ):
            return True  # `with torch.cuda.device(gpu): x.cuda()`: code about the GPU it picked
        if not isinstance(anc, (ast.If, ast.IfExp)) or child is anc.test:
            continue
        if _names_cuda_flag(anc.test) or _off_branch_of_a_cpu_switch(anc, child):
            return True
        if _in_body(anc, child) and cuda_flag_attribute(ctx, anc.test):
            return True  # the `else` of `if self.dp:` is the CPU branch: a `.cuda()` there is a slip
        if isinstance(anc, ast.If) and _branch_needs_cuda(
            ctx, anc.body if _in_body(anc, child) else anc.orelse
        ):
            return True  # `if distributed: DDP(model.cuda(), device_ids=[torch.cuda.current_device()])`
    return False


# calls that only work with a CUDA device present: a branch that makes one runs on CUDA only
_NEEDS_CUDA = frozenset({"torch.cuda.current_device", "torch.cuda.set_device"})


def _picks_a_cuda_device(ctx: Context, block: ast.With | ast.AsyncWith) -> bool:
    return any(
        isinstance(item.context_expr, ast.Call)
        and ctx.qualname(item.context_expr.func) == "torch.cuda.device"
        for item in block.items
    )


def _branch_needs_cuda(ctx: Context, branch: list[ast.stmt]) -> bool:
    return any(
        isinstance(n, ast.Call) and ctx.qualname(n.func) in _NEEDS_CUDA
        for stmt in branch
        for n in ast.walk(stmt)
    )


# `torch.distributed` calls that hand tensors between processes (NCCL: CUDA tensors only)
COLLECTIVES = frozenset(
    {
        "all_reduce",
        "all_gather",
        "all_gather_into_tensor",
        "broadcast",
        "reduce",
        "reduce_scatter",
        "reduce_scatter_tensor",
        "all_to_all",
        "all_to_all_single",
        "gather",
        "scatter",
    }
)


def cuda_by_necessity(ctx: Context, node: ast.AST) -> bool:
    """The CUDA tensor is what a `torch.distributed` collective is handed (`t = torch.tensor([n],
    device="cuda")` then `dist.all_reduce(t)`): NCCL reduces CUDA tensors only. Or the function
    returns (or raises) first when CUDA is missing (`if not torch.cuda.is_available() or not
    dist.is_initialized(): return batches`): the line runs only where CUDA is."""
    fn = ctx.enclosing_function()
    scope = fn if fn is not None else (ctx.stack[0] if ctx.stack else None)
    stmt = ctx.statement()
    if scope is None or stmt is None:
        return False
    for up in reversed(ctx.stack):
        if isinstance(up, ast.Call) and terminal_name(up.func) in COLLECTIVES:
            return True
    if fn is not None and any(
        isinstance(s, ast.If)
        and s.lineno < stmt.lineno
        and CUDA_UNAVAILABLE.search(ast.unparse(s.test))
        and s.body
        and isinstance(s.body[-1], (ast.Return, ast.Raise))
        for s in fn.body
    ):
        return True
    targets = stmt.targets if isinstance(stmt, ast.Assign) else []
    names = {
        e.id
        for t in targets
        for e in (t.elts if isinstance(t, ast.Tuple) else [t])
        if isinstance(e, ast.Name)
    }
    if not names:
        return False
    for n in ast.walk(scope):
        if (
            isinstance(n, ast.Call)
            and n.lineno > stmt.lineno
            and terminal_name(n.func) in COLLECTIVES
            and any(isinstance(a, ast.Name) and a.id in names for a in n.args)
        ):
            return True
    return False


def _in_body(branch: ast.If | ast.IfExp, child: ast.AST) -> bool:
    return child is branch.body if isinstance(branch, ast.IfExp) else child in branch.body


def cuda_only(ctx: Context) -> bool:
    """The code says it runs on CUDA only (see `cuda_only.declares_cuda_only`), so a hardcoded
    `.cuda()` costs it no portability it was meant to have. Read from the whole file or
    notebook, and from the project around a checked file."""
    if ctx.project_cuda_only:
        return True
    root = ctx.stack[0] if ctx.stack else None
    if root is not None and declares_cuda_only(root):
        return True
    if comment_declares_cuda_only(ctx.document):
        return True
    # the source's own tree answered for its own text: parse the document only when it is wider
    return ctx.wider_document and text_declares_cuda_only(ctx.document)


def measures_cuda(ctx: Context) -> bool:
    """The function profiles or times CUDA kernels (`ProfilerActivity.CUDA`, a `sort_by`
    on CUDA time, `torch.cuda.Event(enable_timing=True)`): the GPU is what it measures, so a
    hardcoded CUDA device is its point, not a portability slip."""
    fn = ctx.frame.node
    if fn is None:
        return False
    return remember(fn, "measures_cuda", lambda: _measures_cuda(fn))


def _measures_cuda(fn: ast.AST) -> bool:
    for n in own_nodes(fn):
        if isinstance(n, ast.Attribute) and n.attr == "CUDA" and terminal_name(n.value) == "ProfilerActivity":
            return True
        if isinstance(n, ast.keyword) and n.arg == "sort_by" and isinstance(n.value, ast.Constant):
            if "cuda" in str(n.value.value):
                return True
        if isinstance(n, ast.Call) and ast.unparse(n.func) in ("torch.cuda.Event", "cuda.Event"):
            return True
    return False


@check("TM201", calls={"cuda"})
def cuda_call(call: ast.Call, ctx: Context) -> None:
    if not isinstance(call.func, ast.Attribute) or ctx.in_module_method:
        return
    if ctx.qualname(call.func) == "torch.cuda":
        return
    if under_cuda_guard(ctx, call) or cuda_only(ctx) or _tensorless_loss(ctx, call.func.value):
        return
    if cuda_by_necessity(ctx, call):
        return  # a buffer for an NCCL collective, or a line that runs only where CUDA is
    if _implements_cuda(ctx) or measures_cuda(ctx):
        return
    index = call.args[0] if call.args else keyword(call, "device")
    if isinstance(index, (ast.Name, ast.Attribute)):
        return  # `.cuda(rank)`, `.cuda(args.gpu)`: one GPU per process, chosen at run time
    if _a_library_function(ctx, call):
        return  # `utils.cuda(batch["x"], cuda_available)`: a helper of that module, not the method
    ctx.flag(
        call,
        f"`{unparse_operand(call.func.value, 40)}.cuda({unparse(index, 20) if index is not None else ''})` hardcodes the CUDA device.",
        _DEVICE_SELECTION_HINT,
    )


def _a_library_function(ctx: Context, call: ast.Call) -> bool:
    """`imed_utils.cuda(batch["input"], cuda_available)`: `cuda` called on an imported module
    with a value to move, a function of that module (which may well check for a GPU itself),
    not `Tensor.cuda`, whose only argument is a device."""
    recv = call.func.value  # type: ignore[attr-defined]
    return (
        isinstance(recv, ast.Name)
        and ctx.resolve_import(recv.id) is not None
        and bool(call.args)
        and not isinstance(call.args[0], ast.Constant)
    )


def _implements_cuda(ctx: Context) -> bool:
    """`def cuda(self): self.net.cuda()` in a class: the object's own `.cuda()` passes the
    request on to what it holds, and the caller chose the device by calling it."""
    function = ctx.enclosing_function()
    if function is None or function.name != "cuda":
        return False
    index = ctx.stack.index(function)
    return index > 0 and isinstance(ctx.stack[index - 1], ast.ClassDef)


_TENSOR_KEYWORDS = frozenset({"weight", "pos_weight"})


def _tensorless_loss(ctx: Context, module: ast.AST) -> bool:
    """`nn.CrossEntropyLoss().cuda()`: a loss built without a class weight holds no tensors, so
    `.cuda()` moves nothing and runs the same on a machine without a GPU."""
    return (
        isinstance(module, ast.Call)
        and (ctx.qualname(module.func) or "").startswith("torch.nn.")
        and (ctx.qualname(module.func) or "").endswith("Loss")
        and not module.args
        and not any(k.arg is None or k.arg in _TENSOR_KEYWORDS for k in module.keywords)
    )


def _cuda_index(node: ast.AST) -> str | None:
    """ "1" for `"cuda:1"` / `torch.device("cuda", 1)`; None when no index is named."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("cuda:"):
        return node.value.split(":", 1)[1].strip()
    if (
        isinstance(node, ast.Call)
        and len(node.args) == 2
        and is_cuda_literal_arg(node.args[0])
        and isinstance(node.args[1], ast.Constant)
    ):
        return str(node.args[1].value)
    return None


def is_cuda_literal_arg(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value == "cuda"


_multi_gpu: WeakKeyDictionary[Context, bool] = WeakKeyDictionary()


def _places_on_several_gpus(ctx: Context) -> bool:
    """The source names two or more CUDA devices by index (`"cuda:0"` and `"cuda:1"`): model
    parallel code that places each part on a chosen GPU on purpose."""
    if ctx not in _multi_gpu:
        root = ctx.stack[0] if ctx.stack else None
        found = (
            {i for n in ast.walk(root) if (i := _cuda_index(n)) is not None} if root is not None else set()
        )
        _multi_gpu[ctx] = len(found) >= 2
    return _multi_gpu[ctx]


@check("TM202", calls={"to"}, nodes=(ast.keyword,))
def hardcoded_device(node: ast.AST, ctx: Context) -> None:
    if isinstance(node, ast.keyword):
        if node.arg != "device" or not is_cuda_literal(ctx, node.value):
            return
        call = ctx.parent
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "to":
            return  # reported once, for the `.to(...)` call
        where, label, literal = node.value, f"device={unparse(node.value, 40)}", node.value
    else:
        target = move_target(node)  # type: ignore[arg-type]
        if not isinstance(node.func, ast.Attribute) or not is_cuda_literal(ctx, target):  # type: ignore[attr-defined]
            return
        where, label, literal = node, unparse(node, 50), target
    if literal is not None and _cuda_index(literal) is not None and _places_on_several_gpus(ctx):
        return  # model parallel: each part sits on the GPU the code names for it
    if under_cuda_guard(ctx, where) or cuda_only(ctx) or cuda_by_necessity(ctx, where):  # type: ignore[arg-type]
        return  # only runs when CUDA is there (`if torch.cuda.is_available():`, CUDA-only code, NCCL)
    if measures_cuda(ctx):
        return  # a function that profiles CUDA kernels: the GPU is what it measures
    if _cuda_method(ctx):
        return  # `def cuda(self, device=None): return self.to(torch.device("cuda"))`: its job
    ctx.flag(
        where,
        f"`{label}` hardcodes the CUDA device.",
        _DEVICE_SELECTION_HINT,
    )


def _cuda_method(ctx: Context) -> bool:
    """The code sits in a method named `cuda` (or `to_cuda`/`gpu`), whose documented job is to
    move its object to a CUDA device: naming CUDA is what the caller asked for."""
    fn = ctx.frame.node
    return (
        isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
        and fn.name in ("cuda", "to_cuda", "gpu")
        and ctx.cls is not None
    )


_CPU_FROM = frozenset({"torch.from_numpy", "numpy.asarray", "numpy.array", "np.asarray", "np.array"})


@dataclass
class _Load:
    call: ast.Call
    anchor: SimpleNamespace  # where `ctx.flag` would have put it during the walk
    path: str | None
    literal: bool
    scope: ast.AST | None
    target: str | None  # `device` when the code has one at the load
    into: str | None = None  # `model` of `model.load_state_dict(torch.load(...))`
    location: frozenset[str] = frozenset()  # names the file's path is built from
    template: str | None = None  # `{}.pkl` of `"{}.pkl".format(best_epoch)`


@dataclass
class _Save:
    path: str | None
    line: int
    scope: ast.AST | None
    cpu: bool
    template: str | None = None


@dataclass
class _Files:
    loads: list[_Load] = field(default_factory=list)
    saves: list[_Save] = field(default_factory=list)
    mapped: set[str] = field(default_factory=set)  # files loaded with `map_location`


_files: WeakKeyDictionary[Context, _Files] = WeakKeyDictionary()


def _path_of(ctx: Context, f: ast.AST | None) -> tuple[str | None, bool]:
    """A key for the file a save/load names (`f` of `with open(P) as f` is P), and whether it
    is a string literal."""
    if isinstance(f, ast.Name):
        for anc in reversed(ctx.stack):
            if isinstance(anc, (ast.With, ast.AsyncWith)):
                for item in anc.items:
                    v = item.optional_vars
                    if isinstance(v, ast.Name) and v.id == f.id:
                        f = item.context_expr
                        break
                else:
                    continue
                break
        else:
            f = ctx.origin(f) or f
    if isinstance(f, ast.Call) and isinstance(f.func, ast.Name) and f.func.id == "open" and f.args:
        f = f.args[0]
    if f is None:
        return None, False
    return ast.unparse(f), isinstance(f, ast.Constant) and isinstance(f.value, str)


def _name_template(node: ast.AST | None) -> str | None:
    """The fixed text of a file name built by formatting (`"{}.pkl".format(epoch)`), with each
    filled-in part as `{}`; None for a name that is not built that way."""
    text = format_template(node)
    return text if text is not None and "{}" in text and text.strip("{}") else None


def _file_node(ctx: Context, f: ast.AST | None) -> ast.AST | None:
    """The expression that names the file: `f` itself, or what the name `f` was bound to."""
    if isinstance(f, ast.Name):
        origin = ctx.origin(f)
        if isinstance(origin, ast.expr):
            return origin
    return f


def _saved_from_cpu(ctx: Context, obj: ast.AST | None) -> bool:
    """`torch.save(x.cpu(), p)`, or `net.cpu()` (`net.eval().cpu()`) earlier in the same block
    and not moved back before the save."""
    if obj is None:
        return False
    if isinstance(obj, ast.Dict):
        return bool(obj.values) and all(_saved_from_cpu(ctx, v) for v in obj.values if v is not None)
    if where(ctx, obj) == CPU:
        return True
    root = chain_root(obj)
    if not isinstance(root, ast.Name):
        return False
    # the statement holding the save, and the block (list of statements) holding that
    path = list(ctx.stack)
    at = next((i for i in range(len(path) - 1, -1, -1) if isinstance(path[i], ast.stmt)), None)
    if at is None or at == 0:
        return False
    found = block_of(path[at - 1], path[at], ("body", "orelse", "finalbody", "handlers"))
    if found is None:
        return False
    block, index = found
    before = block[:index]
    for earlier in reversed(before):
        moves = [
            c
            for c in ast.walk(earlier)
            if isinstance(c, ast.Call)
            and isinstance(c.func, ast.Attribute)
            and c.func.attr in ("cpu", "cuda", "to")
            and isinstance(chain_root(c), ast.Name)
            and chain_root(c).id == root.id  # type: ignore[attr-defined]
        ]
        for c in reversed(moves):
            if c.func.attr == "cpu":  # type: ignore[attr-defined]
                return True
            if c.func.attr == "to" and device_type_of_literal(move_target(c)) == "cpu":  # type: ignore[attr-defined]
                return True
            return False
    return False


_RNG_SETTERS = frozenset({"set_rng_state", "set_rng_state_all", "setstate", "set_state"})


def _restores_rng_state(ctx: Context, stmt: ast.AST | None) -> bool:
    """`state = torch.load(rng_file)` whose name only goes to `torch.random.set_rng_state(...)`,
    `random.setstate`, `np.random.set_state` (or an `in` test): a file of random-generator
    states. A checkpoint that also restores a model keeps its finding."""
    if not (
        isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
    ):
        return False
    name = stmt.targets[0].id
    scope = scope_node(ctx)
    allowed: set[int] = set()
    for n in ast.walk(scope):
        if isinstance(n, ast.Call) and terminal_name(n.func) in _RNG_SETTERS:
            allowed.update(id(r) for a in n.args for r in ast.walk(a))
        elif isinstance(n, ast.Compare) and all(isinstance(op, (ast.In, ast.NotIn)) for op in n.ops):
            allowed.update(id(c) for c in n.comparators)
    uses = [
        n
        for n in ast.walk(scope)
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) and n.lineno > stmt.lineno
    ]
    return bool(uses) and all(id(n) in allowed for n in uses)


@check("TM203", calls={"load", "save"}, finish=True)
def load_without_map_location(node: ast.AST, ctx: Context) -> None:
    files = _files.setdefault(ctx, _Files())
    if isinstance(node, ast.Module):
        _decide_loads(ctx, files, node)
        return
    call: ast.Call = node  # type: ignore[assignment]
    q = ctx.qualname(call.func)
    scope = ctx.frame.node
    if q == "torch.save":
        f = keyword(call, "f") or (call.args[1] if len(call.args) >= 2 else None)
        obj = keyword(call, "obj") or (call.args[0] if call.args else None)
        path, _ = _path_of(ctx, f)
        template = _name_template(_file_node(ctx, f))
        files.saves.append(_Save(path, call.lineno, scope, _saved_from_cpu(ctx, obj), template))
        return
    if q != "torch.load":
        return
    if keyword(call, "map_location") is not None or has_kwargs_splat(call) or len(call.args) >= 2:
        path, _ = _path_of(ctx, keyword(call, "f") or (call.args[0] if call.args else None))
        if path is not None:
            files.mapped.add(path)
        return
    parent = ctx.parent
    if isinstance(parent, ast.Call) and parent.args and parent.args[0] is call:
        if (ctx.qualname(parent.func) or "") in _CPU_FROM:
            return  # `torch.from_numpy(torch.load(p))`: the file holds an array, no device
    line, col = call.lineno, call.col_offset
    stmt = ctx.statement()
    if stmt is not None and stmt.lineno != line and stmt.end_lineno != stmt.lineno:
        line, col = stmt.lineno, stmt.col_offset
    f = keyword(call, "f") or (call.args[0] if call.args else None)
    path, literal = _path_of(ctx, f)
    into = (
        unparse(parent.func.value)
        if isinstance(parent, ast.Call)
        and isinstance(parent.func, ast.Attribute)
        and parent.func.attr == "load_state_dict"
        else None
    )
    if into is None and _names_a_data_file(ctx, f):
        return  # a preprocessed dataset or vocabulary: written from the CPU, not a checkpoint
    if into is None and _restores_rng_state(ctx, stmt):
        return  # random-generator states are CPU byte tensors; a CUDA map_location breaks them
    if into is None and ctx.in_dataset_method and not _names_a_checkpoint(ctx, f):
        return  # a dataset's own processed tensors, which its preprocessing writes from the CPU
    if into is None and _shipped_constant(ctx, f):
        return  # a table the package ships beside its code, loaded on every user's machine
    if _from_a_local_process(ctx, f):
        return  # bytes a child process on this machine just wrote: its devices are this machine's
    if into is not None and _NUMBERS_ONLY.search(into.rsplit(".", 1)[-1]):
        return  # a scheduler's or grad scaler's state: Python numbers, nothing placed on a device
    if _other_branch_maps_it(ctx, f):
        return  # `if torch.cuda.is_available(): torch.load(p)` / `else: torch.load(p, map_location=cpu)`
    target = "device" if ctx.defined("device") else None
    files.loads.append(
        _Load(
            call,
            SimpleNamespace(lineno=line, col_offset=col),
            path,
            literal,
            scope,
            target,
            into,
            _location_names(ctx, f),
            _name_template(_file_node(ctx, f)),
        )
    )


# `self.lr_scheduler`, `scaler`, `apex.amp`: objects whose state dicts hold numbers only
_NUMBERS_ONLY = re.compile(r"(sched|scaler$|^amp$)", re.IGNORECASE)


def _other_branch_maps_it(ctx: Context, f: ast.AST | None) -> bool:
    """The load sits in the body of `if torch.cuda.is_available():`, and the `else` loads the
    same file with `map_location`: the author chose the placement for each case, and the plain
    load runs only where CUDA is. (Under `if args.gpu is None:` the plain load also runs on a
    machine without one: that stays a finding.)"""
    if f is None:
        return False
    want = ast.unparse(f)
    path = [*ctx.stack]
    for anc, child in zip(reversed(path[:-1]), reversed(path[1:])):
        if not isinstance(anc, ast.If) or child not in anc.body or not anc.orelse:
            continue
        if not any(
            isinstance(n, ast.Call) and (ctx.qualname(n.func) or "").endswith("cuda.is_available")
            for n in ast.walk(anc.test)
        ):
            continue
        for stmt in anc.orelse:
            for n in ast.walk(stmt):
                if (
                    isinstance(n, ast.Call)
                    and ctx.qualname(n.func) == "torch.load"
                    and keyword(n, "map_location") is not None
                    and n.args
                    and ast.unparse(n.args[0]) == want
                ):
                    return True
    return False


def _from_a_local_process(ctx: Context, f: ast.AST | None) -> bool:
    """`torch.load(io.BytesIO(proc.stdout))` with `proc = subprocess.run(...)` (or the output of
    `subprocess.check_output(...)`): what a child process on this machine just saved. It never
    crosses to a machine without the devices it was saved from."""
    if isinstance(f, ast.Name):
        f = ctx.origin(f)
    if not (isinstance(f, ast.Call) and terminal_name(f.func) == "BytesIO" and f.args):
        return False
    data = f.args[0]
    if isinstance(data, ast.Attribute) and data.attr == "stdout":
        data = ctx.origin(data.value) if isinstance(data.value, ast.Name) else data.value
    return isinstance(data, ast.Call) and (ctx.qualname(data.func) or "").startswith("subprocess.")


_DATA_WORDS = re.compile(r"data|corpus|vocab|split|meta|feature", re.IGNORECASE)
_CHECKPOINT_WORDS = re.compile(
    r"ckpt|checkpoint|model|weight|state|net|best|epoch|resume|param", re.IGNORECASE
)


def _names_a_data_file(ctx: Context, f: ast.AST | None) -> bool:
    """`torch.load(opt.data)`, `torch.load("corpus.pkl")`, `torch.load(vocab_path)`: a file
    named like a dataset, corpus or vocabulary, and not like a checkpoint. Preprocessing
    scripts write those from the CPU (token lists, vocabularies, CPU tensors)."""
    if isinstance(f, ast.Name) and isinstance(origin := ctx.origin(f), ast.Constant):
        f = origin
    template = _name_template(_file_node(ctx, f))
    if template is not None:  # `fn = "corpus.{}.data".format(digest)`: the fixed part names it
        f = ast.Constant(template)
    if isinstance(f, (ast.Call, ast.BinOp)) and (last := _last_component(f)) is not None:
        f = last  # `osp.join(self.root, "split_dict.pt")`: the file's own name says what it holds
    if isinstance(f, ast.Name):
        word = f.id
    elif isinstance(f, ast.Attribute):
        word = f.attr
    elif isinstance(f, ast.Constant) and isinstance(f.value, str):
        folders, _, word = f.value.replace("\\", "/").rpartition("/")  # with its extension: `x.dataset`
        if not _CHECKPOINT_WORDS.search(f.value) and any(_DATA_WORDS.search(d) for d in folders.split("/")):
            return True  # `"/scratch/me/data/wet_mask.pt"`: a file of a data folder, no checkpoint
    else:
        return _in_a_data_folder(ctx, f)
    return bool(_DATA_WORDS.search(word)) and not _CHECKPOINT_WORDS.search(word)


def _in_a_data_folder(ctx: Context, f: ast.AST | None) -> bool:
    """`Path(root).joinpath("split", name, which).with_suffix(".pt")`: a literal folder of the
    path says data (`split`, `data`, `features`) and nothing in it says checkpoint."""
    parts = _path_parts(ctx, f)
    texts = [
        n.value
        for p in parts
        for n in ast.walk(p)
        if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]
    return any(_DATA_WORDS.search(t) for t in texts) and not _names_a_checkpoint(ctx, f)


def _names_a_checkpoint(ctx: Context, f: ast.AST | None) -> bool:
    """Some name or text the load's path is built from says checkpoint (`ckpt`, `model`,
    `weights`, `state`...), one assignment back."""
    return any(_CHECKPOINT_WORDS.search(_word(n)) for part in _path_parts(ctx, f) for n in ast.walk(part))


def _word(node: ast.AST) -> str:
    """The text a node spells: a name, an attribute's name, a string; "" for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else ""


def _last_component(path: ast.Call | ast.BinOp) -> ast.Constant | None:
    """The literal file name a joined path ends with: `os.path.join(d, "meta.pt")`,
    `root / "split_dict.pt"`, `folder + "/vocab.pkl"`; None when the end is not a literal."""
    end = path.args[-1] if isinstance(path, ast.Call) and path.args else getattr(path, "right", None)
    if isinstance(path, ast.Call) and terminal_name(path.func) not in ("join", "Path"):
        return None
    return end if isinstance(end, ast.Constant) and isinstance(end.value, str) else None


def _shipped_constant(ctx: Context, f: ast.AST | None) -> bool:
    """`torch.load(str(Path(__file__).parent) + "/hadamard_tensors.pt")`: a file found beside
    the code itself, named like no checkpoint. A package ships it for every user's machine, CPU
    ones included, so it holds CPU tensors; a checkpoint there (`model.pth`) is still flagged."""
    nodes = [sub for part in _path_parts(ctx, f) for sub in ast.walk(part)]
    if not any(isinstance(n, ast.Name) and n.id == "__file__" for n in nodes):
        return False
    texts = [n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    return bool(texts) and not any(_CHECKPOINT_WORDS.search(t) for t in texts)


def _path_parts(ctx: Context, f: ast.AST | None) -> list[ast.AST]:
    """What a load's path is built from, one assignment back: the expression itself and what
    each name in it was bound to (`best = path + "/ckpt.pth"` -> the load's `best`, then
    `path + "/ckpt.pth"` and what `path` was bound to)."""
    if f is None:
        return []
    parts = [f]
    for name in {n.id for n in ast.walk(f) if isinstance(n, ast.Name)}:
        origin = ctx.origin(ast.Name(id=name, ctx=ast.Load()))
        if origin is not None:
            parts.append(origin)
    return parts


def _location_names(ctx: Context, f: ast.AST | None) -> frozenset[str]:
    """The names a load's path is built from, one assignment back (`best = path + "/ckpt.pth"`
    -> {best, path})."""
    return frozenset(n.id for part in _path_parts(ctx, f) for n in ast.walk(part) if isinstance(n, ast.Name))


def _decide_loads(ctx: Context, files: _Files, tree: ast.Module) -> None:
    """At the end of the source, when every `torch.save` is known: a file this very code wrote
    needs no remapping when it was written from the CPU, or reloaded later in the same run."""
    # files earlier cells of the notebook saved at their top level (`Context.notes`)
    earlier_cells = set(ctx.notes.get(_SAVED_NOTE, {}))
    history: set[str] | None = None
    placement: Placement | None = None
    placement_known = False
    for load in files.loads:
        if load.scope is None:
            if earlier_cells & _file_keys(load.path, load.template):
                continue  # saved by an earlier cell of this notebook: same run, same device
            if history is None:
                history = _saved_in_kernel_history(ctx)
            if history & _file_keys(load.path, load.template):
                continue  # saved by a cell this kernel ran before
        same = [s for s in files.saves if s.path is not None and s.path == load.path]
        own = bool(same)
        if not same and not load.literal and files.saves and all(s.cpu for s in files.saves):
            continue  # every checkpoint this code writes is saved from the CPU
        if same and any(s.line < load.call.lineno and s.scope is load.scope for s in same):
            continue  # saved a few lines earlier in the same run: reloaded onto the same device
        if load.template is not None and any(
            s.template == load.template and s.line < load.call.lineno and s.scope is load.scope
            for s in files.saves
        ):
            continue  # `"{}.pkl".format(epoch)` saved in the loop, the best epoch's file reloaded
        if same and all(s.cpu for s in same):
            continue
        earlier = _calls_before(load.scope or tree, load.call.lineno)
        if same and _saved_by_a_call(earlier, same):
            continue  # `train(model)` saves it, then it is reloaded: same run, same device
        if same and _only_called_after_a_save(tree, load, same):
            continue  # `def test(): torch.load(best)`, called only after the loop saved `best`
        if _handed_to_a_saver(earlier, load) or _kept_by_early_stopping(earlier, load, load.scope or tree):
            continue  # `early_stopping(loss, model, path)` saved it into `path` earlier in this run
        if not placement_known:
            placement, placement_known = _gpu_placement(ctx, tree), True
        if placement is not None:
            # no CPU path: the only device a checkpoint can name is a GPU. Code that leaves
            # everything on the default GPU wrote its files from that GPU, which exists wherever
            # the code runs at all
            # the same file loaded with `map_location` elsewhere: the author remaps it where the
            # GPU is picked (`if args.gpu is None: torch.load(p)` / `else: ..., map_location=loc`),
            # and this plain load is the default-GPU case
            if placement.picks_gpus and not (load.path is not None and load.path in files.mapped):
                _flag_picked_gpu(ctx, load, placement)
            continue
        ctx.flag(
            load.anchor,
            f"`{unparse(load.call)}` restores tensors onto the device they were saved from.",
            "Pass the target device: `torch.load(f, map_location=device)`.",
            # a file this code wrote holds GPU tensors only where the code uses an accelerator
            needs_accelerator=own,
            fix=_map_location_fix(ctx, load),
        )
    saved = ctx.notes.setdefault(_SAVED_NOTE, {})
    for save in files.saves:
        if save.scope is None:
            saved.update(dict.fromkeys(_file_keys(save.path, save.template), True))


def _flag_picked_gpu(ctx: Context, load: _Load, placement: Placement) -> None:
    """A load without `map_location` in code that cannot run without a GPU and picks which
    GPUs to use: the file names the GPU it was written from, which another run may not have
    (or shares with other work); with one process per GPU, every process restores its copy
    onto that one GPU, the pitfall the DDP tutorial warns about."""
    if placement.per_process:
        message = (
            f"`{unparse(load.call)}` restores each tensor onto the GPU it was saved from: with one"
            " process per GPU, every process puts its copy of the checkpoint on that one GPU."
        )
        severity = "warning"
    else:
        message = (
            f"`{unparse(load.call)}` restores each tensor onto the GPU it was saved from: this code"
            " picks its GPU, so a checkpoint written on another one (`cuda:1`) is restored there,"
            " and fails to load on a machine without it."
        )
        severity = "info"
    target = load.target or ('"cuda"' if placement.sets_device else None)
    fix = _map_location_edit(ctx, load, target)
    ctx.flag(
        load.anchor,
        message,
        f"Load onto the GPU this process uses: `torch.load(f, map_location={target or 'device'})`.",
        severity=severity,
        fix=fix,
    )


def _gpu_placement(ctx: Context, tree: ast.Module) -> Placement | None:
    """Where code that cannot run without a GPU puts its tensors (`gpu_placement`), read from
    the whole notebook around a cell when there is one; None where the code may run on the CPU."""
    if ctx.wider_document:
        whole = parsed_document(ctx.document)
        return None if whole is None else cuda_placement(whole, declared=ctx.project_cuda_only)
    if isinstance(ctx.namespace, dict) and "device" in ctx.namespace:
        return None  # a kernel that chose a device in an earlier cell
    return cuda_placement(tree, declared=ctx.project_cuda_only)


_SAVED_NOTE = "TM203.saved"  # ctx.notes key: files the notebook's cells saved at their top level


def _file_keys(path: str | None, template: str | None) -> set[str]:
    """How a save and a load can name the same file: its expression, or its name's template."""
    keys = {f"path:{path}"} if path is not None else set()
    if template is not None:
        keys.add(f"template:{template}")
    return keys


def _saved_in_kernel_history(ctx: Context) -> set[str]:
    """The files the cells this kernel ran before saved at their top level (`_ih`, IPython's
    input history, in the namespace), as `_file_keys`: a file written earlier in the session is
    reloaded in the same run, onto the device it came from."""
    ns = ctx.namespace
    history = ns.get("_ih") if isinstance(ns, dict) else None
    if not isinstance(history, list):
        return set()
    current = "\n".join(ctx.lines).strip()
    out: set[str] = set()
    earlier = history[:-1] if ctx.post_run else history  # after the run, the cell is the last entry
    for source in earlier[-200:]:
        if isinstance(source, str) and "save" in source and source.strip() != current:
            out |= _top_level_saves(source)
    return out


@lru_cache(maxsize=256)
def _top_level_saves(source: str) -> frozenset[str]:
    """`_file_keys` of what one cell's top level `torch.save`s; cells of the history are asked
    again after every later cell, and their text never changes."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return frozenset()
    out: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for call in ast.walk(stmt):
            if not (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr == "save"
                and isinstance(call.func.value, ast.Name)
                and call.func.value.id == "torch"
            ):
                continue
            f = keyword(call, "f") or (call.args[1] if len(call.args) >= 2 else None)
            if f is not None:
                out |= _file_keys(ast.unparse(f), _name_template(f))
    return frozenset(out)


def _map_location_fix(ctx: Context, load: _Load) -> Fix | None:
    """`map_location=device` where the code has a `device`; the CPU where it uses no accelerator
    at all (from there `.to(device)` still works). Code that uses the GPU without a `device`
    name gets no edit: the CPU would leave the loaded model away from its CUDA inputs."""
    in_function = isinstance(load.scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
    if load.target is None and in_function and "device" in ctx.frames[0].names:
        target: str | None = "device"  # a module-level `device`, bound by the time the function runs
    else:
        target = load.target or ('"cpu"' if not ctx.accelerator_seen else None)
    return _map_location_edit(ctx, load, target)


def _map_location_edit(ctx: Context, load: _Load, target: str | None) -> Fix | None:
    if target is None:
        return None
    edit = ctx.edits.add_keyword(load.call, f"map_location={target}")
    return fix_of(f"Load onto `{target}`", [edit], "unsafe")  # the tensors land elsewhere (the point)


def _calls_before(scope: ast.AST | None, line: int) -> list[ast.Call]:
    """The calls a scope makes before `line`, not those inside functions it defines."""
    if scope is None:
        return []
    out: list[ast.Call] = []
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(n, ast.Call) and n.lineno < line:
            out.append(n)
        todo.extend(ast.iter_child_nodes(n))
    return out


def _saved_by_a_call(calls: list[ast.Call], saves: list[_Save]) -> bool:
    """One of the calls runs a function of this source that saves the file."""
    savers = {s.scope.name for s in saves if isinstance(s.scope, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return any(
        (isinstance(c.func, ast.Name) and c.func.id in savers)
        or (
            isinstance(c.func, ast.Attribute)
            and isinstance(c.func.value, ast.Name)
            and c.func.value.id == "self"
            and c.func.attr in savers
        )
        for c in calls
    )


def _only_called_after_a_save(tree: ast.Module, load: _Load, saves: list[_Save]) -> bool:
    """The load sits in a module-level function that is only ever called (at least once) at the
    top level after a top-level save of the same file: the run that saved it reloads it."""
    top = [s.line for s in saves if s.scope is None]
    calls = top_level_calls(tree, load.scope) if top else None
    if calls is None:
        return False
    parents = parents_of(tree)
    return all(
        not any(isinstance(up, SCOPES) for up in ancestors(parents, call))  # called from another function
        and any(line < call.lineno for line in top)
        for call in calls
    )


def _handed_to_a_saver(calls: list[ast.Call], load: _Load) -> bool:
    """A call earlier in the same scope was handed both the module the checkpoint is loaded into
    and the location it is loaded from: a checkpoint callback (`early_stopping(val_loss, model,
    path)`) that saved it during this run."""
    if load.into is None or not load.location:
        return False
    for c in calls:
        args = [*c.args, *(k.value for k in c.keywords)]
        if any(unparse(a) == load.into for a in args) and any(
            isinstance(a, ast.Name) and a.id in load.location for a in args
        ):
            return True
    return False


_EARLY_STOPPING = re.compile(r"early_?stop", re.IGNORECASE)
_BEST_WEIGHTS = re.compile(r"checkpoint|ckpt|best|early|stop", re.IGNORECASE)  # the helper's file


def _kept_by_early_stopping(calls: list[ast.Call], load: _Load, scope: ast.AST) -> bool:
    """`stopper = EarlyStopping(patience=100)` ... `stopper.step(val_acc, model)` ... then
    `model.load_state_dict(torch.load("es_checkpoint.pt"))`: an early-stopping helper that was
    handed the module keeps its best weights in a file of its own, which this is: written
    earlier in the same run, from the device the module is on."""
    if load.into is None or not load.literal or not _BEST_WEIGHTS.search(load.path or ""):
        return False
    helpers = names_bound_to(scope, lambda c: bool(_EARLY_STOPPING.search(terminal_name(c.func) or "")))
    for c in calls:
        f = c.func
        receiver = f.value if isinstance(f, ast.Attribute) else f
        named = isinstance(receiver, ast.Name) and (
            receiver.id in helpers or _EARLY_STOPPING.search(receiver.id) is not None
        )
        if named and any(unparse(a) == load.into for a in [*c.args, *(k.value for k in c.keywords)]):
            return True
    return False


_ITEM_METHODS = frozenset({"__getitem__", "__getitems__", "__iter__"})


_WORKER_CALLBACKS = ("collate_fn", "worker_init_fn")


def in_data_worker_code(ctx: Context) -> str | None:
    """The name of the Dataset method or collate function the walker is inside, if any."""
    if ctx.in_dataset_method and ctx.method in _ITEM_METHODS:
        return f"{ctx.cls.name}.{ctx.method}"  # type: ignore[union-attr]
    for frame in reversed(ctx.frames):
        node = frame.node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and "collate" in node.name.lower():
            return None if _only_called_directly(ctx, node.name) else node.name
        if isinstance(node, ast.Lambda):
            # DataLoader(..., collate_fn=lambda batch: ...)
            for anc in reversed(ctx.stack):
                if isinstance(anc, ast.keyword) and anc.arg in _WORKER_CALLBACKS:
                    return f"{anc.arg}=lambda"
    return None


def _only_called_directly(ctx: Context, name: str) -> bool:
    """`collate_idf(...)` called by the code around it, and its name never handed on as a value
    (`collate_fn=collate_idf`): a helper that pads a batch in the main process, where moving to
    the caller's device is what it is for. A `*collate*` function this source never names may
    still be a DataLoader's: it stays worker code."""
    root = ctx.stack[0] if ctx.stack else None
    if root is None:
        return False
    called, passed = False, False
    funcs = {id(n.func) for n in ast.walk(root) if isinstance(n, ast.Call)}
    for n in ast.walk(root):
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load):
            if id(n) in funcs:
                called = True
            else:
                passed = True
    return called and not passed


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
    where = in_data_worker_code(ctx)
    if where is None or not is_cuda_move(ctx, call):
        return
    _flag_worker_move(ctx, call, where)
