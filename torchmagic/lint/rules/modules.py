"""TM1xx — model definitions: what belongs inside an `nn.Module` and what does not."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple, TypeGuard
from weakref import WeakKeyDictionary

from ...report import Fix
from .. import accelerator, libraries
from ..accelerator import MOVES_ITSELF, in_cpu_branch
from ..context import Context, grad_context
from ..fixes import fix_of
from ..kinds import (
    DTYPE,
    HOST_VALUE_CALLS,
    HOST_VALUE_METHODS,
    MODULE,
    NEW_TENSOR_FUNCS,
    NUMBER,
    PARAMETER,
    TENSOR,
    TENSOR_KINDS,
    TENSOR_METADATA,
)
from ..nodes import (
    ancestors,
    assignments_by_name,
    device_type_of_literal,
    enclosing_blocks,
    has_kwargs_splat,
    is_name,
    keyword,
    names_bound_to,
    own_nodes,
    parameter_default,
    parameters,
    parents_of,
    per_node,
    read_only_for_python,
    remember,
    self_attr_name,
    terminal_name,
    unwrapped_iterable,
)
from ..registry import check
from ._common import (
    chain_nodes,
    chain_root,
    inside_a_call,
    name_like,
    packed_sequence,
    root_name,
    switches_grad_off,
    unparse,
    unparse_operand,
    word_of,
    writes_a_file,
)
from ._flow import grad_off, scope_node
from .devices import _in_body, _tensorless_loss, cuda_flag_attribute, cuda_only, under_cuda_guard
from .sync import offloads_on_request

FACTORIES = NEW_TENSOR_FUNCS | {"logspace", "as_tensor", "normal"}


def _call_label(call: ast.Call) -> str:
    return f"{unparse(call.func)}(...)"


@check("TM101", calls=FACTORIES)
def tensor_created_in_forward(call: ast.Call, ctx: Context) -> None:
    if not ctx.in_forward or not_a_model(ctx):
        return  # a trainer's `forward` is its training loop, not a model's forward pass
    q = ctx.qualname(call.func)
    if q is None or not q.startswith("torch.") or q.count(".") != 1:
        return
    if keyword(call, "device") is not None or has_kwargs_splat(call):
        return
    name = q.split(".", 1)[1]
    if name == "normal" and not _numbers_only(ctx, call):
        return  # `torch.normal(mu, std)` with tensors is built on their device
    if in_cpu_branch(ctx, call) and not _counts_gpus(ctx, call):
        return  # the `else:` of `if torch.cuda.is_available():` / `if x.is_cuda:` runs on the CPU
    if _read_back_on_host(ctx, call):
        return  # host bookkeeping: on the device, every read back would wait for it
    if _shape_arithmetic(ctx, call):
        return  # `torch.tensor(x.shape)` minus another shape: sizes worked out on the host
    if _scalar_operand(ctx, call):
        return  # `f(x, torch.tensor(eps))`: a 0-dim CPU tensor mixes with tensors of any device
    if _of_a_tensor(ctx, call, name):
        return  # `torch.tensor(t)` copies `t` on `t`'s own device: no CPU tensor is built
    if _converts_an_argument(ctx, call, name):
        return  # `torch.tensor(inputs[0])`: the caller's data, converted where it is
    if _computes_on_host_arrays(ctx):
        return  # `e = torch.from_numpy(atom_features) * h`: this forward runs on the CPU
    if _placeholder_of_the_other_branch(ctx, call):
        return  # `else: idx = torch.empty(0, dtype=torch.long)`: a typed stand-in the branch never fills
    legacy = _legacy_wrapper(ctx, call)
    if legacy is not None:
        wrapper, dtype = legacy
        ctx.flag(
            call,
            f"`{_call_label(call)}` in `{ctx.method}` builds a new CPU tensor on every forward call.",
            f"`{wrapper}(...)` around it accepts only CPU tensors: replace both by one call on the"
            f" input's device, `torch.{name}(..., dtype={dtype}, device=x.device)`; for a"
            " constant, `self.register_buffer(...)` in `__init__`.",
        )
        return
    ctx.flag(
        call,
        f"`{_call_label(call)}` in `{ctx.method}` builds a new CPU tensor on every forward call.",
        f"Build it on the input's device: {_device_following(name)}; for a constant,"
        " `self.register_buffer(...)` in `__init__`.",
        fix=_on_input_device(call, name, ctx),
    )


# factories whose size alone says whether they hold any element
_EMPTY_FACTORIES = frozenset({"torch.empty", "torch.zeros", "torch.ones"})


def _zero_elements(call: ast.Call) -> bool:
    """`torch.empty(0, dtype=...)`, `torch.zeros((0, 3))`: a size with a literal 0, nothing allocated."""
    if not call.args:
        return False
    sizes = call.args[0].elts if isinstance(call.args[0], (ast.Tuple, ast.List)) else call.args
    return any(isinstance(a, ast.Constant) and a.value == 0 and type(a.value) is int for a in sizes)


def _placeholder_of_the_other_branch(ctx: Context, call: ast.Call) -> bool:
    """`if self.opt: rows, cols = build_index(edges) else: rows, cols = torch.empty(0), torch.empty(0)`:
    zero-element tensors bound in one branch of an `if` whose other branch binds the same names
    from a computation. They stand in for values that branch does not use (TorchScript wants one
    type for both), hold no element, and no kernel reads them."""
    if ctx.qualname(call.func) not in _EMPTY_FACTORIES or not _zero_elements(call):
        return False
    stmt = ctx.statement()
    if not isinstance(stmt, ast.Assign):
        return False
    mine = {n.id for t in stmt.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    for anc in reversed(ctx.stack):
        if isinstance(anc, ast.If) and anc.orelse:
            other = anc.orelse if stmt in anc.body else anc.body if stmt in anc.orelse else None
            if other is None:
                return False
            bound = {
                n.id
                for st in other
                if isinstance(st, ast.Assign)
                for t in st.targets
                for n in ast.walk(t)
                if isinstance(n, ast.Name)
            }
            return bool(mine) and mine <= bound
    return False


_LEGACY_DTYPES = {
    "Tensor": "torch.float",
    "FloatTensor": "torch.float",
    "DoubleTensor": "torch.double",
    "HalfTensor": "torch.half",
    "BFloat16Tensor": "torch.bfloat16",
    "LongTensor": "torch.long",
    "IntTensor": "torch.int",
    "ShortTensor": "torch.short",
    "CharTensor": "torch.int8",
    "ByteTensor": "torch.uint8",
    "BoolTensor": "torch.bool",
}


def _legacy_wrapper(ctx: Context, call: ast.Call) -> tuple[str, str] | None:
    """`torch.FloatTensor(torch.zeros(...))`: a legacy type constructor around the factory,
    which raises when handed a tensor on another device, so `device=` must not go inside it.
    Returns the constructor and the dtype it gives."""
    parent = ctx.stack[-1] if ctx.stack else None
    if not (isinstance(parent, ast.Call) and any(a is call for a in parent.args)):
        return None
    q = ctx.qualname(parent.func) or ""
    head, _, tail = q.rpartition(".")
    if head in ("torch", "torch.cuda") and tail in _LEGACY_DTYPES:
        return q, _LEGACY_DTYPES[tail]
    return None


# calls that gather tensors into one or keep them: all must share a device, 0-dim or not
_GATHERING = frozenset({"append", "extend", "insert", "cat", "concat", "concatenate", "stack"})
_GATHERING |= {"hstack", "vstack", "dstack", "tensor", "as_tensor"}


def _scalar_operand(ctx: Context, call: ast.Call) -> bool:
    """`self.f(x, torch.tensor(y_th))` with `y_th=10.0`, `x * torch.tensor(scale)`: a 0-dim
    tensor built from a Python number, handed straight to an operation or a function, where
    PyTorch takes it as a scalar next to tensors of any device. Not one appended to a list or
    joined by `torch.stack`/`torch.cat` (`losses.append(torch.tensor(0).float())`): joining
    needs one device."""
    if not accelerator.scalar_tensor(ctx, call) or isinstance(call.args[0], (ast.Constant, ast.UnaryOp)):
        return False
    up = ctx.stack[-1] if ctx.stack else None
    if isinstance(up, ast.BinOp):
        return True
    return (
        isinstance(up, ast.Call)
        and any(a is call for a in up.args)
        and terminal_name(up.func) not in _GATHERING
    )


def _of_a_tensor(ctx: Context, call: ast.Call, name: str) -> bool:
    """`torch.tensor(adj)`, `torch.as_tensor(x)` with `adj`/`x` a tensor (a forward input, an
    annotated `torch.Tensor`): the result stays on the device of the tensor it is built from.
    What is left is a needless copy, not a CPU tensor."""
    return name in ("tensor", "as_tensor") and bool(call.args) and ctx.kind(call.args[0]) in TENSOR_KINDS


def _converts_an_argument(ctx: Context, call: ast.Call, name: str) -> bool:
    """`X = torch.tensor(inputs[0])` in a `forward` documented to take NumPy arrays or tensors:
    the caller's data converted, not a tensor made from nothing each call. A tensor is copied on
    its own device; an array's data is on the host whatever the call says, and there is no
    constant to keep as a buffer. The value is a chain from a parameter (not `self`, not a
    number) that the function never rebinds, and the result is not moved afterwards:
    `torch.tensor(lengths).to(x.device)` wants the tensor on the device, and `device=` builds it
    there at once."""
    if name not in ("tensor", "as_tensor") or not call.args or ctx.kind(call.args[0]) == NUMBER:
        return False
    if _of_a_shape(call.args[0]):
        return False  # `torch.tensor(x.shape)`: sizes, not the caller's data
    fn = ctx.frame.node
    root = root_name(call.args[0])
    if root is None or root in ("self", "cls") or not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    a = fn.args
    if root not in {p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)}:
        return False
    uses = _function_uses(fn)
    if len(uses.bindings.get(root, ())) != 1:
        return False
    up = ctx.stack[-1] if ctx.stack else None
    if isinstance(up, ast.Attribute) and up.attr in ("to", "cuda"):
        return False  # `torch.tensor(lengths).to(x.device)`
    stmt = ctx.statement()
    bound = (
        {n.id for t in stmt.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        if isinstance(stmt, ast.Assign)
        else {stmt.target.id}
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
        else set()
    )
    return not any(
        isinstance(holder := uses.parents.get(r), ast.Attribute) and holder.attr in ("to", "cuda")
        for b in bound
        for r in uses.reads.get(b, ())
    )


def _computes_on_host_arrays(ctx: Context) -> bool:
    """The function turns NumPy arrays into tensors with `torch.from_numpy` (a CPU tensor
    sharing the array's memory) and moves nothing anywhere (no `.to`, `.cuda`, `device=`): it
    computes on the CPU by construction, and a factory there matches that data. Giving the
    factory a device alone would not run the function on a GPU."""
    fn = ctx.frame.node
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    return remember(fn, "TM101.from_numpy_unmoved", lambda: _from_numpy_unmoved(ctx, fn))


def _from_numpy_unmoved(ctx: Context, fn: ast.AST) -> bool:
    converts = False
    for n in ast.walk(fn):
        if isinstance(n, ast.keyword) and n.arg == "device":
            return False
        if not isinstance(n, ast.Call):
            continue
        if isinstance(n.func, ast.Attribute) and n.func.attr in ("to", "cuda"):
            return False
        converts = converts or ctx.qualname(n.func) == "torch.from_numpy"
    return converts


def _counts_gpus(ctx: Context, call: ast.Call) -> bool:
    """A test of the branches around the call counts GPUs (`torch.cuda.device_count() > 1`,
    `args.ngpu > 1`): its `else:` may still run on one GPU. Asking for any GPU at all
    (`> 0`, `>= 1`, `!= 0`) is a presence test, whose `else:` runs on the CPU."""
    presence = {(ast.Gt, 0), (ast.GtE, 1), (ast.NotEq, 0)}
    for anc in ctx.stack:
        if not isinstance(anc, (ast.If, ast.IfExp)):
            continue
        for sub in ast.walk(anc.test):
            if (
                isinstance(sub, ast.Compare)
                and any(
                    isinstance(c, ast.Constant)
                    and isinstance(c.value, (int, float))
                    and not isinstance(c.value, bool)
                    for c in (sub.left, *sub.comparators)
                )
                and any(name_like(n, "cuda", "gpu") for n in ast.walk(sub))
            ):
                pairs = [
                    (type(op), c.value)
                    for op, c in zip(sub.ops, sub.comparators)
                    if isinstance(c, ast.Constant)
                ]
                if not (len(sub.ops) == 1 and pairs and pairs[0] in presence):
                    return True
    return False


def _numbers_only(ctx: Context, call: ast.Call) -> bool:
    """`torch.normal(0.0, 1.0, size=...)`: mean and std are Python numbers, not tensors."""
    args = [*call.args[:2], *(kw.value for kw in call.keywords if kw.arg in ("mean", "std"))]
    return all(
        isinstance(a, ast.Constant)
        or (isinstance(a, ast.UnaryOp) and isinstance(a.operand, ast.Constant))
        or ctx.kind(a) == NUMBER
        for a in args
    )


# ---- TM101: a tensor read back only as Python values is host bookkeeping ---------------

_HOST_CALLS = frozenset({"int", "float", "bool", "list", "tuple", "range", "len"})
_TESTS = (ast.If, ast.While, ast.IfExp, ast.Assert)


def _of_a_shape(node: ast.AST) -> bool:
    """`x.shape`, `x.size()`, `x.shape[2:]`."""
    while isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "size":
        return not node.args
    return isinstance(node, ast.Attribute) and node.attr == "shape"


def _shape_tensor(call: ast.Call) -> bool:
    """`torch.tensor(x.shape)`, `torch.as_tensor(x.shape[2:])`: a tensor of sizes."""
    return (
        terminal_name(call.func) in ("tensor", "as_tensor")
        and len(call.args) == 1
        and _of_a_shape(call.args[0])
    )


def _shape_arithmetic(ctx: Context, call: ast.Call) -> bool:
    """`skip = torch.tensor(a.shape)`, `have = torch.tensor(b.shape)`, then `crop = skip[2:] -
    have[2:]`: tensors of sizes, built on the host to work out a padding or a crop, that meet
    no tensor other than each other. On the device each size read back would wait."""
    fn = ctx.frame.node
    stmt = ctx.statement()
    if not (
        isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
        and _shape_tensor(call)
        and isinstance(stmt, ast.Assign)
        and stmt.value is call
    ):
        return False
    shapes = names_bound_to(fn, _shape_tensor)
    for n in ast.walk(fn):
        if isinstance(n, ast.BinOp):
            operands = {m.id for side in (n.left, n.right) for m in ast.walk(side) if isinstance(m, ast.Name)}
            if operands & shapes and not operands <= shapes:
                return False
    return True


def _read_back_on_host(ctx: Context, call: ast.Call) -> bool:
    """`idx = torch.cumsum(torch.unique_consecutive(torch.tensor(sizes), return_counts=True)[1], 0)`
    then only `for end in idx: xs[start:end]`: the tensor, and what torch functions of it alone
    compute, is read back only as Python values (`.tolist()`, `.item()`, `int()`, slice bounds,
    `if` tests against constants), never meeting another tensor, and is read at least once. On
    the CPU that is free; on the input's device each read would wait for the device."""
    fn = ctx.frame.node
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    parents = parents_of(fn)
    loads = _function_uses(fn).reads
    todo: list[ast.AST] = [call]
    seen: set[str] = set()
    reads = 0
    while todo:
        names = _follow(ctx, todo.pop(), parents)
        if names is None:
            return False
        reads += not names
        for name in names - seen:
            seen.add(name)
            todo.extend(loads.get(name, ()))
    return reads > 0


def _follow(ctx: Context, node: ast.AST, parents: dict[int, ast.AST]) -> set[str] | None:
    """Where the value of `node` goes, through torch functions of it alone and constant
    indexing: an empty set for a Python value read, the names it is bound to (`start = end`,
    `_, counts = ...`, `for end in idx`), None for anything else (it meets other tensors)."""
    while True:
        up = parents.get(id(node))
        if _host_use(ctx, up, node, parents):
            return set()
        if isinstance(up, ast.Subscript) and up.value is node and isinstance(up.slice, ast.Constant):
            node = up  # `torch.unique(t, return_counts=True)[1]`
        elif _alone_in(ctx, up, node):
            node = up  # type: ignore[assignment]
        elif _method_alone(ctx, up, node, parents):
            node = parents[id(up)]
        elif isinstance(up, ast.Assign) and up.value is node and len(up.targets) == 1:
            return _target_names(up.targets[0])
        elif isinstance(up, ast.For) and up.iter is node:
            return _target_names(up.target)
        else:
            return None


def _target_names(target: ast.AST) -> set[str] | None:
    """`a`, `a, b`: the names an assignment binds, None for an attribute or item target."""
    elts = target.elts if isinstance(target, ast.Tuple) else [target]
    if not all(isinstance(e, ast.Name) for e in elts):
        return None
    return {e.id for e in elts}  # type: ignore[attr-defined]


def _plain_args(ctx: Context, call: ast.Call, skip: ast.AST) -> bool:
    """Every argument of `call` but `skip` is a Python constant or number: no other tensor."""
    values = [*call.args, *(kw.value for kw in call.keywords)]
    return all(
        v is skip or isinstance(v, ast.Constant) or ctx.kind(v) == NUMBER for v in values
    ) and not has_kwargs_splat(call)


def _alone_in(ctx: Context, up: ast.AST | None, node: ast.AST) -> bool:
    """`torch.cumsum(node, 0)`: a torch function of this tensor alone."""
    return (
        isinstance(up, ast.Call)
        and node in up.args
        and (ctx.qualname(up.func) or "").startswith("torch.")
        and _plain_args(ctx, up, node)
    )


def _method_alone(ctx: Context, up: ast.AST | None, node: ast.AST, parents: dict[int, ast.AST]) -> bool:
    """`node.cumsum(0)`: a tensor method called with Python values only."""
    call = parents.get(id(up)) if isinstance(up, ast.Attribute) and up.value is node else None
    return isinstance(call, ast.Call) and call.func is up and _plain_args(ctx, call, node)


def _host_use(ctx: Context, up: ast.AST | None, node: ast.AST, parents: dict[int, ast.AST]) -> bool:
    """`node.tolist()`, `int(node)`, `xs[a:node]`, `if node == 0:`, `if torch.rand(1) < self.p:`
    (`self.p` a number): a read of a Python value."""
    if isinstance(up, ast.Slice):
        return True
    if isinstance(up, ast.Attribute) and up.value is node and up.attr in HOST_VALUE_METHODS:
        return isinstance(parents.get(id(up)), ast.Call)
    if isinstance(up, ast.Call) and isinstance(up.func, ast.Name) and up.func.id in _HOST_CALLS:
        return node in up.args
    if isinstance(up, ast.Compare) and not all(
        isinstance(v, ast.Constant) or ctx.kind(v) == NUMBER
        for v in (up.left, *up.comparators)
        if v is not node
    ):
        return False  # compared with another tensor, it meets it
    test = up
    while isinstance(test, (ast.Compare, ast.BoolOp, ast.UnaryOp)):
        child, test = test, parents.get(id(test))
        if isinstance(test, _TESTS) and test.test is child:
            return True
    return False


# the factories PyTorch has a `x.new_*` method or a `torch.*_like` function for (no
# `x.new_arange`, no `torch.arange_like`, no `torch.tensor_like`)
_NEW_METHODS = frozenset({"zeros", "ones", "empty", "full", "tensor"})
_LIKE_FUNCTIONS = frozenset({"zeros", "ones", "empty", "full", "rand", "randn", "randint"})


def _device_following(name: str) -> str:
    """The spellings of `torch.<name>` that build on the input's device, real APIs only."""
    if name == "normal":
        # with tensor `mean`/`std` there is no `device=`; the size form takes one
        return "`torch.normal(mean, std, size, device=x.device)` or `mean + std * torch.randn_like(x)`"
    ways = [f"`torch.{name}(..., device=x.device)`"]
    if name in _NEW_METHODS:
        ways.append(f"`x.new_{name}(...)`")
    if name in _LIKE_FUNCTIONS:
        ways.append(f"`torch.{name}_like(x)`")
    return ", ".join(ways[:-1]) + f" or {ways[-1]}" if len(ways) > 1 else ways[0]


# factories that take `device=` (`torch.normal(mean, std)` with tensors does not)
_DEVICE_FACTORIES = FACTORIES - {"normal"}
_TENSOR_READS = frozenset({"size", "shape", "dim", "ndim", "numel", "device", "dtype"})


def _on_input_device(call: ast.Call, name: str, ctx: Context) -> Fix | None:
    """`torch.zeros(n, m)` -> `torch.zeros(n, m, device=x.device)`, with `x` a tensor the
    forward already reads the shape of, or its input. Unsafe: the tensor moves (the point),
    and code that relied on a CPU tensor there changes. Not `x.new_zeros`, which would also
    take x's dtype."""
    if name not in _DEVICE_FACTORIES or (name == "as_tensor" and len(call.args) > 2):
        return None
    anchor = _input_tensor(call, ctx)
    if anchor is None:
        return None
    return fix_of(
        "Build it on the input's device", [ctx.edits.add_keyword(call, f"device={anchor}.device")], "unsafe"
    )


def _bound_inside(call: ast.Call) -> set[str]:
    """Names the call's own comprehensions and lambdas bind (`inp` in
    `torch.tensor([inp.shape[-1] for inp in x])`): out of scope where `device=` would go."""
    out: set[str] = set()
    for sub in ast.walk(call):
        if isinstance(sub, ast.comprehension):
            out.update(n.id for n in ast.walk(sub.target) if isinstance(n, ast.Name))
        elif isinstance(sub, ast.Lambda):
            out.update(a.arg for a in (*sub.args.posonlyargs, *sub.args.args, *sub.args.kwonlyargs))
    return out


def _read_as_data(call: ast.Call) -> set[str]:
    """Names the call reads other than through a shape read (`x` in `torch.tensor(x)`,
    `[t.shape[-1] for t in x]`, `map(f, x)`): their values are the data, maybe a list or a
    number, which has no `.device`."""
    shape_reads = {
        id(sub.value)
        for sub in ast.walk(call)
        if isinstance(sub, ast.Attribute) and sub.attr in _TENSOR_READS
    }
    return {sub.id for sub in ast.walk(call) if isinstance(sub, ast.Name) and id(sub) not in shape_reads}


def _input_tensor(call: ast.Call, ctx: Context) -> str | None:
    # a name whose shape the factory's arguments read: `torch.zeros(x.size(0), 10)`, never one
    # that only the call's own comprehension binds
    inner = _bound_inside(call)
    for sub in ast.walk(call):
        if (
            isinstance(sub, ast.Attribute)
            and sub.attr in _TENSOR_READS
            and isinstance(sub.value, ast.Name)
            and sub.value.id != "self"
            and sub.value.id not in inner
            and ctx.kind(sub.value) not in (MODULE,)
        ):
            return sub.value.id
    fn = ctx.frame.node
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    args = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    if len(args) < 2 or args[0] != "self":
        return None
    # the input itself, when named like a tensor (`batch` is as often a dict) and the call does
    # not take it as its data (a list of tensors has no `.device`)
    return args[1] if args[1] in _INPUT_NAMES and args[1] not in _read_as_data(call) else None


_INPUT_NAMES = frozenset(
    {
        "x",
        "input",
        "inputs",
        "inp",
        "X",
        "src",
        "tgt",
        "h",
        "hidden",
        "feats",
        "features",
        "img",
        "imgs",
        "image",
        "images",
        "q",
        "query",
        "z",
        "logits",
        "seq",
        "tokens",
        "input_ids",
        "emb",
        "embeddings",
    }
)


_DEVICE_STRINGS = ("cuda", "cpu", "mps", "xpu", "meta")


def _is_device_literal(ctx: Context, arg: ast.AST) -> bool:
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value.split(":", 1)[0] in _DEVICE_STRINGS
    if isinstance(arg, ast.Call) and ctx.qualname(arg.func) == "torch.device":
        return True
    return False


def _is_global_device(ctx: Context, arg: ast.AST) -> bool:
    """A device the module fixes itself: a module-level name (not a local, not a parameter), or
    `self.<...device...>` set in the class from a literal or a global (not from the caller)."""
    if isinstance(arg, ast.Name):
        if any(arg.id in f.names for f in ctx.frames[1:]):
            return False  # a local or parameter, also of a function around a lambda (`map(lambda t: t.to(device), ...)`)
        kind = ctx.kind(arg)
        return kind not in TENSOR_KINDS and kind != DTYPE and kind != MODULE
    if isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name) and arg.value.id == "self":
        # `self.device` fixed at construction time from a literal is still the model choosing its
        # device; one passed in by the caller (a pipeline shard's device) or read off the
        # module's own tensors is not
        return "device" in arg.attr.lower() and _self_attr_origin(ctx, arg.attr) == "module"
    return False


def _from_outside(ctx: Context, value: ast.AST, params: set[str]) -> bool:
    """The value is chosen by the caller (it reads a parameter) or follows the module's own
    tensors (`next(self.parameters()).device`, `x.device`)."""
    for sub in ast.walk(value):
        if isinstance(sub, ast.Name) and sub.id in params:
            return True
        if isinstance(sub, ast.Attribute) and sub.attr == "device" and ctx.qualname(sub) != "torch.device":
            return True
    return False


def _self_attr_origin(ctx: Context, attr: str) -> str | None:
    """Who chooses `self.<attr>`: "caller" (a constructor argument, or the device of the
    module's own tensors), "module" (a literal, `torch.device("cuda" if ...)`, a global) or
    None when the class does not say (an attribute of a base defined elsewhere)."""
    found = None
    for fn in ctx.class_methods():
        params = parameters(fn) - {"self"}
        if fn.name == attr and any((ctx.qualname(d) or "").endswith("property") for d in fn.decorator_list):
            returns = [r.value for r in ast.walk(fn) if isinstance(r, ast.Return) and r.value]
            return "caller" if any(_from_outside(ctx, r, params) for r in returns) else "module"
        for sub in ast.walk(fn):
            if not isinstance(sub, (ast.Assign, ast.AnnAssign)) or sub.value is None:
                continue
            targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
            if not any(self_attr_name(t) == attr for t in targets):
                continue
            if _from_outside(ctx, sub.value, params):
                return "caller"
            found = "module"
    return found


def _device_target(ctx: Context, call: ast.Call) -> ast.AST | None:
    dev = keyword(call, "device")
    if dev is not None:
        return dev
    if call.args:
        return call.args[0]
    return None


_RPC_WORDS = frozenset({"to_here", "rpc_sync", "rpc_async", "RRef", "local_value"})
_state: WeakKeyDictionary[Context, dict[str, Any]] = WeakKeyDictionary()


def _uses_rpc(ctx: Context) -> bool:
    """The source runs modules behind `torch.distributed.rpc`: tensors cross the RPC boundary
    on the CPU, and each shard is placed on its worker's device on purpose."""
    state = _state.setdefault(ctx, {})
    if "rpc" not in state:
        found = libraries.imports_rpc(ctx)
        root = ctx.stack[0] if ctx.stack else None
        if not found and root is not None:
            found = any(
                (isinstance(n, ast.Attribute) and n.attr in _RPC_WORDS)
                or (isinstance(n, ast.Name) and n.id in _RPC_WORDS)
                for n in ast.walk(root)
            )
        state["rpc"] = found
    return state["rpc"]


def _model_parallel(ctx: Context) -> bool:
    """The class places its submodules on two or more devices (`self.a = ....to("cuda:0")`,
    `self.b.to("cuda:1")`): model parallel, where moving activations between parts is the point."""
    state = _state.setdefault(ctx, {})
    cache = state.setdefault("parallel", {})
    cls = ctx.cls.node if ctx.cls is not None else None
    if cls is None:
        return False
    if id(cls) not in cache:
        targets: set[str] = set()
        for node in ctx.class_chain():
            for sub in ast.walk(node):
                if isinstance(sub, ast.Assign) and isinstance(sub.value, ast.Call):
                    owner = sub.targets[0]
                    call = sub.value
                elif isinstance(sub, ast.Expr) and isinstance(sub.value, ast.Call):
                    call = sub.value
                    owner = call.func.value if isinstance(call.func, ast.Attribute) else None
                else:
                    continue
                f = call.func
                if not (isinstance(f, ast.Attribute) and f.attr in ("to", "cuda")):
                    continue
                if not (
                    isinstance(owner, ast.Attribute)
                    and isinstance(owner.value, ast.Name)
                    and owner.value.id == "self"
                ):
                    continue
                targets.add(_device_key(ctx, _device_target(ctx, call), f.attr))
        targets.discard("")
        cache[id(cls)] = (cls, len(targets) >= 2)
    return cache[id(cls)][1]


def _device_key(ctx: Context, target: ast.AST | None, method: str) -> str:
    """One spelling per device: `.cuda()`, `.to("cuda")` and `.to("cuda:0")` are all "cuda:0";
    dtypes and tensors give "" (not a placement)."""
    if target is None:
        return "cuda:0" if method == "cuda" else ""
    if isinstance(target, ast.Constant):
        v = target.value
        if isinstance(v, bool):
            return ""
        if isinstance(v, int):
            return f"cuda:{v}"
        if isinstance(v, str):
            kind, _, index = v.partition(":")
            return f"{kind}:{index or 0}"
        return ""
    if isinstance(target, ast.Call) and ctx.qualname(target.func) == "torch.device" and target.args:
        if all(isinstance(a, ast.Constant) for a in target.args):
            kind, _, index = str(target.args[0].value).partition(":")  # type: ignore[attr-defined]
            if len(target.args) > 1:
                index = str(target.args[1].value)  # type: ignore[attr-defined]
            return f"{kind}:{index or 0}"
    text = ast.unparse(target).lower()
    if "dev" in text or "gpu" in text:
        return text  # `self.dev1`, `gpu_ids[0]`: a device expression
    return ""


def _caller_cuda_flag(ctx: Context, call: ast.Call) -> bool:
    """`if self.use_cuda: h = h.cuda()`: a CUDA switch the caller sets (an attribute of the
    module or a parameter), not `torch.cuda.is_available()`, which lets the module pick a GPU
    the caller's model may not be on."""
    if not under_cuda_guard(ctx, call):
        return False
    fn = ctx.frame.node
    params = parameters(fn) - {"self"} if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) else set()
    path = [*ctx.stack, call]
    for anc, child in zip(path, path[1:]):
        if isinstance(anc, (ast.If, ast.IfExp)):
            if _in_body(anc, child) and cuda_flag_attribute(ctx, anc.test):
                return True
            for sub in ast.walk(anc.test):
                text = (
                    sub.attr
                    if isinstance(sub, ast.Attribute)
                    and isinstance(sub.value, ast.Name)
                    and sub.value.id == "self"
                    else sub.id
                    if isinstance(sub, ast.Name) and sub.id in params
                    else ""
                )
                if "cuda" in text.lower() or "gpu" in text.lower():
                    return True
                if isinstance(sub, ast.Name) and _shared_global_flag(ctx, sub):
                    return True
    return False


def _shared_global_flag(ctx: Context, flag: ast.Name) -> bool:
    """`if train_on_gpu:` with a module-level flag that the code outside the class also reads
    (`if train_on_gpu: net.cuda()`): module and caller follow the same switch."""
    name = flag.id
    if name in ctx.frame.names or not name_like(flag, "cuda", "gpu"):
        return False
    inside = sum(
        1 for cls in ctx.class_chain() for n in ast.walk(cls) if isinstance(n, ast.Name) and n.id == name
    )
    # beyond the uses in the class and the flag's own assignment
    return len(re.findall(rf"(?<![\w.]){re.escape(name)}\b", ctx.document)) > inside + 1


def _caller_device(ctx: Context, arg: ast.AST | None) -> bool:
    """`.cuda(device)` / `.cuda(self.gpu_id)` with an index the caller passed in."""
    if arg is None:
        return False
    if isinstance(arg, ast.Name):
        return arg.id in ctx.frame.names and ctx.origin(arg) is None
    if isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name) and arg.value.id == "self":
        return _self_attr_origin(ctx, arg.attr) == "caller"
    return False


def _input_device_test(ctx: Context, call: ast.Call) -> bool:
    """`if x.is_cuda: t = t.cuda()`, `t.cuda() if x.is_cuda else t`, `if x.device.type == "cuda":`:
    the move follows where the caller put the input, so the module still runs on the CPU."""
    if not under_cuda_guard(ctx, call):
        return False
    path = [*ctx.stack, call]
    for anc, child in zip(path, path[1:]):
        if (
            isinstance(anc, (ast.If, ast.IfExp))
            and child is not anc.test
            and _reads_tensor_device(ctx, anc.test)
        ):
            return True
    return False


def _under_input_device_test(ctx: Context, call: ast.Call) -> bool:
    """`if x.device.type in ["mps", "xpu"]: x = x.cpu()` (also through a name bound to that
    test): a copy to the host that depends on where the caller put the input, a workaround for
    a backend, not a placement the module chose."""
    path = [*ctx.stack, call]
    for anc, child in zip(path, path[1:]):
        if not isinstance(anc, (ast.If, ast.IfExp)) or child is anc.test:
            continue
        test = anc.test
        if isinstance(test, ast.Name):
            test = ctx.origin(test) or test
        if _reads_tensor_device(ctx, test):
            return True
    return False


def _fetched_without_waiting(call: ast.Call) -> bool:
    """`flag.to("cpu", non_blocking=True)`: an asynchronous fetch of a value for the host (a
    solver's stop flag read later), not a placement of the module's data."""
    blocking = keyword(call, "non_blocking")
    return isinstance(blocking, ast.Constant) and blocking.value is True


def _reads_tensor_device(ctx: Context, test: ast.AST) -> bool:
    """The test reads a tensor's own device (`x.is_cuda`, `x.device.type`, `self.weight.is_cuda`),
    not a switch or a device the module or a global config chose (`self.device.type`)."""
    for sub in ast.walk(test):
        if isinstance(sub, ast.Attribute) and sub.attr == "is_cuda":
            owner: ast.AST = sub.value
        elif (
            isinstance(sub, ast.Attribute)
            and sub.attr == "type"
            and isinstance(sub.value, ast.Attribute)
            and sub.value.attr == "device"
        ):
            owner = sub.value.value
        else:
            continue
        root = chain_root(owner)
        if not isinstance(root, ast.Name):
            continue
        if root.id == "self" and owner is not root and ctx.kind(owner) != MODULE:
            return True  # `self.weight.is_cuda`: the module's own tensors
        if root.id != "self" and root.id in ctx.frame.names:
            return True  # a local or a parameter: the input or a tensor built from it
    return False


def _moves_nothing(ctx: Context, value: ast.AST, depth: int = 0) -> bool:
    """`nn.CrossEntropyLoss().cuda()`, `Metric().cuda()` with `Metric` an `nn.Module` of this
    source that registers nothing, or a name / `self.<attr>` bound only to such: `Module._apply`
    moves parameters, buffers and submodules only, so the call moves nothing."""
    if depth > 3:
        return False
    if _tensorless_loss(ctx, value):
        return True
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
        return bare_module_instance(ctx, value)
    if isinstance(value, ast.Name):
        origin = ctx.origin(value)
        return origin is not None and _moves_nothing(ctx, origin, depth + 1)
    if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and value.value.id == "self":
        stores = [
            sub.value
            for cls in ctx.class_chain()
            for sub in ast.walk(cls)
            if isinstance(sub, (ast.Assign, ast.AnnAssign)) and sub.value is not None
            for t in (sub.targets if isinstance(sub, ast.Assign) else [sub.target])
            if _is_self_attr(t, value.attr)
        ]
        return bool(stores) and all(
            _moves_nothing(ctx, v, depth + 1) or _moves_itself(v, value.attr) for v in stores
        )
    return False


def _moves_itself(value: ast.AST, attr: str) -> bool:
    """`self.loss = self.loss.cuda()`: the attribute moved and stored back."""
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in ("cuda", "cpu", "to")
        and _is_self_attr(value.func.value, attr)
    )


_MODULE_BASES = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module"})
# calls that give a module state `Module._apply` moves (or set attributes we cannot read)
_REGISTERING = frozenset(
    {
        "Parameter",
        "ParameterList",
        "ParameterDict",
        "register_buffer",
        "register_parameter",
        "add_module",
        "register_module",
        "setattr",
    }
)


def bare_module_instance(ctx: Context, value: ast.AST | None) -> bool:
    """`Swish()`: an instance of an `nn.Module` class of this source that registers nothing."""
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)):
        return False
    info = ctx.classes.get(value.func.id)
    return info is not None and info.kind == MODULE and registers_nothing(ctx, info.node)


def registers_nothing(ctx: Context, cls: ast.ClassDef) -> bool:
    """An `nn.Module` subclass of this source with no parameters, buffers or submodules: no
    `nn.Parameter`/`register_buffer`/`add_module`, and every `self.<attr> = ...` in its methods
    stores a plain value (a number, a string, a plain tensor, a function). Its bases are
    `nn.Module` or classes of this source that register nothing either. A plain tensor attribute
    does not count: `Module._apply` (behind `.cuda()`/`.to()`) leaves it where it is."""
    cache = _state.setdefault(ctx, {}).setdefault("bare", {})
    if id(cls) not in cache:
        cache[id(cls)] = (cls, None)  # a class that names itself as a base registers something
        cache[id(cls)] = (cls, _bare_class(ctx, cls))
    return cache[id(cls)][1] is True


def _bare_class(ctx: Context, cls: ast.ClassDef) -> bool:
    for base in cls.bases:
        if isinstance(base, ast.Name) and base.id in ctx.classes and base.id != cls.name:
            if not registers_nothing(ctx, ctx.classes[base.id].node):
                return False
        elif (ctx.qualname(base) or "") not in _MODULE_BASES:
            return False
    if cls.keywords:
        return False
    for fn in cls.body:
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name in MOVES_ITSELF:
            return False
    for fn in (n for n in ast.walk(cls) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        for sub in ast.walk(fn):
            if isinstance(sub, ast.Call) and terminal_name(sub.func) in _REGISTERING:
                return False
            if isinstance(sub, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
                stores_self = any(
                    isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"
                    for t in targets
                    for n in ast.walk(t)
                )
                if stores_self and (sub.value is None or not _plain_value(ctx, sub.value, fn)):
                    return False
    return True


# builtins whose result holds no module whatever they are given
_SCALAR_BUILTINS = frozenset({"int", "float", "str", "bool", "len", "round", "abs", "range", "repr"})
# builtins whose result holds what their arguments hold
_CONTAINER_BUILTINS = frozenset(
    {"tuple", "list", "set", "dict", "sorted", "zip", "enumerate", "max", "min", "sum"}
)
_PLAIN_LIBRARIES = ("numpy.", "math.")


def _plain_value(ctx: Context, value: ast.AST, fn: ast.AST, depth: int = 0) -> bool:
    """The value is no module or parameter: a constant, a container of such, a plain tensor
    (`torch.linspace(...)`, a slice of one), a NumPy array, a lambda, a number derived from those,
    or a name `fn` binds only to such. A constructor argument without a constant default may be
    anything (a submodule), so it is not plain."""
    if depth > 6:
        return False

    def plain(v: ast.AST | None) -> bool:
        return v is not None and _plain_value(ctx, v, fn, depth + 1)

    if isinstance(value, (ast.Constant, ast.JoinedStr, ast.Lambda, ast.Compare)):
        return True
    if isinstance(value, (ast.Tuple, ast.List, ast.Set)):
        return all(plain(e) for e in value.elts)
    if isinstance(value, ast.Dict):
        return all(plain(k) for k in value.keys) and all(plain(v) for v in value.values)
    if isinstance(value, ast.UnaryOp):
        return plain(value.operand)
    if isinstance(value, ast.BinOp):
        return plain(value.left) and plain(value.right)
    if isinstance(value, ast.BoolOp):
        return all(plain(v) for v in value.values)
    if isinstance(value, ast.IfExp):
        return plain(value.body) and plain(value.orelse)
    if isinstance(value, ast.Subscript):
        return plain(value.value)
    if isinstance(value, ast.Attribute):
        return (ctx.qualname(value) or "").startswith(_PLAIN_LIBRARIES)  # `math.pi`, `np.inf`
    if isinstance(value, ast.Call):
        return _plain_call(ctx, value, plain)
    if isinstance(value, ast.Name):
        return _plain_name(value.id, fn, plain)
    return False


def _plain_call(ctx: Context, call: ast.Call, plain: Any) -> bool:
    q = ctx.qualname(call.func) or ""
    if q.startswith(_PLAIN_LIBRARIES):
        return True
    if q.startswith("torch.") and q.count(".") == 1:
        name = q.split(".", 1)[1]
        return name in FACTORIES or q in _FROM_HOST or name == "device"
    if isinstance(call.func, ast.Name) and not ctx.defined(call.func.id):
        if call.func.id in _SCALAR_BUILTINS:
            return True
        if call.func.id in _CONTAINER_BUILTINS:
            return all(plain(a) for a in call.args)
    if isinstance(call.func, ast.Attribute):
        # `t.tolist()` gives Python values; a method of a number, string, tensor or array
        # (`bins[:-1].clone()`, `edges.div(n)`) gives no module
        return call.func.attr in ("tolist", "item") or plain(call.func.value)
    return False


def _plain_name(name: str, fn: ast.AST, plain: Any) -> bool:
    """A parameter with a constant default (`n_bins=15`), or a local bound only to plain values."""
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    d = parameter_default(fn, name)
    if d is not None:
        return isinstance(d, ast.Constant) and d.value is not None
    if name in parameters(fn):
        return False
    values: list[ast.AST] = []
    for sub in ast.walk(fn):
        if isinstance(sub, ast.Assign):
            for t in sub.targets:
                if isinstance(t, ast.Name) and t.id == name:
                    values.append(sub.value)
                elif any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(t)):
                    return False  # unpacked: `a, b = f()`
        elif isinstance(sub, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith, ast.NamedExpr)):
            bound = (
                [sub.target]
                if isinstance(sub, (ast.For, ast.AsyncFor, ast.NamedExpr))
                else [i.optional_vars for i in sub.items if i.optional_vars is not None]
            )
            if any(isinstance(n, ast.Name) and n.id == name for b in bound for n in ast.walk(b)):
                return False
    return bool(values) and all(plain(v) for v in values)


# methods a `.cpu()` copy may pass through on its way into a call: `x.cpu().data`, `.detach()`
_COPY_STEPS = frozenset({"detach", "float", "double", "long", "int", "contiguous", "clone"})


class _Copy(NamedTuple):
    node: ast.AST  # the copy with its copy steps: `x.cpu().float()` of `x.cpu()`
    holder: ast.AST | None  # what holds it: a call it is an argument of, a `return`, ...
    detached: bool  # a step after the copy detached it (`.detach()`, `.data`)
    via_data: bool  # one of those steps reads `.data`


def _copy_of(ctx: Context, call: ast.Call) -> _Copy | None:
    """Follows a `.cpu()` copy out through the copy steps after it (`.float()`, `.detach()`,
    `.data`) to what holds it, past a keyword; None where another method or attribute follows."""
    node: ast.AST = call
    stack = ctx.stack
    i = len(stack) - 1
    detached = via_data = False
    while i >= 0 and isinstance(stack[i], ast.Attribute):
        attr = stack[i].attr  # type: ignore[attr-defined]
        if attr == "data":
            detached = via_data = True
            node, i = stack[i], i - 1
        elif attr in _COPY_STEPS and i >= 1 and isinstance(stack[i - 1], ast.Call):
            detached = detached or attr == "detach"
            node, i = stack[i - 1], i - 2
        else:
            return None
    if i >= 1 and isinstance(stack[i], ast.keyword):
        i -= 1
    return _Copy(node, stack[i] if i >= 0 else None, detached, via_data)


def _passed_to(holder: ast.AST | None, node: ast.AST) -> TypeGuard[ast.Call]:
    """`node` is an argument of the call `holder` (not the function it calls)."""
    return (
        isinstance(holder, ast.Call)
        and holder.func is not node
        and (any(a is node for a in holder.args) or any(kw.value is node for kw in holder.keywords))
    )


def _detached(call: ast.Call, copy: _Copy) -> bool:
    """The copy carries values only, no graph: detached after the `.cpu()` (`x.cpu().data`) or
    before it (`x.detach().cpu()`, `x.data.cpu()`)."""
    return copy.detached or any(
        (isinstance(n, ast.Attribute) and n.attr == "data")
        or (isinstance(n, ast.Call) and terminal_name(n.func) == "detach")
        for n in chain_nodes(call.func.value)  # type: ignore[attr-defined]
    )


def _named_copy_for_a_library(ctx: Context, call: ast.Call, copy: _Copy) -> bool:
    """`pwl_copy = pwl.detach().cpu()` then `[linear_sum_assignment(p) for p in pwl_copy]`: a
    detached copy, bound to a name that the method (or a loop over it) hands only to functions
    of a non-torch library (SciPy, NumPy, scikit-learn), which run on the host."""
    holder = copy.holder
    fn = ctx.frame.node
    if not (
        isinstance(holder, ast.Assign)
        and holder.value is copy.node
        and len(holder.targets) == 1
        and isinstance(holder.targets[0], ast.Name)
        and isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
    ):
        return False
    if not _detached(call, copy):
        return False
    parents = parents_of(fn)
    return _only_handed_to_a_library(ctx, fn, holder.targets[0].id, parents, 0)


def _only_handed_to_a_library(
    ctx: Context, scope: ast.AST, name: str, parents: dict[int, ast.AST], depth: int
) -> bool:
    """Every read of `name` in `scope` is an argument of a function of a non-torch library, or
    the iterable of a loop (or comprehension) whose variable only is."""
    handed = 0
    for use in ast.walk(scope):
        if not (isinstance(use, ast.Name) and use.id == name and isinstance(use.ctx, ast.Load)):
            continue
        up = parents.get(id(use))
        if isinstance(up, (ast.For, ast.comprehension)) and up.iter is use and depth < 2:
            target = up.target
            inner = parents.get(id(up)) if isinstance(up, ast.comprehension) else up
            if not (isinstance(target, ast.Name) and inner is not None):
                return False
            if not _only_handed_to_a_library(ctx, inner, target.id, parents, depth + 1):
                return False
            handed += 1
            continue
        if not (isinstance(up, ast.Call) and any(a is use for a in up.args)):
            return False
        root = (ctx.qualname(up.func) or "").split(".")
        if len(root) < 2 or root[0] in ("torch", "builtins"):
            return False
        handed += 1
    return handed > 0


def _lengths_of_a_packing(ctx: Context, holder: ast.AST | None, node: ast.AST) -> bool:
    """`pack_padded_sequence(x, lengths=lens.cpu(), ...)`, also through a name bound to the copy:
    PyTorch requires the lengths on the CPU, whatever device the data is on."""
    if isinstance(holder, ast.Call):
        return _packs_with(ctx, holder, lambda a: a is node)
    if not (
        isinstance(holder, ast.Assign)
        and len(holder.targets) == 1
        and isinstance(holder.targets[0], ast.Name)
    ):
        return False
    name, fn = holder.targets[0].id, ctx.frame.node
    return fn is not None and any(
        isinstance(n, ast.Call) and _packs_with(ctx, n, lambda a: is_name(a, name)) for n in ast.walk(fn)
    )


def _packs_with(ctx: Context, call: ast.Call, is_lengths: Callable[[ast.AST], bool]) -> bool:
    if not (ctx.qualname(call.func) or "").endswith("pack_padded_sequence"):
        return False
    given = [kw.value for kw in call.keywords if kw.arg == "lengths"] + call.args[1:2]
    return any(is_lengths(a) for a in given)


def _handed_to_host_code(ctx: Context, call: ast.Call) -> bool:
    """`build_targets(pred.cpu().data, ...)`, `np.asarray(x.cpu())`: a CPU copy handed to
    host-side code, not the module placing its tensors. The callee is NumPy, or a plain function
    outside torch (not a method, not a submodule, not a class): one of this source that reads that
    argument on the host (`.item()`/`.tolist()`/`.numpy()`, `int(...)`), or one defined elsewhere
    that gets a detached copy (`.data`, `.detach()`: values, no graph for the module's output)."""
    copy = _copy_of(ctx, call)
    if copy is not None and _named_copy_for_a_library(ctx, call, copy):
        return True
    if copy is not None and _lengths_of_a_packing(ctx, copy.holder, copy.node):
        return True  # `pack_padded_sequence(x, lens.cpu())`: the lengths must be on the CPU
    if copy is None or not _passed_to(copy.holder, copy.node):
        return False
    holder, node = copy.holder, copy.node
    detached = _detached(call, copy)
    if (ctx.qualname(holder.func) or "").startswith("numpy.") or writes_a_file(holder):
        return True  # `np.asarray(x.cpu())`, `save_image(img.cpu(), path)`: host code reads it
    if detached and terminal_name(holder.func) in ("append", "extend"):
        return True  # `TRACE.append(norm.detach().cpu())`: a record of values kept in host memory
    if not _plain_function(ctx, holder.func):
        return False
    fn = _source_function(ctx, holder.func)
    if fn is None:
        return detached
    param = _parameter_for(fn, holder, node)
    return param is not None and _reads_on_host(fn, param)


def _chain_returned(ctx: Context) -> bool:
    """`top_p, top_i = probs.cpu().topk(5)` then only `return top_p, top_i`: tensor methods on
    the host copy whose results the method returns and reads no further."""
    i = len(ctx.stack) - 1
    while i >= 1 and isinstance(ctx.stack[i], ast.Attribute) and isinstance(ctx.stack[i - 1], ast.Call):
        i -= 2  # `.topk(5)` on the copy: still the copy's values
    stmt = ctx.stack[i] if i >= 0 else None
    fn = ctx.frame.node
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1) or not isinstance(
        fn, (ast.FunctionDef, ast.AsyncFunctionDef)
    ):
        return False
    target = stmt.targets[0]
    names = [target] if isinstance(target, ast.Name) else list(getattr(target, "elts", []))
    if not names or not all(isinstance(n, ast.Name) for n in names):
        return False
    bound = {n.id for n in names}  # type: ignore[attr-defined]
    reads = [
        n for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id in bound and isinstance(n.ctx, ast.Load)
    ]
    parents = parents_of(fn)
    return bool(reads) and all(
        isinstance(up := parents.get(id(r)), ast.Return)
        or (isinstance(up, ast.Tuple) and isinstance(parents.get(id(up)), ast.Return))
        for r in reads
    )


def _results_handed_out(ctx: Context, call: ast.Call) -> bool:
    """`self.tgt_dict.string(tokens.int().cpu())` in `decode_target`: an inference entry point
    (`generate`, `decode`, `predict`, ...) handing its results to host-side code (a vocabulary, a
    tokenizer) or returning them to the user. The copy is that hand-off, not the module placing
    its tensors; a submodule, a method of `self` or a torch function as the receiver is not."""
    if not ctx.method or not _INFERENCE_ENTRY.match(ctx.method):
        return False
    copy = _copy_of(ctx, call)
    if copy is None:
        return _chain_returned(ctx)
    if copy.via_data:
        return False
    holder = copy.holder
    if isinstance(holder, ast.Return):
        return True
    if not _passed_to(holder, copy.node):
        return False
    if (ctx.qualname(holder.func) or "").startswith("torch.") or not isinstance(holder.func, ast.Attribute):
        return False
    receiver = holder.func.value
    if isinstance(receiver, ast.Name) and receiver.id == "self":
        return False  # `self.head(x.cpu())`: a submodule or the module's own method
    return ctx.kind(receiver) not in (MODULE, *TENSOR_KINDS)


def _plain_function(ctx: Context, func: ast.AST) -> bool:
    """A function by name (`build_targets`, `utils.build_targets`), not torch's, not a class, not
    a method of `self` or of a tensor."""
    q = ctx.qualname(func) or ""
    if not q or q.startswith("torch.") or q.split(".")[-1][:1].isupper():
        return False
    if isinstance(func, ast.Name):
        return func.id not in ctx.classes and ctx.kind(func) not in (MODULE, *TENSOR_KINDS)
    root = chain_root(func)
    return isinstance(root, ast.Name) and root.id in ctx.imports  # a function of an imported module


def _source_function(ctx: Context, func: ast.AST) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The top-level function of this source that `func` names."""
    root = ctx.stack[0] if ctx.stack else None
    if not isinstance(func, ast.Name) or not isinstance(root, ast.Module):
        return None
    return next(
        (
            n
            for n in root.body
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == func.id
        ),
        None,
    )


def _parameter_for(fn: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call, arg: ast.AST) -> str | None:
    """The parameter of `fn` that `arg` of `call` is bound to."""
    positional = [p.arg for p in (*fn.args.posonlyargs, *fn.args.args)]
    for k, a in enumerate(call.args):
        if a is arg:
            return positional[k] if k < len(positional) else None
    return next((kw.arg for kw in call.keywords if kw.value is arg), None)


def _reads_on_host(fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    """`fn` reads its parameter `name` on the host: `.item()`/`.tolist()`/`.numpy()` on it, or
    `int(...)`/`float(...)` of it."""
    for sub in ast.walk(fn):
        if not isinstance(sub, ast.Call):
            continue
        if isinstance(sub.func, ast.Attribute) and sub.func.attr in HOST_VALUE_METHODS:
            reads = [sub.func.value]
        elif isinstance(sub.func, ast.Name) and sub.func.id in HOST_VALUE_CALLS:
            reads = list(sub.args)
        else:
            continue
        if any(isinstance(n, ast.Name) and n.id == name for r in reads for n in ast.walk(r)):
            return True
    return False


def _move_hint(ctx: Context, call: ast.Call, fresh: bool) -> str:
    """Advice that works for this class: a module with no parameters of its own has no
    `next(self.parameters())` (StopIteration), so its tensors follow an input instead; an input
    (or a batch drawn from one) has no other input to follow, so it follows the module's own
    tensors; the module itself is placed by the caller."""
    value = call.func.value  # type: ignore[attr-defined]
    bare = ctx.cls is not None and registers_nothing(ctx, ctx.cls.node)
    first = _forward_input(ctx)
    anchor = first or "x"
    if (isinstance(value, ast.Name) and value.id == "self") or ctx.kind(value) == MODULE:
        return (
            "Let the caller place the model once (`model.to(device)`) instead of moving it inside the class."
        )
    if _method_input(ctx, value):
        if bare and first is not None and not (isinstance(value, ast.Name) and value.id == first):
            return f"Let the caller move the inputs (`x.to(device)`); inside the module, follow the first one: `.to({anchor}.device)`."
        if bare:
            return "Let the caller move the inputs (`x.to(device)`) and drop the move here: the module holds no tensors to follow."
        return (
            "Let the caller move model and inputs once (`model.to(device)`); inside the module, move an input"
            " only to where the module's own tensors are: `.to(next(self.parameters()).device)`."
        )
    if fresh and not bare:
        return (
            "Build it where the module's own tensors are, so it follows the caller's"
            " `model.to(device)`: `device=next(self.parameters()).device`."
        )
    if fresh:
        return (
            f"Build it on the input's device, so it follows where the caller put the data: `device={anchor}.device`"
            " (the module has no parameters to follow)."
        )
    return (
        "Let the caller move the model once (`model.to(device)`) and follow the input inside"
        f" the module: `.to({anchor}.device)`."
    )


_NOT_TENSOR_ANNOTATIONS = frozenset({"int", "float", "str", "bool", "dict", "list", "tuple"})


def _forward_input(ctx: Context) -> str | None:
    """The first argument of the `forward` being walked that may be a tensor (no constant default,
    no non-tensor annotation); None in other methods, whose arguments are often sizes."""
    fn = ctx.frame.node
    if (
        not ctx.in_forward
        or not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
        or fn.name != "forward"
    ):
        return None
    positional = [*fn.args.posonlyargs, *fn.args.args][1:]
    first_default = len(positional) - len(fn.args.defaults)
    for k, p in enumerate(positional):
        default = fn.args.defaults[k - first_default] if k >= first_default else None
        if isinstance(default, ast.Constant) and default.value is not None:
            continue
        if isinstance(p.annotation, ast.Name) and p.annotation.id in _NOT_TENSOR_ANNOTATIONS:
            continue
        return p.arg
    return None


_FROM_AN_INPUT = frozenset({"stack", "cat", "concat", "concatenate"})  # they take no `device=`


def _method_input(ctx: Context, value: ast.AST) -> bool:
    """The moved value is what the method was given: a parameter, or a batch a loop draws from
    one (`for input, label in loader:`), unchanged, or a tensor made from it as it came
    (`torch.stack(x)` of a list of host tensors)."""
    node = value
    while isinstance(node, ast.Attribute) and node.attr == "data":
        node = node.value
    if isinstance(node, ast.Call) and terminal_name(node.func) in _FROM_AN_INPUT and node.args:
        node = node.args[0]
    fn = ctx.frame.node
    if not isinstance(node, ast.Name) or not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    params = parameters(fn) - {"self"}
    if node.id in params and ctx.origin(node) is None and ctx.loop_source(node.id) is None:
        return True
    source = ctx.loop_source(node.id)
    while (
        isinstance(source, ast.Call)
        and source.args
        and terminal_name(source.func) in ("tqdm", "enumerate", "iter")
    ):
        source = source.args[0]
    return isinstance(source, ast.Name) and source.id in params and ctx.origin(source) is None


_MOVING_METHODS = frozenset({"cpu", "cuda", "to", "_apply", "xpu", "mps", "to_device", "move_to"})


@check("TM102", calls={"cuda", "cpu", "to"})
def device_move_inside_module(call: ast.Call, ctx: Context) -> None:
    if not ctx.in_module_method or not isinstance(call.func, ast.Attribute) or _trainer_without_forward(ctx):
        return
    if ctx.method in _MOVING_METHODS:
        return  # the module's own `def cuda(self)`: moving its parts is what the caller asked for
    if _uses_rpc(ctx):
        return  # RPC ships CPU tensors and places each remote shard itself
    if _caller_cuda_flag(ctx, call) or _model_parallel(ctx):
        return  # the caller asked for CUDA (`if self.use_cuda:`), or parts sit on chosen GPUs
    if _input_device_test(ctx, call) or _moves_nothing(ctx, call.func.value):
        return  # `if x.is_cuda:` follows the input; `nn.MSELoss().cuda()` holds no tensors
    if _batch_of_a_loader_loop(ctx, call.func.value):
        return  # `for n_id, adj in loader: x_all[n_id].to(device)`: a data loop streams its batches
    if _export_wrapper(ctx):
        return  # a class a function defines to export a model once: the export picks the device
    method = call.func.attr
    fresh = _fresh_tensor(ctx, call.func.value)
    if method == "to":
        target = _device_target(ctx, call)
        if target is None or not (_is_device_literal(ctx, target) or _is_global_device(ctx, target)):
            return
        label = f".to({unparse(target, 30)})"
        to_host = device_type_of_literal(target) == "cpu"
        if to_host and (_copied_for_the_host(ctx, call) or _fetched_without_waiting(call)):
            return
        if not to_host and cuda_only(ctx):
            return  # the code runs on CUDA only (asserts a GPU, builds on apex or cupy)
        if fresh and _shared_global_device(ctx, target):
            return  # a new tensor on the device the caller also moves the model to
    else:
        if method == "cuda" and _caller_device(ctx, _device_target(ctx, call)):
            return
        if method == "cpu" and (
            _copied_for_the_host(ctx, call)
            or offloads_on_request(ctx, call)  # `if self.cpu_cache: feat = feat.cpu()`: asked for
        ):
            return
        if method == "cuda" and cuda_only(ctx):
            return
        label = f".{method}()"
        to_host = method == "cpu"
    moved = call.func.value
    if _trains_in_forward(ctx) and not (is_name(moved, "self") or ctx.kind(moved) == MODULE):
        if not to_host:  # a trainer's copy to the host is its own bookkeeping (losses, metrics, logs)
            ctx.flag(
                call,
                f"`{unparse(moved, 40)}{label}` inside `{ctx.cls.name}.{ctx.method}` hardcodes the device of a trainer:"  # type: ignore[union-attr]
                f" `{ctx.cls.name}.forward` runs the whole training step, and its data cannot follow where the"  # type: ignore[union-attr]
                " caller puts the module.",
                "Move the data to where the module's own tensors are, so the trainer follows the caller's"
                f" `.to(device)`: `.to({_own_tensor_device(ctx)})`.",
            )
        return
    ctx.flag(
        call,
        f"`{unparse(moved, 40)}{label}` inside `{ctx.cls.name}.{ctx.method}` moves data to a device the module chose itself.",  # type: ignore[union-attr]
        _move_hint(ctx, call, fresh),
    )


_EXPORTERS = frozenset(
    {
        "torch.onnx.export",
        "torch.onnx.dynamo_export",
        "torch.jit.trace",
        "torch.jit.script",
        "torch.export.export",
    }
)


def _export_wrapper(ctx: Context) -> bool:
    """`class M(nn.Module)` defined inside a function that hands `M()` to `torch.onnx.export`
    (or `jit.trace`, `torch.export`): a wrapper built to export a model once, whose
    `self.model = obj.model.to("cpu")` puts it where the export's example input is."""
    cls = ctx.cls.node if ctx.cls is not None else None
    at = next((i for i, n in enumerate(ctx.stack) if n is cls), None)
    outer = (
        next(
            (n for n in reversed(ctx.stack[:at]) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))),
            None,
        )
        if at
        else None
    )
    if outer is None or cls is None:
        return False
    names = {cls.name} | {
        t.id
        for n in ast.walk(outer)
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and is_name(n.value.func, cls.name)
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    return any(
        isinstance(n, ast.Call)
        and (ctx.qualname(n.func) or "") in _EXPORTERS
        and n.args
        and (
            isinstance(n.args[0], ast.Name)
            and n.args[0].id in names
            or isinstance(n.args[0], ast.Call)
            and is_name(n.args[0].func, cls.name)
        )
        for n in ast.walk(outer)
    )


_LOADER_WORDS = re.compile(r"loader|sampler|batches|dataset", re.IGNORECASE)


def _batch_of_a_loader_loop(ctx: Context, moved: ast.AST) -> bool:
    """`for batch_size, n_id, adj in subgraph_loader: x = x_all[n_id].to(device)` in a method
    that is no forward pass (a layer-wise `inference`): the method runs a data loop of its own,
    streaming each batch from host memory to the device, as a training loop does; following an
    input's device would leave the batch on the host."""
    if ctx.in_forward or not ctx.loops:
        return False
    loop = ctx.loops[-1].node
    if not isinstance(loop, (ast.For, ast.AsyncFor)):
        return False
    it = unwrapped_iterable(loop.iter)
    word = terminal_name(it) if isinstance(it, (ast.Name, ast.Attribute)) else None
    if word is None or not _LOADER_WORDS.search(word):
        return False
    targets = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
    return any(isinstance(n, ast.Name) and n.id in targets for n in ast.walk(moved))


def _trains_in_forward(ctx: Context) -> bool:
    """`def forward(self): ...; loss.backward(); self.optim.step()`: the class is a trainer
    that is a module (to register buffers and move them), whose forward pass is a whole
    training step drawing its own batches, not a model handed its inputs. Worked out once per
    class, not once per call the rules ask about."""
    if ctx.cls is None:
        return False
    return remember(ctx.cls.node, "trains_in_forward", lambda: _forward_steps_an_optimizer(ctx))


def _forward_steps_an_optimizer(ctx: Context) -> bool:
    return any(
        isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))
        and stmt.name == "forward"
        and {"backward", "step"}
        <= {
            n.func.attr
            for n in ast.walk(stmt)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
        }
        for cls in ctx.class_chain()
        for stmt in cls.body
    )


def _own_tensor_device(ctx: Context) -> str:
    """`self.steps.device` for a class that registers a buffer `steps` (a trainer's own tensor,
    there even when it holds no parameters), else the device of its first parameter."""
    for cls in ctx.class_chain():
        for n in ast.walk(cls):
            if (
                isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute)
                and n.func.attr == "register_buffer"
                and is_name(n.func.value, "self")
                and n.args
                and isinstance(n.args[0], ast.Constant)
                and isinstance(n.args[0].value, str)
                and n.args[0].value.isidentifier()
            ):
                return f"self.{n.args[0].value}.device"
    return "next(self.parameters()).device"


def _copied_for_the_host(ctx: Context, call: ast.Call) -> bool:
    """A copy to the CPU (`.cpu()`, `.to("cpu")`) that serves host code, not a placement the
    module chose: values read in Python, handed to host-side code or out of the module, or a
    backend workaround under a test of the input's own device."""
    return (
        _read_on_host(ctx, call)
        or _handed_to_host_code(ctx, call)
        or _results_handed_out(ctx, call)
        or _under_input_device_test(ctx, call)
        or _written_into_a_host_attribute(ctx, call)
        or _saved_to_a_file(ctx, call)
        or _ends_in_a_written_file(ctx, call)
    )


_SAVERS = frozenset({"save", "save_checkpoint", "save_state"})


def _saved_to_a_file(ctx: Context, call: ast.Call) -> bool:
    """The copy goes into what the method saves (`torch.save({"steps": self.steps.cpu()}, p)`,
    or `obj = dict(steps=self.steps.cpu(), ...)` then `self.accelerator.save(obj, path)`): a
    checkpoint written from host memory, not a placement of the module's state."""
    if inside_a_call(ctx, call, lambda up: terminal_name(up.func) in _SAVERS):
        return True
    stmt = ctx.statement()
    fn = ctx.frame.node
    if not (
        isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
    ):
        return False
    name = stmt.targets[0].id
    return fn is not None and any(
        isinstance(n, ast.Call)
        and n.lineno > stmt.lineno
        and terminal_name(n.func) in _SAVERS
        and any(is_name(a, name) for a in n.args)
        for n in ast.walk(fn)
    )


def _ends_in_a_written_file(ctx: Context, call: ast.Call) -> bool:
    """`imgs = imgs.detach().cpu().clamp(0, 1)`, then `grid = make_grid(imgs)` and
    `save_image(grid, path)`: the host copy, or what the method makes of it, is written to a
    file (an image grid, audio, a table): output for the user, not a placement of the module's
    tensors."""
    stmt = ctx.statement()
    fn = ctx.frame.node
    if not (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
    ):
        return False
    names = {stmt.targets[0].id}
    later = sorted(
        (n for n in ast.walk(fn) if isinstance(n, (ast.Assign, ast.Call)) and n.lineno > stmt.lineno),
        key=lambda n: (n.lineno, n.col_offset),
    )
    for node in later:
        if isinstance(node, ast.Call):
            if writes_a_file(node) and any(
                isinstance(n, ast.Name) and n.id in names
                for a in [*node.args, *(k.value for k in node.keywords)]
                for n in ast.walk(a)
            ):
                return True
        elif len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node.value)):
                names.add(node.targets[0].id)  # `grid = make_grid(imgs)`: made from the copy
    return False


def _filled_with_host_copies(ctx: Context, attr: str) -> bool:
    """The class writes into `self.<attr>` only copies to the host (`self.codes[i : i + n] =
    codes.cpu()`), at least once: a log or histogram kept in host memory on purpose, which as a
    buffer would follow the model to the GPU and into every checkpoint."""
    writes = [
        n
        for cls in ctx.class_chain()
        for n in ast.walk(cls)
        if isinstance(n, ast.Assign)
        and len(n.targets) == 1
        and isinstance(n.targets[0], ast.Subscript)
        and self_attr_name(n.targets[0].value) == attr
    ]
    return bool(writes) and all(
        isinstance(w.value, ast.Call)
        and isinstance(w.value.func, ast.Attribute)
        and w.value.func.attr == "cpu"
        and not w.value.args
        for w in writes
    )


def _written_into_a_host_attribute(ctx: Context, call: ast.Call) -> bool:
    """`self.codes[i : i + n] = codes.cpu()` with `self.codes = torch.zeros(n)` built without a
    device, a plain attribute that `module.to(device)` leaves on the CPU (a debug log of what the
    model emits): the copy is what writing into host memory takes."""
    parent = ctx.stack[-1] if ctx.stack else None
    if not (isinstance(parent, ast.Assign) and parent.value is call and len(parent.targets) == 1):
        return False
    target = parent.targets[0]
    return (
        isinstance(target, ast.Subscript)
        and isinstance(target.value, ast.Attribute)
        and accelerator.plain_cpu_attribute(ctx, target.value)
    )


_FROM_HOST = frozenset({"torch.from_numpy", "torch.tensor", "torch.as_tensor", "torch.Tensor"})


def _fresh_tensor(ctx: Context, value: ast.AST) -> bool:
    """`torch.zeros(n).float()`, `torch.from_numpy(state)`: a tensor the method builds itself
    (a factory or a host array), so there is no input whose device it could follow."""
    node, hops = value, 0
    while hops < 12:
        hops += 1
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            q = ctx.qualname(node.func) or ""
            if q.startswith("torch.") and q.count(".") == 1:
                name = q.split(".", 1)[1]
                return q in _FROM_HOST or name in FACTORIES or name.endswith("Tensor")
            node = node.func.value
        elif isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        elif isinstance(node, ast.Name):
            origin = ctx.origin(node)
            if origin is None:
                return False
            node = origin
        else:
            return False
    return False


def _shared_global_device(ctx: Context, target: ast.AST) -> bool:
    """`device` is a module-level name that the code outside the class also moves things to
    (`policy = Policy().to(device)`): module and caller follow the same choice."""
    if not isinstance(target, ast.Name) or target.id in ctx.frame.names:
        return False
    pattern = re.compile(rf"\.to\(\s*(device\s*=\s*)?{re.escape(target.id)}\s*[,)]")
    inside = sum(
        1
        for cls in ctx.class_chain()
        for n in ast.walk(cls)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr == "to"
        and isinstance(_device_target(ctx, n), ast.Name)
        and _device_target(ctx, n).id == target.id  # type: ignore[union-attr]
    )
    return len(pattern.findall(ctx.document)) > inside


def _read_on_host(ctx: Context, call: ast.Call) -> bool:
    """`.cpu()` that fetches values for Python (`idx.nonzero().cpu().tolist()`, also through a
    torch function of the copy, `torch.zeros_like(x.cpu()).numpy()`, or a name the
    method later reads with `.item()`/`.numpy()`/`.tolist()` or indexes a Python list with,
    `model.transitions[pred_max[i]]`): host-side indices or numbers, not the module placing its
    tensors on a device."""
    node: ast.AST = call
    stack = ctx.stack
    i = len(stack) - 1
    while i >= 1:
        up = stack[i]
        if (
            isinstance(up, ast.Call)
            and up.args[:1] == [node]
            and (ctx.qualname(up.func) or "").startswith("torch.")
        ):
            node, i = up, i - 1  # `torch.zeros_like(x.cpu()).numpy()`: built from the host copy
            continue
        if not (isinstance(up, ast.Attribute) and isinstance(stack[i - 1], ast.Call)):
            break
        if up.attr in HOST_VALUE_METHODS:
            return True
        node, i = stack[i - 1], i - 2
    holder = stack[i] if i >= 0 else None
    if not (isinstance(holder, ast.Assign) and holder.value is node and len(holder.targets) == 1):
        return False
    target = holder.targets[0]
    fn = ctx.frame.node
    if not isinstance(target, ast.Name) or not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    return any(
        (
            isinstance(sub, ast.Call)
            and isinstance(sub.func, ast.Attribute)
            and sub.func.attr in HOST_VALUE_METHODS
            and any(isinstance(n, ast.Name) and n.id == target.id for n in ast.walk(sub.func.value))
        )
        or _indexes_python_values(ctx, sub, target.id)
        for sub in ast.walk(fn)
    )


def _indexes_python_values(ctx: Context, node: ast.AST, name: str) -> bool:
    """`model.transitions[pred_max[idx]]`: the host copy picks items of a Python list (an
    attribute of another object, not a tensor of this module)."""
    return (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Attribute)
        and not _is_self_attr_read(node.value)
        and not ctx.is_tensor(node.value)
        and any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node.slice))
    )


# methods a user calls to run the model for a result, not layers of someone else's forward:
# they set the mode and the grad state they need (`generate` samples with dropout off)
_INFERENCE_ENTRY = re.compile(
    r"^_?(generate|predict|sample|infer|inference|decode|translate|beam_search|greedy|synthesi[sz]e|evaluate|parse)",
    re.IGNORECASE,
)


@per_node
def _runs_its_own_step(fn: ast.AST) -> bool:
    """A method that back-propagates or steps an optimizer itself (MAML's `forward` is a whole
    meta-training step): it decides the grad state and the mode of what it runs, for metrics
    under `no_grad` as for the update, so there is no caller's choice to override."""
    for n in ast.walk(fn):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
            name = n.func.attr
            if name == "backward" or (name == "grad" and terminal_name(n.func.value) == "autograd"):
                return True
            if name == "step" and re.search(r"optim", unparse(n.func.value), re.IGNORECASE):
                return True
    return False


def _loads_its_weights_before(fn: ast.AST, call: ast.Call) -> bool:
    """The method loads the module's own weights (`self.load_state_dict(...)`) before the call:
    a loader of pretrained weights, which hands back a model ready for inference, as
    `from_pretrained` does."""
    return any(
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr == "load_state_dict"
        and is_name(n.func.value, "self")
        and n.lineno < call.lineno
        for n in ast.walk(fn)
    )


def _own_method_of_that_name(ctx: Context, name: str) -> bool:
    """The class (or a base in this source) defines `name` without the `mode` parameter of
    `nn.Module.train`: a method of its own by that name (a training loop)."""
    for fn in ctx.class_methods():
        if fn.name == name:
            params = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]]
            rest = params[1:]
            return fn.args.vararg is None and (not rest or rest[0] != "mode")
    return False


_MODULE_BASES = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module"})


def not_a_model(ctx: Context) -> bool:
    """A trainer that is a module only to register buffers and `.to()` them, whose methods run
    the training rather than being the model's own code: it has no `forward` and
    back-propagates, or its `forward` is the whole training loop or step (it back-propagates
    and steps an optimizer itself)."""
    return _trainer_without_forward(ctx) or _trains_in_forward(ctx)


def _trainer_without_forward(ctx: Context) -> bool:
    """The class subclasses `nn.Module` but has no `forward`, in this source or from a base,
    and back-propagates. (A model without `forward`, called through `encode_text()` and the
    like, back-propagates nothing.)"""
    chain = ctx.class_chain()
    if not chain or any(
        isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name in ("forward", "__call__")
        for cls in chain
        for stmt in cls.body
    ):
        return False
    if not any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "backward"
        for cls in chain
        for n in ast.walk(cls)
    ):
        return False
    known = {cls.name for cls in chain}
    for cls in chain:
        for base in cls.bases:
            if isinstance(base, ast.Name) and base.id in known:
                continue
            if ctx.qualname(base) not in _MODULE_BASES:
                return False  # a base from elsewhere may bring its own forward
    return True


@check("TM103", calls={"train", "eval"})
def mode_switch_inside_module(call: ast.Call, ctx: Context) -> None:
    if not ctx.in_module_method or not isinstance(call.func, ast.Attribute):
        return
    if ctx.method in ("train", "eval", "training"):
        # overriding train()/eval() (e.g. to freeze BatchNorm) or a `training` property
        # setter that forwards the mode is the sanctioned place
        return
    if ctx.method in ("__init__", "__setstate__"):
        # while the module is being built (or unpickled) no caller has set a mode yet: the call
        # sets the starting mode (a no-op for `self.train()`, a new module is in training mode)
        return
    recv = call.func.value
    is_self = isinstance(recv, ast.Name) and recv.id == "self"
    is_sub = isinstance(recv, ast.Attribute) and isinstance(recv.value, ast.Name) and recv.value.id == "self"
    if not (is_self or is_sub):
        return
    if is_self and _own_method_of_that_name(ctx, call.func.attr):
        return  # `def train(self):` runs the training loop: `self.train()` calls it, not the mode switch
    if not_a_model(ctx):
        return
    fn = ctx.frame.node
    if fn is not None and _runs_its_own_step(fn):
        return
    if is_self and call.func.attr == "eval" and fn is not None and _loads_its_weights_before(fn, call):
        return  # `self.load_state_dict(pretrained); self.eval()`: a pretrained model starts in eval mode
    if call.func.attr == "train" and _restores_a_saved_mode(ctx, call):
        return  # `was = self.ema.training` ... `self.ema.train(was)`: the caller's mode, put back
    if call.func.attr == "eval" and fn is not None and _put_back_later(ctx, fn, call):
        return  # the switch between saving the mode and putting it back is temporary
    if ctx.method and _INFERENCE_ENTRY.match(ctx.method):
        if call.func.attr == "eval":
            return  # `generate()` samples in eval mode: what it needs, not the caller's choice
        if fn is not None and _switched_to_eval_before(fn, call):
            return  # `self.eval()` ... `self.train()`: the entry point puts back the mode it left
    if (
        call.func.attr == "eval"
        and fn is not None
        and not ctx.in_forward
        and _records_no_graph_after(ctx, fn, call)
    ):
        return  # `@torch.no_grad() def tokenize(self): self.eval(); ...`: an inference entry point by what it does
    if is_sub and call.func.attr == "eval" and ctx.in_forward:
        return  # the part runs in eval on every call whatever the caller set: its fixed mode, the author's choice
    if fn is not None and not ctx.in_forward and _alternates_phases(fn, call):
        return  # an eval-mode rollout, then the training phase, inside one algorithm step
    if is_sub and fn is not None and _assigned_before(fn, recv, call):
        return  # `self.model = load(...)` then `self.model.eval()`: the starting mode of a new part
    if is_sub and _under_a_test_of_its_mode(ctx, recv):  # type: ignore[arg-type]
        return  # `if not self.paraphraser.training: self.paraphraser.train()`: the mode this part must have
    if (
        is_sub
        and call.func.attr == "eval"
        and (
            _runs_it_without_grad(ctx, recv) or recv.attr in _frozen_submodules(ctx)  # type: ignore[union-attr]
        )
    ):
        return  # a frozen tool (a codec, a teacher) the module itself runs: the caller's `train()` must not reach it
    ctx.flag(
        call,
        f"`{unparse(call.func)}()` inside `{ctx.cls.name}.{ctx.method}` switches the mode the caller set.",  # type: ignore[union-attr]
        "Remove it and let the caller call `model.train()` / `model.eval()`.",
    )


def _under_a_test_of_its_mode(ctx: Context, part: ast.Attribute) -> bool:
    """The switch sits under an `if` that reads the same part's `.training`: the class checks
    the part's mode and sets the one the part must have, whatever mode the caller chose."""
    want = ast.dump(part)
    return any(
        isinstance(anc, ast.If)
        and any(
            isinstance(n, ast.Attribute) and n.attr == "training" and ast.dump(n.value) == want
            for n in ast.walk(anc.test)
        )
        for anc in ctx.stack
    )


def _records_no_graph_after(ctx: Context, fn: ast.AST, call: ast.Call) -> bool:
    """A method outside the forward path that records no graph after its `eval()`: decorated
    `@torch.no_grad()` / `@torch.inference_mode()`, or going on into such a block (`self.eval()`
    then `with torch.no_grad():` a sampling loop). It is an inference entry point by what it does,
    whatever its name (`tokenize`, `reinforce_optim_one_mol`): it needs eval mode, and the caller
    that wants a result from it has nothing to set."""
    if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
        grad_off(ctx, d) for d in fn.decorator_list
    ):
        return True
    return any(_turns_grad_off(ctx, n) and n.lineno > call.lineno for n in own_nodes(fn))


def _restores_a_saved_mode(ctx: Context, call: ast.Call) -> bool:
    """`self.ema.train(training)` with `training = self.ema.training` read earlier (or
    `.train(m.training)` itself): the mode the caller set, saved and put back."""
    if len(call.args) != 1:
        return False
    arg = call.args[0]
    if isinstance(arg, ast.Name):
        arg = ctx.origin(arg) or arg
    return isinstance(arg, ast.Attribute) and arg.attr == "training"


def _put_back_later(ctx: Context, fn: ast.AST, call: ast.Call) -> bool:
    """`self.ema.eval()` followed, later in the method, by `self.ema.train(was)` that restores
    a saved mode (`_restores_a_saved_mode`)."""
    recv = unparse(call.func.value)  # type: ignore[attr-defined]
    return any(
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr == "train"
        and n.lineno > call.lineno
        and unparse(n.func.value) == recv
        and _restores_a_saved_mode(ctx, n)
        for n in ast.walk(fn)
    )


def _runs_it_without_grad(ctx: Context, recv: ast.Attribute) -> bool:
    """`with torch.inference_mode(): self.codec.eval(); ids = self.codec(wave)`: the eval
    switch sits in a grad-off block that runs the same submodule, a tokenizer or teacher the
    module uses as a fixed tool. Its mode is the module's business: a caller's `model.train()`
    would put it back into training mode (dropout, codebook updates) on every step.
    TM104 leaves the block alone for the same reason."""
    for node in reversed(ctx.stack):
        if _turns_grad_off(ctx, node):
            return any(
                isinstance(n, ast.Call) and self_attr_name(n.func) == recv.attr
                for stmt in node.body
                for n in ast.walk(stmt)
            )
    return False


def _turns_grad_off(ctx: Context, node: ast.AST) -> bool:
    """`with torch.no_grad():` / `with torch.inference_mode():`: a block that records no graph
    whatever the program's state (not `set_grad_enabled(cond)`, which may leave it on)."""
    return isinstance(node, (ast.With, ast.AsyncWith)) and any(
        grad_off(ctx, i.context_expr) for i in node.items
    )


def _assigned_before(fn: ast.AST, recv: ast.Attribute, call: ast.Call) -> bool:
    """`self.model = ensemble[0]` on an earlier line of the same method (a `setUp` or `load`
    that builds the part): like `__init__`, no caller has set a mode on it yet."""
    return any(
        isinstance(n, (ast.Assign, ast.AnnAssign))
        and n.lineno < call.lineno
        and any(
            isinstance(t, ast.Attribute)
            and t.attr == recv.attr
            and isinstance(t.value, ast.Name)
            and t.value.id == "self"
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
        )
        for n in ast.walk(fn)
    )


def _returns_host_values(fn: ast.AST) -> bool:
    """Every `return` of the method hands back Python values (`.tolist()`, `.item()`,
    `.numpy()`): no graph leaves it, so there is no gradient for a caller to want."""
    returns = [n for n in own_nodes(fn) if isinstance(n, ast.Return)]
    return bool(returns) and all(
        isinstance(r.value, ast.Call)
        and isinstance(r.value.func, ast.Attribute)
        and r.value.func.attr in HOST_VALUE_METHODS
        for r in returns
    )


def _covers(outer: str, inner: str) -> bool:
    """`self` covers `self.flow_core`; `self.flow_core` covers itself."""
    return inner == outer or inner.startswith(outer + ".")


def _alternates_phases(fn: ast.AST, call: ast.Call) -> bool:
    """`self.eval()` for a sampling rollout, then `self.flow_core.train()` for the loss, in one
    method that is not the forward pass (a reinforcement step of a generative model): the
    switch happens in the middle of the call, where no caller could make it. Both switches
    belong to the algorithm. Needs an `eval()` of the part (or of a module holding it) before
    a `train()` of it."""
    switches = [
        (n.lineno, n.func.attr, unparse(n.func.value))
        for n in ast.walk(fn)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr in ("eval", "train")
        and not n.args
        and unparse(n.func.value).split(".")[0] == "self"
    ]
    my_line, my_switch, mine = call.lineno, call.func.attr, unparse(call.func.value)  # type: ignore[attr-defined]
    for line, switch, recv in switches:
        if my_switch == "eval" and switch == "train" and line > my_line and _covers(mine, recv):
            return True
        if my_switch == "train" and switch == "eval" and line < my_line and _covers(recv, mine):
            return True
    return False


def _switched_to_eval_before(fn: ast.AST, call: ast.Call) -> bool:
    """`self.eval()` on an earlier line of the same method: this call restores a mode."""
    return any(
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr == "eval"
        and unparse(n.func.value) == unparse(call.func.value)  # type: ignore[attr-defined]
        and n.lineno < call.lineno
        for n in ast.walk(fn)
    )


def _back_propagates_itself(ctx: Context, cls: ast.ClassDef) -> bool:
    """Another method of the class runs a backward pass of its own (`torch.autograd.backward(fx,
    dx)` or `torch.autograd.grad(...)` under `torch.enable_grad()`), as a reversible block's
    `backward_pass` does: its forward runs without a graph on purpose, to save the activations
    that this backward recomputes."""
    for fn in cls.body:
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or fn.name == "forward":
            continue
        for n in ast.walk(fn):
            if isinstance(n, (ast.With, ast.AsyncWith)) and any(
                grad_context(ctx, i.context_expr) == "enable_grad" for i in n.items
            ):
                if any(
                    isinstance(c, ast.Call) and terminal_name(c.func) in ("backward", "grad")
                    for c in ast.walk(n)
                ):
                    return True
    return False


@check(
    "TM104",
    nodes=(ast.With, ast.AsyncWith, ast.FunctionDef, ast.AsyncFunctionDef),
    calls={"set_grad_enabled"},
)
def no_grad_inside_module(node: ast.AST, ctx: Context) -> None:
    # Only the forward path matters: `generate`/`predict`/`sample` are inference entry points,
    # and weight initialisation or EMA updates write parameters in place and must not be
    # recorded; nobody back-propagates through those.
    hint = "Remove it from the module; the caller wraps inference in `torch.inference_mode()` (or `no_grad`)."
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        parent = ctx.parent
        if not isinstance(parent, ast.ClassDef):
            return
        info = ctx.classes.get(parent.name)
        if info is None or info.kind != MODULE or not_a_model(ctx):
            return
        if node.name not in ("forward", "__call__") and node.name not in info.forward_helpers:
            return
        if node.name not in ("forward", "__call__") and _INFERENCE_ENTRY.match(node.name):
            return  # `@torch.inference_mode() def decode(...)`: a public inference API, also when forward uses it
        if _runs_its_own_step(node) or _returns_host_values(node):
            return
        if _trains_nothing_through(ctx, info.attrs, parent, node):
            return
        for d in node.decorator_list:
            if grad_off(ctx, d):
                ctx.flag(
                    d,
                    f"`@{unparse(d)}` on `{parent.name}.{node.name}` disables gradients inside the module.",
                    hint,
                )
        return
    if not ctx.in_module_method or not (ctx.in_forward or ctx.method == "__call__") or not_a_model(ctx):
        return
    if ctx.frame.node is not None and (
        _runs_its_own_step(ctx.frame.node) or _returns_host_values(ctx.frame.node)
    ):
        return
    if ctx.cls is not None and _back_propagates_itself(ctx, ctx.cls.node):
        return  # a reversible block: forward without a graph, gradients recomputed in its own backward pass
    if isinstance(node, ast.Call):
        if grad_context(ctx, node) == "no_grad" and not isinstance(ctx.parent, ast.withitem):
            ctx.flag(
                node,
                f"`{unparse(node)}` inside `{ctx.cls.name}.{ctx.method}` disables gradients inside the module.",  # type: ignore[union-attr]
                hint,
            )
        return
    if not _cuts_the_output(ctx, node):
        return  # targets, statistics or in-place updates on the side: the output keeps its graph
    if _under_a_role_switch(ctx) or _trains_other_parts_elsewhere(ctx, node):
        return  # `if self.is_teacher: with torch.no_grad(): ...`: a partial freeze the caller cannot set
    for item in node.items:  # type: ignore[attr-defined]
        if grad_off(ctx, item.context_expr):
            ctx.flag(
                node,
                f"`with {unparse(item.context_expr)}` inside `{ctx.cls.name}.{ctx.method}` disables gradients inside the module.",  # type: ignore[union-attr]
                hint,
            )


def _under_a_role_switch(ctx: Context) -> bool:
    """The block runs only under `if <flag>:` (`self.is_teacher`, `freeze_backbone`, `not
    self.finetune`), a plain option of the class or the call rather than its training mode:
    the author offers both behaviours, and the caller picks one by the flag, not by wrapping."""
    for anc in reversed(ctx.stack):
        if isinstance(anc, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return False
        if not isinstance(anc, ast.If):
            continue
        test = anc.test.operand if isinstance(anc.test, ast.UnaryOp) else anc.test
        name = terminal_name(test) if isinstance(test, (ast.Name, ast.Attribute)) else None
        if (
            name is not None
            and name != "training"
            and (
                isinstance(test, ast.Name) or is_name(test.value, "self")  # type: ignore[attr-defined]
            )
        ):
            return True
    return False


def _trains_other_parts_elsewhere(ctx: Context, block: ast.AST) -> bool:
    """`forward` runs `self.teacher_model` under `no_grad`, and another method of the class
    (`secondary_forward`) runs a part that `forward` never calls, with gradients on: the class
    freezes one part and trains another, which no caller-side `no_grad` could express."""
    fn = ctx.frame.node
    if fn is None or ctx.cls is None:
        return False
    in_forward = {self_attr_name(n.func) for n in ast.walk(fn) if isinstance(n, ast.Call)} - {None}
    for method in ctx.class_methods():
        if method is fn or method.name == "__init__" or any(grad_off(ctx, d) for d in method.decorator_list):
            continue
        # the calls inside the method's `no_grad`/`inference_mode` blocks, found once per method
        without_grad = {id(n) for w in ast.walk(method) if _turns_grad_off(ctx, w) for n in ast.walk(w)}
        for n in own_nodes(method):
            if not isinstance(n, ast.Call) or id(n) in without_grad:
                continue
            part = self_attr_name(n.func)
            if (
                part is not None
                and part not in in_forward
                and part in ctx.cls.attrs
                and ctx.cls.attrs[part] in (MODULE, None)
            ):
                return True
    return False


def _trains_nothing_through(
    ctx: Context, attrs: dict[str, str | None], cls: ast.ClassDef, fn: ast.FunctionDef | ast.AsyncFunctionDef
) -> bool:
    """A decorated method of the forward path that cuts no graph anyone trains through:
    it runs only submodules' inference entry points (`self.semantic.generate(...)`: a
    generation pipeline), or it runs no trained layer (none, or only ones the class freezes
    with `requires_grad = False`: BYOL's momentum encoder) and, for a helper, hands back
    nothing or only indices (`return topk_indices`), which carry no gradient."""
    layers, entries = set(), set()
    frozen = _frozen_submodules(ctx, cls)
    for n in own_nodes(fn):
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        if isinstance(f, ast.Name) and f.id == "self":
            return False
        if (attr := self_attr_name(f)) is not None:
            if attr == "forward" or attrs.get(attr) in (MODULE, None):
                layers.add(attr)  # a submodule, or an attribute called like one
        elif (
            isinstance(f, ast.Attribute)
            and _INFERENCE_ENTRY.match(f.attr)
            and (part := self_attr_name(f.value))
        ):
            entries.add(part)
        elif (part := _part_of(f)) is not None and part in frozen:
            layers.add(part)  # `self.codec.encoder(x)`: a layer inside a part the class freezes
    if not layers and entries:
        return True
    if layers:
        return not layers - frozen  # frozen: nothing to train through them
    if fn.name in ("forward", "__call__"):
        return False
    returns = [n.value for n in own_nodes(fn) if isinstance(n, ast.Return) and n.value is not None]
    return all(INTEGER_NAME.search(terminal_name(r) or "") for r in returns)


# `nn.Module` methods that run no layer: `self.target.parameters()` reads, it does not compute
_MODULE_BOOKKEEPING = frozenset(
    {
        "parameters", "named_parameters", "buffers", "named_buffers", "modules", "named_modules",
        "children", "named_children", "state_dict", "load_state_dict", "apply", "to", "cuda", "cpu",
        "eval", "train", "requires_grad_", "zero_grad", "register_buffer", "register_parameter",
        "half", "float", "double", "type",
    }
)  # fmt: skip


def _part_of(f: ast.AST) -> str | None:
    """`encodec` for `self.encodec.encoder` or `self.encodec.quantizer.encode`: the submodule
    of this module whose layer the call runs (not its bookkeeping, `self.target.parameters()`)."""
    if not isinstance(f, ast.Attribute) or f.attr in _MODULE_BOOKKEEPING:
        return None
    while isinstance(f, ast.Attribute) and isinstance(f.value, ast.Attribute):
        f = f.value
    return self_attr_name(f)


def _cuts_the_output(ctx: Context, block: ast.AST) -> bool:
    """The `with torch.no_grad():` block returns, or runs layers of this module (`self.fc(x)`,
    a submodule the class holds, or `self(...)`): their parameters get no gradient. A block of
    tensor math on the inputs (a teacher's targets) or of in-place updates (a memory bank, a
    weight renormalised with `copy_`) cuts nothing the module trains."""
    body = getattr(block, "body", [])
    attrs = ctx.cls.attrs if ctx.cls is not None else {}
    tools = _switched_to_eval_in(body)  # frozen tools the block runs in eval mode: nothing to train
    if ctx.cls is not None:
        tools |= _frozen_submodules(ctx, ctx.cls.node)  # `requires_grad = False` over its parameters
    if ctx.frame.node is not None:
        # run with gradients elsewhere in the same forward (another training phase's branch):
        # the block chooses which parts train on this path, which no caller can do
        tools |= _called_with_grad(ctx, ctx.frame.node)
    for stmt in body:
        for n in ast.walk(stmt):
            if isinstance(n, ast.Return):
                return True
            if not isinstance(n, ast.Call):
                continue
            f = n.func
            if isinstance(f, ast.Name) and f.id == "self":
                return True
            attr = self_attr_name(f)
            if attr is not None and (attrs.get(attr) == MODULE or attr == "forward") and attr not in tools:
                return True
    return False


def _called_with_grad(ctx: Context, fn: ast.AST) -> set[str]:
    """`X` for each `self.X(...)` that `fn` calls outside every `no_grad`/`inference_mode` block."""
    out: set[str] = set()
    todo = list(getattr(fn, "body", []))
    while todo:
        node = todo.pop()
        if _turns_grad_off(ctx, node) or isinstance(
            node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
        ):
            continue
        if isinstance(node, ast.Call) and (attr := self_attr_name(node.func)) is not None:
            out.add(attr)
        todo.extend(ast.iter_child_nodes(node))
    return out


def _switched_to_eval_in(body: list[ast.stmt]) -> set[str]:
    """`self.codec` for a `self.codec.eval()` statement of the block."""
    calls = [n.value.func for n in body if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)]
    return {
        name
        for f in calls
        if isinstance(f, ast.Attribute) and f.attr == "eval" and (name := self_attr_name(f.value)) is not None
    }


def _self_attr_target(node: ast.Assign | ast.AnnAssign) -> ast.Attribute | None:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    for t in targets:
        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
            return t
    return None


def _holds_modules(ctx: Context, value: ast.AST) -> bool:
    """A list/tuple/dict display or comprehension whose items are modules or Parameters."""
    if isinstance(value, (ast.List, ast.Tuple, ast.Set)):
        items = [e.value if isinstance(e, ast.Starred) else e for e in value.elts]
    elif isinstance(value, ast.Dict):
        items = [v for v in value.values if v is not None]
    elif isinstance(value, (ast.ListComp, ast.GeneratorExp)):
        items = [value.elt]
    elif isinstance(value, ast.DictComp):
        items = [value.value]
    elif isinstance(value, ast.BinOp) and isinstance(value.op, (ast.Add, ast.Mult)):
        return _holds_modules(ctx, value.left) or _holds_modules(ctx, value.right)
    else:
        return False
    return any(_unregistered_module(ctx, i) or _holds_modules(ctx, i) for i in items)


def _unregistered_module(ctx: Context, item: ast.AST) -> bool:
    return ctx.kind(item) in (MODULE, PARAMETER) and not _registered_alias(ctx, item)


def _wraps_a_held_module(ctx: Context, item: ast.AST) -> bool:
    """`for member in self.ensemble.members: self.views.append(View(member, noise))`: an instance of a
    module class of this source that builds no layer or parameter of its own, made around an
    element of a loop over a module the class already holds. Its only weights are that member's,
    which `.parameters()`, `.to()` and `state_dict()` already reach through `self.ensemble`;
    registering the wrappers would only save the same weights twice under new keys."""
    value = ctx.origin(item) if isinstance(item, ast.Name) else item
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)):
        return False
    info = ctx.classes.get(value.func.id)
    if info is None or info.kind != MODULE or not _builds_no_layer(ctx, info.node):
        return False
    loops = [
        n
        for n in ctx.stack
        if isinstance(n, ast.For)
        and isinstance(n.target, ast.Name)
        and isinstance(n.iter, ast.Attribute)
        and root_name(n.iter) == "self"
    ]
    handed = {
        n.id
        for a in [*value.args, *(k.value for k in value.keywords)]
        for n in ast.walk(a)
        if isinstance(n, ast.Name)
    }
    return any(loop.target.id in handed for loop in loops)  # type: ignore[union-attr]


def _builds_no_layer(ctx: Context, cls: ast.ClassDef) -> bool:
    """The class's `__init__` creates no module and no parameter: it keeps what it is given."""
    init = next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
    if init is None:
        return False
    for n in ast.walk(init):
        if not isinstance(n, ast.Call):
            continue
        q = ctx.qualname(n.func) or ""
        name = n.func.id if isinstance(n.func, ast.Name) else q.rsplit(".", 1)[-1]
        if q.startswith("torch.nn.") or name in _REGISTERING:
            return False
        info = ctx.classes.get(name)
        if info is not None and info.kind == MODULE and name != cls.name:
            return False  # (its own class: the wrappers it makes of members, this very case)
    return True


def _registered_alias(ctx: Context, item: ast.AST) -> bool:
    """`self.encoder`: a module assigned to an attribute is registered already, so a list of
    them (an iteration order, `self.order = [self.a, self.b]`) hides nothing from PyTorch.
    Likewise a name the same method registers with `setattr(self, name, layer)`,
    `self.add_module(name, layer)` or `self.<attr> = layer`."""
    if isinstance(item, ast.Attribute) and isinstance(item.value, ast.Name) and item.value.id == "self":
        return True
    return isinstance(item, ast.Name) and item.id in _registered_names(ctx)


_REGISTERS = frozenset({"add_module", "register_module", "register_parameter"})


def _registered_names(ctx: Context) -> set[str]:
    fn = ctx.frame.node
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return set()
    state = _state.setdefault(ctx, {})
    cache = state.setdefault("registered", {})
    if id(fn) in cache:
        return cache[id(fn)][1]
    names: set[str] = set()
    for sub in ast.walk(fn):
        if isinstance(sub, ast.Call) and len(sub.args) >= 2 and isinstance(sub.args[-1], ast.Name):
            f = sub.func
            if isinstance(f, ast.Name) and f.id == "setattr" and len(sub.args) == 3:
                if isinstance(sub.args[0], ast.Name) and sub.args[0].id == "self":
                    names.add(sub.args[2].id)  # type: ignore[attr-defined]
            elif (
                isinstance(f, ast.Attribute)
                and f.attr in _REGISTERS
                and isinstance(f.value, ast.Name)
                and f.value.id == "self"
            ):
                names.add(sub.args[-1].id)
        elif isinstance(sub, ast.Assign) and isinstance(sub.value, ast.Name):
            for t in sub.targets:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                    names.add(sub.value.id)
    cache[id(fn)] = (fn, names)  # the node is kept so that its id is not reused
    return names


@check("TM105", nodes=(ast.Assign, ast.AnnAssign), calls={"append", "extend", "insert"})
def unregistered_submodules(node: ast.AST, ctx: Context) -> None:
    if not ctx.in_module_method or ctx.method != "__init__":
        return
    if isinstance(node, ast.Call):
        # self.layers = [] ... self.layers.append(nn.Linear(...))
        f = node.func
        if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Attribute)):
            return
        owner = f.value
        if not (isinstance(owner.value, ast.Name) and owner.value.id == "self"):
            return
        if ctx.cls is None or ctx.cls.attrs.get(owner.attr) not in ("list", "dict"):
            return
        args = node.args[-1:] if f.attr == "insert" else node.args[:1]
        if not any(_unregistered_module(ctx, a) or _holds_modules(ctx, a) for a in args):
            return
        if all(_wraps_a_held_module(ctx, a) for a in args):
            return
        if owner.attr in ctx.cls.flagged or _registered_elsewhere(
            ctx, owner.attr
        ):  # one finding per attribute
            return
        ctx.cls.flagged.add(owner.attr)
        container = "dict" if ctx.cls.attrs.get(owner.attr) == "dict" else "list"
        _flag_container(ctx, node, owner.attr, container, _filled_later_fix(ctx, owner.attr, container))
        return
    value = node.value  # type: ignore[attr-defined]
    target = _self_attr_target(node)  # type: ignore[arg-type]
    if target is None or value is None or not _holds_modules(ctx, value):
        return
    if _registered_elsewhere(ctx, target.attr):
        return
    container = (
        "dict"
        if isinstance(value, (ast.Dict, ast.DictComp))
        else "tuple"
        if isinstance(value, ast.Tuple)
        else "list"
    )
    _flag_container(ctx, node, target.attr, container, _display_fix(ctx, node, value, target.attr))


_NN_CONTAINERS = frozenset({"Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"})
_ADDERS = frozenset({"add_module", "register_module", "register_parameter"})


def _registered_elsewhere(ctx: Context, attr: str) -> bool:
    """The class registers the items itself: `nn.Sequential(*self.layers)`,
    `nn.ModuleList(self.layers)`, or `self.add_module(name, layer)` in a loop over them. The
    plain list is then an alias the model does not need registered twice."""
    if ctx.cls is None:
        return False
    for sub in ast.walk(ctx.cls.node):
        if isinstance(sub, ast.Call):
            q = ctx.qualname(sub.func) or ""
            if q.startswith("torch.nn.") and q.rsplit(".", 1)[-1] in _NN_CONTAINERS:
                for a in sub.args:
                    inner = a.value if isinstance(a, ast.Starred) else a
                    if _is_self_attr(inner, attr):
                        return True
        elif isinstance(sub, (ast.For, ast.AsyncFor)):
            it = sub.iter
            if (
                isinstance(it, ast.Call)
                and it.args
                and isinstance(it.func, ast.Name)
                and it.func.id in ("enumerate", "zip")
            ):
                it = it.args[0]
            if not _is_self_attr(it, attr):
                continue
            for inner in ast.walk(sub):
                if isinstance(inner, ast.Call):
                    f = inner.func
                    if (isinstance(f, ast.Attribute) and f.attr in _ADDERS) or (
                        isinstance(f, ast.Name) and f.id == "setattr"
                    ):
                        return True
    return False


def _flag_container(ctx: Context, node: ast.AST, attr: str, container: str, fix: Fix | None) -> None:
    wrapper = "nn.ModuleDict" if container == "dict" else "nn.ModuleList"
    ctx.flag(
        node,
        f"`self.{attr}` is a plain {container} of modules: its layers are invisible to `.parameters()`, `.to()` and `state_dict()`.",
        f"Wrap it: `self.{attr} = {wrapper}(...)` (`nn.ParameterList`/`nn.ParameterDict` for parameters).",
        fix=fix,
    )


# ---- the fix: wrap the container ----------------------------------------------------------------
# What the class may do with the attribute for the wrapped container to behave as the plain one
# did: iterate, index, len, `in`, and these methods (all exist on the nn containers).
_METHODS = {
    "ModuleList": frozenset({"append", "extend", "insert", "pop"}),
    "ParameterList": frozenset({"append", "extend"}),
    "ModuleDict": frozenset({"items", "keys", "values", "pop", "update", "clear"}),
    "ParameterDict": frozenset({"items", "keys", "values", "pop", "update", "clear", "get", "setdefault"}),
}
# Names an nn.ModuleDict / ParameterDict already has: a key spelled like one is refused.
_CONTAINER_ATTRS = frozenset(
    "T_destination add_module apply bfloat16 buffers call_super_init children clear compile copy cpu"
    " cuda double dump_patches eval extra_repr float forward fromkeys get get_buffer get_extra_state"
    " get_parameter get_submodule half ipu items keys load_state_dict modules mtia named_buffers"
    " named_children named_modules named_parameters parameters pop popitem register_backward_hook"
    " register_buffer register_forward_hook register_forward_pre_hook register_full_backward_hook"
    " register_full_backward_pre_hook register_load_state_dict_post_hook"
    " register_load_state_dict_pre_hook register_module register_parameter"
    " register_state_dict_post_hook register_state_dict_pre_hook requires_grad_ set_extra_state"
    " set_submodule setdefault share_memory state_dict to to_empty train training type update values"
    " xpu zero_grad".split()
)


def _display_fix(ctx: Context, node: ast.AST, value: ast.AST, attr: str) -> Fix | None:
    """`self.x = [nn.Linear(...) for ...]` -> `self.x = nn.ModuleList([...])`; a dict display
    with plain string keys -> `nn.ModuleDict({...})` (a dict comprehension: unsafe, its keys
    are only known when it runs)."""
    if isinstance(value, (ast.List, ast.Tuple)):
        items, container = list(value.elts), "list"
    elif isinstance(value, (ast.ListComp, ast.GeneratorExp)):
        items, container = [value.elt], "list"
    elif isinstance(value, ast.Dict):
        if not all(_good_key(k) for k in value.keys):
            return None
        items, container = list(value.values), "dict"
    elif isinstance(value, ast.DictComp):
        items, container = [value.value], "dict"
    else:
        return None
    found = _wrapper(ctx, items, container)
    if found is None or not _fits(ctx, attr, found[1], node):
        return None
    wrapper, name = found
    bare_tuple = isinstance(value, ast.Tuple) and not ctx.edits.source(value).startswith("(")
    opening, closing = (f"{wrapper}((", "))") if bare_tuple else (f"{wrapper}(", ")")
    edits = [ctx.edits.insert_before(value, opening), ctx.edits.insert_after(value, closing)]
    risky = isinstance(value, ast.DictComp) or name.startswith("Parameter")
    return fix_of(f"Wrap in `{wrapper}`", edits, "unsafe" if risky else "safe")


def _filled_later_fix(ctx: Context, attr: str, container: str) -> Fix | None:
    """`self.x = []` then `self.x.append(nn.Linear(...))`: the empty list becomes
    `nn.ModuleList()` when every append, insert and extend in the class adds modules."""
    assert ctx.cls is not None
    stores = _stores(ctx.cls.node, attr)
    fn = ctx.frame.node
    if len(stores) != 1 or not any(stores[0] is s for s in ast.walk(fn)):
        return None
    store = stores[0]
    value = store.value
    empty = (
        (isinstance(value, ast.List) and not value.elts)
        or (isinstance(value, ast.Dict) and not value.keys)
        or (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id in ("list", "dict")
            and not value.args
            and not value.keywords
        )
    )
    if not empty or container == "dict":
        # `self.heads[name] = layer`: the keys, and a clash with ModuleDict's own names, unknown
        return None
    added: list[ast.AST] = []
    for sub in ast.walk(ctx.cls.node):
        if (
            isinstance(sub, ast.Call)
            and isinstance(sub.func, ast.Attribute)
            and _is_self_attr(sub.func.value, attr)
        ):
            if sub.func.attr in ("append", "insert") and sub.args:
                added.append(sub.args[-1])
            elif sub.func.attr == "extend" and sub.args:
                ext = sub.args[0]
                if isinstance(ext, (ast.List, ast.Tuple)):
                    added.extend(ext.elts)
                elif isinstance(ext, (ast.ListComp, ast.GeneratorExp)):
                    added.append(ext.elt)
                else:
                    return None
    found = _wrapper(ctx, added, "list")
    if found is None or not _fits(ctx, attr, found[1], store):
        return None
    wrapper, name = found
    edit = ctx.edits.replace(value, f"{wrapper}()")
    return fix_of(f"Make it an `{wrapper}`", [edit], "unsafe" if name.startswith("Parameter") else "safe")


def _fits(ctx: Context, attr: str, wrapper: str, store: ast.AST) -> bool:
    return (
        _after_module_init(ctx, store)
        and _class_uses_it_as(ctx, attr, wrapper)
        and _document_uses_it_as(ctx, attr, wrapper)
    )


# list and dict methods the nn containers lack (code elsewhere calling one would break)
_PLAIN_ONLY = frozenset(
    {
        "sort",
        "reverse",
        "index",
        "count",
        "remove",
        "copy",
        "clear",
        "get",
        "setdefault",
        "popitem",
        "fromkeys",
    }
)


def _document_uses_it_as(ctx: Context, attr: str, wrapper: str) -> bool:
    """Code outside the class (the rest of the file or notebook) that reaches the attribute
    through an instance (`model.layers.sort()`, `model.layers + extra`, `isinstance(m.layers,
    list)`, an assignment) would break once it is an nn container. `self.<attr>` is the class's
    own business (`_class_uses_it_as`), here or in other classes with an attribute of that name."""
    allowed = _METHODS[wrapper]
    text = ctx.document
    at = rf"(?<!self)\.{re.escape(attr)}\b"
    for m in re.finditer(rf"{at}\s*\.\s*(\w+)", text):
        if m.group(1) in _PLAIN_ONLY and m.group(1) not in allowed:
            return False
    if re.search(rf"{at}\s*[-+*]|[-+*]\s*[\w.]*{at}|isinstance\(\s*[\w.]*{at}\s*,", text):
        return False
    return re.search(rf"{at}\s*[-+*/]?=(?!=)", text) is None


def _stores(cls: ast.ClassDef, attr: str) -> list[ast.Assign | ast.AnnAssign]:
    out = []
    for sub in ast.walk(cls):
        if isinstance(sub, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
            if any(_is_self_attr(t, attr) for t in targets):
                out.append(sub)
    return out  # type: ignore[return-value]


def _is_self_attr(node: ast.AST, attr: str) -> bool:
    return self_attr_name(node) == attr


def _good_key(key: ast.AST | None) -> bool:
    return (
        isinstance(key, ast.Constant)
        and isinstance(key.value, str)
        and key.value != ""
        and "." not in key.value
        and not key.value.startswith("_")
        and key.value not in _CONTAINER_ATTRS
    )


def _wrapper(ctx: Context, items: list[ast.AST], container: str) -> tuple[str, str] | None:
    """`nn.ModuleList` (or the Parameter/Dict variant) as this source spells it, when every
    item is a module (or every one a Parameter)."""
    if not items or any(isinstance(i, ast.Starred) for i in items):
        return None
    kinds = {ctx.kind(i) for i in items}
    if kinds == {MODULE}:
        name = "ModuleDict" if container == "dict" else "ModuleList"
    elif kinds == {PARAMETER}:
        name = "ParameterDict" if container == "dict" else "ParameterList"
    else:
        return None
    spelled = ctx.spelling(f"torch.nn.{name}")
    return (spelled, name) if spelled is not None else None


def _class_uses_it_as(ctx: Context, attr: str, wrapper: str) -> bool:
    """Everywhere the class touches `self.<attr>`, the nn container behaves as the plain one:
    no list/dict method it lacks, no `isinstance` or arithmetic on it, no second assignment."""
    assert ctx.cls is not None
    allowed = _METHODS[wrapper]
    for parent in ast.walk(ctx.cls.node):
        for child in ast.iter_child_nodes(parent):
            if not _is_self_attr(child, attr):
                continue
            if isinstance(parent, ast.Attribute) and parent.attr not in allowed:
                return False
            if isinstance(parent, (ast.BinOp, ast.AugAssign)):
                return False
            if (
                isinstance(parent, ast.Call)
                and isinstance(parent.func, ast.Name)
                and parent.func.id in ("isinstance", "type")
            ):
                return False
    return len(_stores(ctx.cls.node, attr)) == 1


def _after_module_init(ctx: Context, node: ast.AST) -> bool:
    """The assignment runs after `super().__init__()`: an nn container assigned before it
    raises "cannot assign module before Module.__init__() call", a list does not."""
    fn = ctx.frame.node
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    line = node.lineno  # type: ignore[attr-defined]
    for stmt in fn.body:
        if stmt.lineno >= line:
            return False
        for sub in ast.walk(stmt):
            if (
                isinstance(sub, ast.Call)
                and isinstance(sub.func, ast.Attribute)
                and sub.func.attr == "__init__"
            ):
                return True
    return False


def _moves_own_state(ctx: Context) -> bool:
    """The class (or a base defined in this source) overrides `to`, `_apply` or `cuda`: it
    moves its tensor attributes itself, as metric and loss classes with state do."""
    return any(fn.name in ("to", "_apply", "cuda") for fn in ctx.class_methods())


_RETYPES = frozenset({"type_as", "to"})


def _follows_an_input(ctx: Context, attr: str) -> bool:
    """A method other than `__init__` re-binds the attribute to a tensor it is given:
    `self.alpha = self.alpha.type_as(x)`, `self.w = self.w.to(x.device)`. The class moves it
    itself, lazily, as it moves its state in an overridden `to`."""
    return any(_retypes_itself(ctx, n, attr) for n in _assignments_after_init(ctx))


def _assignments_after_init(ctx: Context) -> Iterator[ast.Assign]:
    """The assignments in the methods other than `__init__` of the class (and its bases in
    this source)."""
    for fn in _methods_after_init(ctx):
        yield from (n for n in ast.walk(fn) if isinstance(n, ast.Assign))


def _methods_after_init(ctx: Context) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The methods other than `__init__` of the class (and its bases in this source)."""
    return (fn for fn in ctx.class_methods() if fn.name != "__init__")


def _scalar_constant(ctx: Context, value: ast.AST) -> bool:
    """`torch.tensor(0.0625)`: a 0-dim CPU tensor built from a number, neither placed nor
    trained, which operations accept next to tensors of any device; `__init__` builds it anew,
    so `state_dict()` has nothing to keep."""
    if not accelerator.scalar_tensor(ctx, value) or keyword(value, "device") is not None:
        return False
    grad = keyword(value, "requires_grad")
    return grad is None or (isinstance(grad, ast.Constant) and grad.value is False)


def _refilled_from_state(ctx: Context, attr: str) -> bool:
    """Another method refills the attribute from the module's own state before it is used:
    `self.backup_mean.data = deepcopy(self.running_mean.data)`. Scratch that ends up where
    that state is, and is meant to stay out of `state_dict()`."""
    for n in _assignments_after_init(ctx):
        if len(n.targets) != 1:
            continue
        t = n.targets[0]
        if isinstance(t, ast.Attribute) and t.attr == "data":
            t = t.value
        if _is_self_attr(t, attr) and _copy_of_state(n.value, attr):
            return True
    return False


def _recomputed_in_forward(ctx: Context, attr: str) -> bool:
    """`forward` rebinds the attribute on every call, from something other than itself
    (`self.weight = w[:n].reshape(out, in)` from coefficients): the value `__init__` gives it is
    a placeholder, and what forward uses is made where its inputs are."""
    return any(
        isinstance(stmt, ast.Assign) and _rebinds_anew(stmt, attr)
        for fn in ctx.class_methods()
        if fn.name == "forward"
        for stmt in fn.body  # unconditionally: its own statements, not a branch's
    )


def _empty_placeholder(ctx: Context, value: ast.AST, attr: str) -> bool:
    """`self.edge_index = torch.empty(2, 0)` that another method of the class rebinds
    (`self.edge_index = _triu_indices(x, batch)`, on the input's device): a zero-element
    placeholder for a runtime cache holds no data to move, and as a buffer its batch-dependent
    value would land in `state_dict()`."""
    if not (
        isinstance(value, ast.Call)
        and ctx.qualname(value.func) in _EMPTY_FACTORIES
        and any(isinstance(a, ast.Constant) and a.value == 0 and type(a.value) is int for a in value.args)
    ):
        return False
    return any(_rebinds_anew(n, attr) for n in _assignments_after_init(ctx))


def _rebinds_anew(stmt: ast.Assign, attr: str) -> bool:
    """`self.<attr> = <value>` from something other than `self.<attr>` itself."""
    return any(_is_self_attr(t, attr) for t in stmt.targets) and not any(
        _is_self_attr(n, attr) for n in ast.walk(stmt.value)
    )


def _copy_of_state(value: ast.AST, attr: str) -> bool:
    """`deepcopy(self.running_mean.data)`, `self.weight.detach().clone()`: a copy of another
    tensor attribute."""
    while True:
        if isinstance(value, ast.Call) and not value.keywords:
            if (
                isinstance(value.func, ast.Attribute)
                and value.func.attr in ("clone", "detach")
                and not value.args
            ):
                value = value.func.value
                continue
            if terminal_name(value.func) in ("deepcopy", "copy") and len(value.args) == 1:
                value = value.args[0]
                continue
            return False
        if isinstance(value, ast.Attribute) and value.attr == "data":
            value = value.value
            continue
        return _is_self_attr_read(value) and value.attr != attr  # type: ignore[attr-defined]


def _retypes_itself(ctx: Context, node: ast.Assign, attr: str) -> bool:
    """`self.<attr> = self.<attr>.type_as(x)` / `.to(x)` / `.to(x.device)` / `.to(dtype=x.dtype,
    device=x.device)` (also as one arm of `... if self.<attr> is not None else None`), with `x` a
    local name, not `self` nor an import (`.to(torch.float16)` follows no input)."""
    v = node.value
    if isinstance(v, ast.IfExp):
        v = v.body if isinstance(v.body, ast.Call) else v.orelse
    if not (
        len(node.targets) == 1
        and _is_self_attr(node.targets[0], attr)
        and isinstance(v, ast.Call)
        and isinstance(v.func, ast.Attribute)
        and v.func.attr in _RETYPES
        and _is_self_attr(v.func.value, attr)
    ):
        return False
    target = v.args[0] if len(v.args) == 1 else keyword(v, "device") if not v.args else None
    if target is None:
        return False
    root = target
    while isinstance(root, ast.Attribute):
        root = root.value
    return isinstance(root, ast.Name) and root.id != "self" and ctx.resolve_import(root.id) is None


def _on_callers_device(ctx: Context, value: ast.AST, placed: set[str]) -> bool:
    """The tensor is put on a device the caller gave the constructor (`.to(device)`,
    `.cuda(gpu)`, `device=device` with a parameter of `__init__`), or computed from attributes
    that were (`self.alphas = 1 - self.betas`): it starts where the caller's model is."""
    for sub in ast.walk(value):
        if _is_self_attr_read(sub) and sub.attr in placed:  # type: ignore[attr-defined]
            return True
        if not isinstance(sub, ast.Call):
            continue
        dev = keyword(sub, "device")
        if dev is None and isinstance(sub.func, ast.Attribute) and sub.func.attr in ("to", "cuda"):
            dev = sub.args[0] if sub.args else None
        if dev is not None and _caller_device(ctx, dev):
            return True
    return False


def _is_self_attr_read(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.ctx, ast.Load)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    )


def _tm106_state(ctx: Context) -> dict[str, set[str]]:
    """Per class being walked: attributes already reported ("seen"), and those on the
    caller's device ("placed")."""
    assert ctx.cls is not None
    per_class = _state.setdefault(ctx, {}).setdefault("tm106", {})
    key = id(ctx.cls.node)
    got = per_class.get(key)
    if got is None or got[0] is not ctx.cls.node:
        got = per_class[key] = (ctx.cls.node, {"seen": set(), "placed": set()})
    return got[1]


@check("TM106", nodes=(ast.Assign, ast.AnnAssign))
def tensor_attribute_not_buffer(node: ast.Assign | ast.AnnAssign, ctx: Context) -> None:
    if not ctx.in_module_method or ctx.method != "__init__" or node.value is None:
        return
    target = _self_attr_target(node)
    if target is None or ctx.kind(node.value) != TENSOR or _moves_own_state(ctx):
        return
    wrapped = _converted_parameter(ctx, node.value)
    if wrapped is not None:
        _flag_converted_parameter(ctx, node, target.attr, *wrapped)
        return
    if _made_a_parameter_later(ctx, node, target.attr) or _init_step_to_a_parameter(ctx, node, target.attr):
        return  # `self.lr = lr * torch.ones_like(p)` then `self.lr = nn.Parameter(self.lr)`
    state = _tm106_state(ctx)
    placed = _on_callers_device(ctx, node.value, state["placed"])
    if placed:
        state["placed"].add(target.attr)
    if target.attr in state["seen"] or read_only_for_python(ctx.class_chain(), target.attr):
        return  # reported at its first assignment (`if cuda: ... else: ...`), or host data
    if _filled_with_host_copies(ctx, target.attr):
        return  # `self.codes[i:j] = codes.cpu()`: a log kept in host memory on purpose
    if (
        _follows_an_input(ctx, target.attr)
        or _refilled_from_state(ctx, target.attr)
        or _recomputed_in_forward(ctx, target.attr)
        or _empty_placeholder(ctx, node.value, target.attr)
    ):
        return  # `self.a = self.a.type_as(x)` in forward: the class moves it itself
    if _scalar_constant(ctx, node.value):
        return  # `torch.tensor(0.0625)`: a 0-dim CPU constant mixes with tensors on any device
    if _used_only_while_built(ctx, target.attr):
        return  # `self.unigrams = torch.ones(n)` only feeds other state built in `__init__`
    state["seen"].add(target.attr)
    hint = f'`self.register_buffer("{target.attr}", {unparse(node.value, 40)})`, or `nn.Parameter(...)` if it should be trained.'
    if placed:
        ctx.flag(
            node,
            f"`self.{target.attr}` holds a plain tensor on the device given to the constructor: it will not follow a later `model.to(...)`/`.half()` and is missing from `state_dict()`.",
            hint,
            severity="info",
        )
        return
    ctx.flag(
        node,
        f"`self.{target.attr}` holds a plain tensor: it will not follow `model.to(device)` and is missing from `state_dict()`.",
        hint,
    )


def _used_only_while_built(ctx: Context, attr: str) -> bool:
    """`self.<attr>` is read in this `__init__` and appears nowhere else in the file or notebook
    (no `getattr` names it either): the tensor only helps build other state, so neither
    `.to(device)` nor `state_dict()` ever needs it. An attribute nothing here reads may be read
    by other files: it is not exempt."""
    fn = ctx.frame.node
    if fn is None:
        return False
    mention = re.compile(rf"\.{re.escape(attr)}\b|[\"']{re.escape(attr)}[\"']")
    here = len(mention.findall(_COMMENT.sub("", ast.get_source_segment("\n".join(ctx.lines), fn) or "")))
    return here >= 2 and len(mention.findall(_COMMENT.sub("", ctx.document))) == here


_COMMENT = re.compile(r"#[^\n'\"]*$", re.MULTILINE)  # a trailing comment without quotes in it


def _init_step_to_a_parameter(ctx: Context, node: ast.AST, attr: str) -> bool:
    """`self.taus = torch.stack(...)` then `self.ps = nn.Parameter(self.taus)` later in
    `__init__`, and no other method reads `self.taus`: the registered Parameter is the state
    that moves and is saved; the plain attribute is only a step of the constructor."""
    fn = ctx.frame.node
    if fn is None:
        return False
    wrapped = any(
        isinstance(n, ast.Call)
        and n.lineno > node.lineno  # type: ignore[attr-defined]
        and ctx.qualname(n.func) in _PARAMETER
        and n.args
        and self_attr_name(n.args[0]) == attr
        for n in ast.walk(fn)
    )
    if not wrapped:
        return False
    return not any(
        isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load) and _is_self_attr(n, attr)
        for method in _methods_after_init(ctx)
        for n in ast.walk(method)
    )


def _made_a_parameter_later(ctx: Context, node: ast.AST, attr: str) -> bool:
    """A later statement of the same `__init__` (same block) stores `nn.Parameter(...)` into
    `self.<attr>`: the plain tensor was only a step towards it."""
    body = getattr(ctx.frame.node, "body", [])
    after = [s for s in body if s.lineno > node.lineno]  # type: ignore[attr-defined]
    for stmt in after:
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(t := stmt.targets[0], ast.Attribute)
            and isinstance(t.value, ast.Name)
            and t.value.id == "self"
            and t.attr == attr
        ):
            return isinstance(stmt.value, ast.Call) and ctx.qualname(stmt.value.func) in _PARAMETER
    return False


# factories whose result is a float32 CPU tensor unless told otherwise
_DEFAULT_FLOAT = frozenset(
    {"randn", "rand", "zeros", "ones", "empty", "Tensor", "FloatTensor", "normal", "eye", "full"}
)
# `torch.FloatTensor` / `torch.float32` / "cpu": what a fresh float32 CPU tensor already is
_FLOAT32 = frozenset({"torch.FloatTensor", "torch.float32", "torch.float", "torch.cpu", "cpu"})


def _converted_parameter(ctx: Context, value: ast.AST) -> tuple[ast.Call, list[ast.Call]] | None:
    """`nn.Parameter(t).type(torch.FloatTensor)`: the `nn.Parameter(...)` call and the method
    calls chained on it (outermost last)."""
    chain: list[ast.Call] = []
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
        if ctx.qualname(value.func) in _PARAMETER:
            return (value, chain[::-1]) if chain else None
        chain.append(value)
        value = value.func.value
    if isinstance(value, ast.Call) and chain and ctx.qualname(value.func) in _PARAMETER:
        return value, chain[::-1]  # `from torch.nn import Parameter`
    return None


_PARAMETER = ("torch.nn.Parameter", "torch.nn.parameter.Parameter")


def _default_float(ctx: Context, tensor: ast.AST | None) -> bool:
    """A float32 CPU tensor for certain: `torch.randn(3, 4)`, `torch.Tensor(3).uniform_(-1, 1)`,
    `0.1 * torch.ones(n)`."""
    if isinstance(tensor, ast.BinOp) and isinstance(tensor.op, (ast.Mult, ast.Add, ast.Sub, ast.Div)):
        sides = (tensor.left, tensor.right)
        scalar = [x for x in sides if isinstance(x, ast.Constant) and isinstance(x.value, (int, float))]
        if len(scalar) == 1:
            return _default_float(ctx, next(x for x in sides if x is not scalar[0]))
        return False
    while isinstance(tensor, ast.Call) and isinstance(tensor.func, ast.Attribute):
        if not (tensor.func.attr.endswith("_") or tensor.func.attr == "float"):
            break
        tensor = tensor.func.value  # in-place initialisers keep dtype and device
    if not isinstance(tensor, ast.Call) or keyword(tensor, "dtype") or keyword(tensor, "device"):
        return False
    q = ctx.qualname(tensor.func) or ""
    if not q.startswith("torch.") or q.split(".", 1)[1] not in _DEFAULT_FLOAT or has_kwargs_splat(tensor):
        return False
    # a changed default dtype makes factories return something else
    return not any("set_default_dtype" in ln or "set_default_tensor_type" in ln for ln in ctx.lines)


def _keeps_parameter(ctx: Context, call: ast.Call) -> bool:
    """The method returns the Parameter itself when called on a float32 CPU tensor: `.float()`,
    `.cpu()`, `.type(torch.FloatTensor)`, `.to(torch.float32)`, in-place initialisers."""
    method = call.func.attr  # type: ignore[attr-defined]
    if method.endswith("_") and not method.endswith("__"):
        return True  # in-place: returns self
    if method in ("float", "cpu", "contiguous") and not call.args and not call.keywords:
        return True
    if method in ("type", "to") and (call.args or call.keywords):
        args = [*call.args, *(k.value for k in call.keywords if k.arg in ("dtype", "device"))]
        if len(args) != len(call.args) + len(call.keywords):
            return False  # copy=True, non_blocking=... : leave it to the reader
        args = [
            (ctx.origin(a) or a) if isinstance(a, ast.Name) else a for a in args
        ]  # `dtype = torch.FloatTensor`
        return all(
            (isinstance(a, ast.Constant) and a.value in _FLOAT32) or ctx.qualname(a) in _FLOAT32 for a in args
        )
    return False


_DEVICE_MOVES = frozenset({"cuda", "cpu", "to", "mps", "xpu"})


def _flag_converted_parameter(
    ctx: Context, node: ast.AST, attr: str, param: ast.Call, chain: list[ast.Call]
) -> None:
    """`self.w = nn.Parameter(t).double()`: a conversion that has work to do returns a new,
    plain tensor (with a grad_fn back to the Parameter), so `self.w` is not registered and no
    optimizer over `model.parameters()` trains it; one with nothing to do returns the
    Parameter itself (`nn.Parameter(torch.randn(3)).float()`), which is fine."""
    inner = param.args[0] if param.args else keyword(param, "data")
    if _default_float(ctx, inner) and all(_keeps_parameter(ctx, c) for c in chain):
        return  # nothing to convert: the attribute is the registered Parameter
    converting = next((c for c in chain if not _keeps_parameter(ctx, c)), chain[0])
    method = converting.func.attr  # type: ignore[attr-defined]
    inner_text = unparse(inner, 30) if inner is not None else "tensor"
    moves = method in _DEVICE_MOVES or any(
        "cuda" in ast.unparse(a) for a in (*converting.args, *(k.value for k in converting.keywords))
    )
    if moves:
        hint = (
            f"Wrap the tensor itself, `self.{attr} = nn.Parameter({inner_text})`, and let the caller's"
            " `model.to(device)` move it with the other parameters."
        )
    else:
        hint = f"Convert before wrapping: `self.{attr} = nn.Parameter({inner_text}.{method}{_call_args(converting)})`."
    ctx.flag(
        node,
        f"`self.{attr} = nn.Parameter(...).{method}({'...' if converting.args or converting.keywords else ''})`"
        " holds the converted copy, a plain tensor whenever"
        " the conversion has work to do: it is not a registered parameter, so the optimizer never"
        " updates it and `state_dict()` misses it.",
        hint,
    )


def _call_args(call: ast.Call) -> str:
    text = ", ".join(
        [*(unparse(a, 30) for a in call.args), *(f"{k.arg}={unparse(k.value, 30)}" for k in call.keywords)]
    )
    return f"({text})"


# what read through `.data` is metadata or a factory, not a value that feeds the graph
_DATA_META = TENSOR_METADATA | {"new", "new_zeros", "new_ones", "new_empty", "new_full", "new_tensor"}
# words of an explicit switch that freezes part of the model (`if config.fix_emb:`)
_FREEZE_WORDS = (
    "fix",
    "freez",
    "frozen",
    "train_",
    "trainable",
    "finetun",
    "fine_tun",
    "detach",
    "stop_grad",
    "requires_grad",
    "tune_",
    "update_",
)


def _not_a_stop_gradient(ctx: Context, node: ast.Attribute) -> bool:
    """`x.data.new(...)`, `x.data.size()`, `isinstance(x.data, torch.cuda.FloatTensor)`,
    `type(x.data)`, `x.data.type()`: the tensor's metadata or a factory, no value flows on."""
    parent = ctx.parent
    if isinstance(parent, ast.Attribute) and parent.value is node:
        if parent.attr in _DATA_META:
            return True
        if parent.attr == "type":
            call = ctx.stack[-2] if len(ctx.stack) >= 2 else None
            return isinstance(call, ast.Call) and call.func is parent and not call.args and not call.keywords
    if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name):
        return parent.func.id in ("isinstance", "type") and bool(parent.args) and parent.args[0] is node
    return False


def _under_freeze_switch(ctx: Context) -> bool:
    """Inside `if config.fix_emb:` / `if self.freeze:` / `if not self.train_emb:` (or the
    matching conditional expression): the stop-gradient is a documented option."""
    for anc in ctx.stack:
        if isinstance(anc, (ast.If, ast.IfExp)):
            for sub in ast.walk(anc.test):
                low = word_of(sub).lower()
                if low and low != "training" and any(w in low for w in _FREEZE_WORDS):
                    return True
            if isinstance(anc, ast.If) and _configuration_test(ctx, anc.test):
                return True
    for _, block, index in enclosing_blocks(ctx.stack):
        for stmt in block[:index]:
            if (
                isinstance(stmt, ast.If)
                and len(stmt.body) == 1
                and isinstance(stmt.body[0], (ast.Continue, ast.Break, ast.Return))
                and not stmt.orelse
                and _configuration_test(ctx, stmt.test)
            ):
                return True  # `if not should_detach: continue` before it
    return False


def _in_a_loss_class(ctx: Context) -> bool:
    """A class named as a loss or criterion (`CRDLoss`, `VATLoss`)."""
    name = ctx.cls.node.name if ctx.cls is not None else ""
    return name.endswith(("Loss", "Criterion"))


def _another_input_learns(ctx: Context, expr: ast.AST) -> bool:
    """Another parameter of the function (not the ground truth, not what is detached) is used
    with its gradient (`student_logits`, or `model` called on the inputs): the loss still trains
    that side, and detaching a target, a teacher's output or a memory bank is how it says which
    side learns. A loss that detaches its only prediction (`output.data`) cuts everything."""
    fn = ctx.frame.node
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    root = chain_root(expr)
    detached = root.id if isinstance(root, ast.Name) else None
    inputs = {p for p in parameters(fn) if p not in ("self", detached) and not _GROUND_TRUTH.fullmatch(p)}
    parents = parents_of(fn)
    for n in ast.walk(fn):
        if not (isinstance(n, ast.Name) and n.id in inputs and isinstance(n.ctx, ast.Load)):
            continue
        up = parents.get(id(n))
        if isinstance(up, ast.Attribute) and up.attr in (
            "data",
            "detach",
            "shape",
            "size",
            "device",
            "dtype",
        ):
            continue
        return True
    return False


def _configuration_test(ctx: Context, test: ast.AST) -> bool:
    """`if self.learning_mode == "learn_only_prototypes":`, `if not create_graph:`, `if
    self.straight_through and self.reinmax:`: options of the code (flags, modes compared with a
    string), not values computed from tensors; a stop-gradient under one is the option's doing.
    Not `self.training`, which every module has."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _configuration_test(ctx, test.operand)
    if isinstance(test, ast.BoolOp):
        return all(_configuration_test(ctx, v) for v in test.values)
    if isinstance(test, ast.Compare):
        return (
            len(test.ops) == 1
            and isinstance(test.ops[0], (ast.Eq, ast.NotEq, ast.In, ast.NotIn))
            and _configuration_test(ctx, test.left)
            and all(isinstance(c, (ast.Constant, ast.Tuple, ast.List, ast.Set)) for c in test.comparators)
            and any(
                isinstance(n, ast.Constant) and isinstance(n.value, str)
                for c in test.comparators
                for n in ast.walk(c)
            )
        )
    if isinstance(test, (ast.Name, ast.Attribute)):
        name = test.id if isinstance(test, ast.Name) else test.attr
        return name != "training" and ctx.kind(test) not in TENSOR_KINDS and ctx.kind(test) != MODULE
    return False


_NORMS = frozenset({"batch_norm", "instance_norm"})


def _running_statistics(ctx: Context, node: ast.AST) -> bool:
    """`var, mean = var.detach(), mean.detach()` then `F.batch_norm(x, mean, var)` (or the
    detach inside the call): values handed only as `running_mean`/`running_var`, which
    `batch_norm` updates in place and cannot differentiate; with a graph it raises."""

    def as_statistic(n: ast.AST, up: ast.AST | None) -> bool:
        return (
            isinstance(up, ast.Call)
            and terminal_name(up.func) in _NORMS
            and (
                any(a is n for a in up.args[1:3])
                or any(k.value is n and k.arg in ("running_mean", "running_var") for k in up.keywords)
            )
        )

    fn = ctx.frame.node
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    parents = parents_of(fn)
    up = parents.get(id(node))
    if as_statistic(node, up):
        return True
    # bound to a name (`mean = mean.detach()`, also one element of a tuple assignment)
    if isinstance(up, ast.Tuple):
        holder = parents.get(id(up))
        if not (
            isinstance(holder, ast.Assign)
            and len(holder.targets) == 1
            and isinstance(holder.targets[0], ast.Tuple)
        ):
            return False
        k = next(i for i, e in enumerate(up.elts) if e is node)
        target = holder.targets[0].elts[k] if k < len(holder.targets[0].elts) else None
    elif isinstance(up, ast.Assign) and len(up.targets) == 1:
        holder, target = up, up.targets[0]
    else:
        return False
    if not isinstance(target, ast.Name):
        return False
    uses = [
        n
        for n in ast.walk(fn)
        if isinstance(n, ast.Name)
        and n.id == target.id
        and isinstance(n.ctx, ast.Load)
        and n.lineno > holder.lineno
    ]
    return bool(uses) and all(as_statistic(n, parents.get(id(n))) for n in uses)


def _grad_scope(ctx: Context) -> ast.AST | None:
    """The function being checked, or the script or notebook when the check is at its top level."""
    scope = scope_node(ctx)
    return scope if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)) else None


def _a_draw(ctx: Context, expr: ast.AST) -> bool:
    """`density.sample()`, or a name of this function bound to one: a draw from a
    distribution, which torch.distributions makes without a graph."""
    if isinstance(expr, ast.Name):
        origin = ctx.origin(expr)
        expr = origin if origin is not None else expr
    return (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr in ("sample", "sample_n")
    )


def built_without_grad(ctx: Context, expr: ast.AST) -> bool:
    """`out = self.latent(batch)` inside `with torch.no_grad():`, then `img = out["recon"]` and
    `img.detach()`: a value computed with gradients off has no graph, so the detach cuts
    nothing (followed through item and attribute reads, and names, of this function, or of
    the script or notebook at its top level)."""
    fn = _grad_scope(ctx)
    if fn is None:
        return False
    parents = parents_of(fn)
    for _ in range(4):
        if not isinstance(expr, ast.Name):
            return False
        bound = [n for n in assignments_by_name(fn).get(expr.id, ()) if n.lineno < expr.lineno]
        if not bound:
            return False
        last = max(bound, key=lambda n: n.lineno)
        if any(_turns_grad_off(ctx, up) for up in ancestors(parents, last)):
            return True
        if joined_without_grad(ctx, last.value):
            return True
        value: ast.AST = last.value
        while isinstance(value, (ast.Subscript, ast.Attribute)):
            value = value.value
        expr = value
    return False


_JOINS = frozenset({"cat", "concat", "concatenate", "stack", "vstack", "hstack"})


def joined_without_grad(ctx: Context, value: ast.AST) -> bool:
    """`torch.vstack(preds)` where every `preds.append(...)` of the function runs with gradients
    off (`with torch.no_grad(): ... preds.append(out)`): the joined tensor has no graph either."""
    fn = _grad_scope(ctx)
    if fn is None:
        return False
    if not (
        isinstance(value, ast.Call)
        and terminal_name(value.func) in _JOINS
        and (ctx.qualname(value.func) or "").startswith("torch.")
        and value.args
        and isinstance(value.args[0], ast.Name)
    ):
        return False
    held = value.args[0].id
    adds = [
        n
        for n in ast.walk(fn)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr in ("append", "extend", "insert")
        and is_name(n.func.value, held)
    ]
    parents = parents_of(fn)
    return bool(adds) and all(any(_turns_grad_off(ctx, up) for up in ancestors(parents, n)) for n in adds)


def _submodule_output(ctx: Context, expr: ast.AST) -> str | None:
    """`self.resnet` when `expr` is `self.resnet(x)` or a name bound to it."""
    if isinstance(expr, ast.Name):
        expr = ctx.origin(expr) or expr
    if isinstance(expr, ast.Call):
        f = expr.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self":
            if ctx.cls is not None and ctx.cls.attrs.get(f.attr) == MODULE:
                return f.attr
    return None


def _frozen_submodules(ctx: Context, start: ast.ClassDef | None = None) -> set[str]:
    """Submodules the class freezes: `self.x.requires_grad_(False)`, or a loop setting
    `p.requires_grad = False` over `self.x.parameters()`."""
    out: set[str] = set()
    for cls in ctx.class_chain(start):
        for sub in ast.walk(cls):
            if switches_grad_off(sub):
                root = sub.func.value  # type: ignore[attr-defined]
                if (
                    isinstance(root, ast.Attribute)
                    and isinstance(root.value, ast.Name)
                    and root.value.id == "self"
                ):
                    out.add(root.attr)
            elif isinstance(sub, ast.For) and isinstance(sub.iter, ast.Call):
                it = sub.iter.func
                if (
                    isinstance(it, ast.Attribute)
                    and it.attr in ("parameters", "named_parameters")
                    and isinstance(it.value, ast.Attribute)
                    and isinstance(it.value.value, ast.Name)
                    and it.value.value.id == "self"
                    and any(
                        isinstance(n, ast.Attribute) and n.attr in ("requires_grad", "requires_grad_")
                        for n in ast.walk(sub)
                    )
                ):
                    out.add(it.value.attr)
    return out


# reads of a tensor that carry no gradient onward (`h.shape`, `len(h)`, `print(h)`)
_NO_GRADIENT_READS = _DATA_META | HOST_VALUE_METHODS | {"requires_grad", "is_leaf"}
_NO_GRADIENT_CALLS = frozenset({"len", "isinstance", "type", "print", "id", "repr", "str"})
_Pos = tuple[int, int]


def _pos(node: ast.AST) -> _Pos:
    return (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))


def _stops_gradient(node: ast.AST) -> ast.AST | None:
    """The value `node` stops gradients at: `x` of `x.detach()` or of `x.data`."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "detach":
        return node.func.value
    if isinstance(node, ast.Attribute) and node.attr == "data" and isinstance(node.ctx, ast.Load):
        return node.value
    return None


class _Uses:
    """Where each name of one function is bound (in source order) and read: enough to tell
    whether a value also reaches the function's result through a read that keeps the graph."""

    def __init__(self, fn: ast.AST) -> None:
        self.bindings: dict[str, list[_Pos]] = {}
        # (name, binding) -> the value assigned and, for `a, b = value`, the target's index
        self.values: dict[tuple[str, _Pos], tuple[ast.AST, int | None]] = {}
        self.reads: dict[str, list[ast.Name]] = {}
        self.parents: dict[ast.AST, ast.AST] = {}
        args = getattr(fn, "args", None)
        if isinstance(args, ast.arguments):
            for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
                if a is not None:
                    self.bindings.setdefault(a.arg, []).append((0, 0))
        for parent in ast.walk(fn):
            for child in ast.iter_child_nodes(parent):
                self.parents[child] = parent
        assigned: set[int] = set()
        for sub in ast.walk(fn):
            if isinstance(sub, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                # the name is bound once the value is computed: reads in the value see the old one
                end = (sub.end_lineno or sub.lineno, sub.end_col_offset or 0)
                targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
                for t in targets:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name):
                            self.bindings.setdefault(n.id, []).append(end)
                            assigned.add(id(n))
                    if sub.value is not None and not isinstance(sub, ast.AugAssign):
                        self._keep_value(t, sub.value, end)
        for sub in ast.walk(fn):
            if isinstance(sub, ast.Name):
                if isinstance(sub.ctx, ast.Load):
                    self.reads.setdefault(sub.id, []).append(sub)
                elif id(sub) not in assigned:
                    self.bindings.setdefault(sub.id, []).append(_pos(sub))  # loop and with targets
        for positions in self.bindings.values():
            positions.sort()

    def _keep_value(self, target: ast.AST, value: ast.AST, end: _Pos) -> None:
        if isinstance(target, ast.Name):
            self.values[(target.id, end)] = (value, None)
        elif isinstance(target, (ast.Tuple, ast.List)):
            pairs = isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts)
            for i, elt in enumerate(target.elts):
                if isinstance(elt, ast.Name):
                    self.values[(elt.id, end)] = (value.elts[i], None) if pairs else (value, i)  # type: ignore[attr-defined]

    def binding(self, name: str, at: _Pos) -> _Pos | None:
        before = [b for b in self.bindings.get(name, ()) if b <= at]
        return before[-1] if before else None

    def value(self, name: ast.Name) -> tuple[ast.AST, int | None] | None:
        """What the binding `name` reads was assigned from (and its index in a tuple target)."""
        bound = self.binding(name.id, _pos(name))
        return None if bound is None else self.values.get((name.id, bound))

    def keeps_graph(self, read: ast.Name) -> bool:
        """The read passes the tensor on with its graph: not under a stop-gradient, not a
        metadata read (`h.shape`, `len(h)`), not a `torch.no_grad()` block."""
        node: ast.AST = read
        while node in self.parents:
            parent = self.parents[node]
            if _stops_gradient(parent) is node:
                return False
            if (
                isinstance(parent, ast.Attribute)
                and parent.value is node
                and parent.attr in _NO_GRADIENT_READS
            ):
                return False
            if isinstance(parent, ast.Call) and node in parent.args:
                if isinstance(parent.func, ast.Name) and parent.func.id in _NO_GRADIENT_CALLS:
                    return False
            if isinstance(parent, ast.With) and any(
                "no_grad" in ast.unparse(item.context_expr)
                or "inference_mode" in ast.unparse(item.context_expr)
                for item in parent.items
            ):
                return False
            if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                break
            node = parent
        return True


@per_node
def _function_uses(fn: ast.AST) -> _Uses:
    return _Uses(fn)


def _uses(ctx: Context) -> _Uses | None:
    """The bindings and reads of the function being walked (built once per function)."""
    fn = ctx.frame.node
    return None if fn is None else _function_uses(fn)


def _gradient_goes_around(ctx: Context, node: ast.AST, expr: ast.AST) -> bool:
    """The stop-gradient blocks one path of several, so gradients still reach the layers
    before it: the straight-through estimator (`z + (q - z).detach()`,
    `y_hard - y_soft.detach() + y_soft`: a name under the stop-gradient also appears, kept,
    in the same arithmetic), or a value that is also used with its graph elsewhere in the
    function (VQ-VAE's `mse_loss(q.detach(), z)` beside `mse_loss(q, z.detach())`, a
    stop-gradient target next to the prediction it trains)."""
    inside = {id(n) for n in ast.walk(node)}
    names = {
        n.id for n in ast.walk(expr) if isinstance(n, ast.Name) and n.id != "self" and n.id not in ctx.imports
    }
    top: ast.AST = node
    for anc in reversed(ctx.stack):
        if not isinstance(anc, (ast.BinOp, ast.UnaryOp)):
            break
        top = anc
    if top is not node and any(
        isinstance(n, ast.Name) and n.id in names and id(n) not in inside for n in ast.walk(top)
    ):
        return True
    uses = _uses(ctx)
    if uses is None or not names or any(isinstance(n, ast.Name) and n.id == "self" for n in ast.walk(expr)):
        return False  # a submodule or parameter under the stop-gradient: nothing else shows its path
    at = _pos(node)
    for name in names:
        if name not in uses.bindings:
            continue  # a global or an import: no graph of this function to keep
        bound = uses.binding(name, at)
        if not any(
            id(r) not in inside and uses.binding(name, _pos(r)) == bound and uses.keeps_graph(r)
            for r in uses.reads.get(name, ())
        ):
            return False
    return any(name in uses.bindings for name in names)


# ---- TM107: stop-gradients on values that carry no gradient anyone needs ----------------

# methods and torch functions whose result is an integer or bool tensor
_INTEGER_RESULTS = frozenset(
    {
        "long",
        "int",
        "short",
        "byte",
        "char",
        "bool",
        "argmax",
        "argmin",
        "argsort",
        "nonzero",
        "randint",
        "randint_like",
        "randperm",
        "multinomial",
        "bucketize",
        "searchsorted",
        "eq",
        "ne",
        "gt",
        "ge",
        "lt",
        "le",
        "isnan",
        "isinf",
        "logical_and",
        "logical_or",
        "logical_not",
    }
)
_INTEGER_TYPES = frozenset(
    {"LongTensor", "IntTensor", "ShortTensor", "ByteTensor", "CharTensor", "BoolTensor"}
)
_INTEGER_DTYPES = frozenset({"long", "int", "int64", "int32", "int16", "int8", "uint8", "short", "bool"})
# reductions that return (values, indices); max/min/median only with a dim
_WITH_INDICES = frozenset({"topk", "sort", "kthvalue", "mode", "cummax", "cummin"})
_WITH_INDICES_BY_DIM = frozenset({"max", "min", "median"})
# tensor methods whose result has the dtype of the tensor they are called on
KEEPS_DTYPE = frozenset(
    {
        "data",
        "detach",
        "cuda",
        "cpu",
        "squeeze",
        "unsqueeze",
        "view",
        "view_as",
        "reshape",
        "reshape_as",
        "contiguous",
        "clone",
        "t",
        "transpose",
        "permute",
        "flatten",
        "expand",
        "expand_as",
        "repeat",
        "flip",
        "narrow",
    }
)
# `x.gather(dim, index)`, `x.index_select(dim, index)`: the argument that must be integer
_INDEX_ARG = frozenset(
    {
        "gather",
        "scatter",
        "scatter_",
        "scatter_add",
        "scatter_add_",
        "index_select",
        "index_add",
        "index_add_",
        "index_fill",
        "index_fill_",
        "index_copy",
        "index_copy_",
        "take_along_dim",
    }
)
_MAX_DEPTH = 8


def _call_name(ctx: Context, call: ast.Call) -> str:
    q = ctx.qualname(call.func)
    if q:
        return q.rsplit(".", 1)[-1]
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _is_torch_function(ctx: Context, call: ast.Call) -> bool:
    """`torch.max(x, 1)` rather than `x.max(1)`: the tensor is the first argument."""
    return (ctx.qualname(call.func) or "").startswith("torch.") and isinstance(call.func, ast.Attribute)


def _integer_dtype(ctx: Context, arg: ast.AST) -> bool | None:
    """True for `torch.long`/`torch.LongTensor`/"torch.LongTensor", False for another dtype,
    None when `arg` is not a dtype (a device)."""
    text = arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else ctx.qualname(arg)
    if not text or not text.startswith("torch."):
        return None
    last = text.rsplit(".", 1)[-1]
    if last in _INTEGER_TYPES or last in _INTEGER_DTYPES:
        return True
    if last.endswith("Tensor") or last.startswith(("float", "double", "half", "bfloat", "complex")):
        return False
    return None


def indices_of(ctx: Context, call: ast.AST) -> ast.AST | None:
    """For a call that returns (values, indices) (`x.max(1)`, `torch.topk(x, k)`, `t.sort()`):
    the tensor it reduces; None for any other call."""
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute):
        return None
    name = _call_name(ctx, call)
    function = _is_torch_function(ctx, call)
    args = call.args[1:] if function else call.args
    source = (call.args[0] if call.args else None) if function else call.func.value
    if name in _WITH_INDICES:
        return source
    if name in _WITH_INDICES_BY_DIM and (keyword(call, "dim") is not None or _is_dim(args[:1])):
        return source
    return None


def _is_dim(args: list[ast.expr]) -> bool:
    """`1`, `-1`: a dimension (a tensor there would make `max` elementwise)."""
    if not args:
        return False
    a = args[0]
    if isinstance(a, ast.UnaryOp) and isinstance(a.op, ast.USub):
        a = a.operand
    return isinstance(a, ast.Constant) and type(a.value) is int


def _integer_value(ctx: Context, uses: _Uses, expr: ast.AST, depth: int = 0) -> bool:
    """The code shows `expr` to be an integer or bool tensor: a conversion (`.long()`,
    `.to(torch.long)`, `torch.LongTensor(...)`, `dtype=torch.long`), an op that returns
    indices or a mask (`argmax`, `x.max(1)[1]`, `topk(...)[1]`, `x > 0`), or a name bound to
    one, through reads that keep the dtype (`.data`, `.cuda()`, `[t]`, `.squeeze()`)."""
    if depth > _MAX_DEPTH:
        return False
    again = depth + 1
    if isinstance(expr, ast.Compare):
        return True
    if isinstance(expr, ast.IfExp):
        return _integer_value(ctx, uses, expr.body, again) and _integer_value(ctx, uses, expr.orelse, again)
    if isinstance(expr, ast.Subscript):
        if indices_of(ctx, expr.value) is not None:
            return isinstance(expr.slice, ast.Constant) and expr.slice.value == 1
        return _integer_value(ctx, uses, expr.value, again)
    if isinstance(expr, ast.Attribute):
        if expr.attr == "indices":
            return indices_of(ctx, expr.value) is not None
        if is_name(expr.value, "self"):
            return _integer_attribute(ctx, expr.attr, again)
        return expr.attr == "data" and _integer_value(ctx, uses, expr.value, again)
    if isinstance(expr, ast.Name):
        bound = uses.value(expr)
        if bound is None:
            return False
        value, index = bound
        if index is None:
            return _integer_value(ctx, uses, value, again)
        return index == 1 and indices_of(ctx, value) is not None
    if not isinstance(expr, ast.Call):
        return False
    return _integer_call(ctx, uses, expr, again)


def _integer_call(ctx: Context, uses: _Uses, call: ast.Call, depth: int) -> bool:
    name = _call_name(ctx, call)
    dtype = keyword(call, "dtype")
    if dtype is not None:
        return bool(_integer_dtype(ctx, dtype))
    if name in _INTEGER_TYPES or name in _INTEGER_RESULTS:
        return name not in ("int", "bool") or isinstance(call.func, ast.Attribute)  # not the builtins
    f = call.func
    if name in ("Variable", "Parameter") and call.args:
        return _integer_value(ctx, uses, call.args[0], depth)
    if name == "where" and len(call.args) == 3:
        return all(_integer_value(ctx, uses, a, depth) for a in call.args[1:])
    if not isinstance(f, ast.Attribute):
        return False
    if f.attr in ("to", "type"):
        given = [_integer_dtype(ctx, a) for a in call.args]
        if any(g is not None for g in given):
            return any(g is True for g in given)
        return f.attr == "to" and _integer_value(ctx, uses, f.value, depth)
    return f.attr in KEEPS_DTYPE and _integer_value(ctx, uses, f.value, depth)


def _integer_attribute(ctx: Context, attr: str, depth: int) -> bool:
    """`self.<attr>` is set only in `__init__`, each time to an integer or bool tensor
    (`nn.Parameter(torch.IntTensor(ids), requires_grad=False)`, a `torch.long` buffer)."""
    if ctx.cls is None:
        return False
    values = []
    for cls in ctx.class_chain():
        for fn in cls.body:
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for sub in ast.walk(fn):
                if isinstance(sub, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                    targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
                    if any(
                        isinstance(t, ast.Attribute) and t.attr == attr and is_name(t.value, "self")
                        for t in targets
                    ):
                        if fn.name != "__init__" or not isinstance(sub, ast.Assign):
                            return False
                        values.append((fn, sub.value))
    return bool(values) and all(_integer_value(ctx, _function_uses(fn), v, depth) for fn, v in values)


def _embedding_attrs(ctx: Context) -> set[str]:
    """`self.<attr>` built as `nn.Embedding(...)` in the class or its bases: its input is token
    ids. Worked out once per class."""
    if ctx.cls is None:
        return set()
    return remember(ctx.cls.node, "tm107.embedding_attrs", lambda: _find_embedding_attrs(ctx))


def _find_embedding_attrs(ctx: Context) -> set[str]:
    out: set[str] = set()
    for cls in ctx.class_chain():
        for sub in ast.walk(cls):
            if (
                isinstance(sub, ast.Assign)
                and isinstance(sub.value, ast.Call)
                and (ctx.qualname(sub.value.func) or "").endswith("nn.Embedding")
            ):
                out.update(
                    t.attr for t in sub.targets if isinstance(t, ast.Attribute) and _is_self_attr(t, t.attr)
                )
    return out


def _dtype_kept_by(
    ctx: Context, node: ast.AST, parent: ast.AST, parents: dict[ast.AST, ast.AST]
) -> ast.AST | None:
    """The expression around `node` that has its dtype (`node.data`, `node[t]`,
    `node.cuda()`, `Variable(node)`), or None."""
    if isinstance(parent, ast.Subscript) and parent.value is node:
        return parent
    if isinstance(parent, ast.Attribute) and parent.value is node and parent.attr in KEEPS_DTYPE:
        call = parents.get(parent)
        if isinstance(call, ast.Call) and call.func is parent:
            return call
        return parent if parent.attr == "data" else None
    if isinstance(parent, ast.Call) and parent.args[:1] == [node] and _call_name(ctx, parent) == "Variable":
        return parent
    return None


def _used_as_integer(ctx: Context, uses: _Uses, read: ast.Name, depth: int = 0) -> bool:
    """The read (or a dtype-keeping view of it) is used where only an integer or bool tensor
    works: as an index (`x[idx]`), as the input of an `nn.Embedding` of the class or of
    `F.embedding`/`F.one_hot`, as the index of `gather`/`scatter_`/`index_select`, as one
    arm of a conditional whose other arm is an integer tensor (`trg[t] if teach else top1`),
    or assigned to a name that is (`rows = picks.data` then `h[rows]`)."""
    node: ast.AST = read
    parents = uses.parents
    for _ in range(_MAX_DEPTH):
        parent = parents.get(node)
        if parent is None:
            return False
        kept = _dtype_kept_by(ctx, node, parent, parents)
        if kept is None:
            break
        node = kept
    else:
        return False
    if isinstance(parent, ast.Tuple) and isinstance(parents.get(parent), ast.Subscript):
        node, parent = parent, parents[parent]
    if isinstance(parent, ast.Subscript) and parent.slice is node:
        return True
    if isinstance(parent, ast.IfExp) and node is not parent.test:
        other = parent.orelse if node is parent.body else parent.body
        return _integer_value(ctx, uses, other)
    if (
        isinstance(parent, ast.Assign)
        and parent.value is node
        and len(parent.targets) == 1
        and isinstance(parent.targets[0], ast.Name)
    ):
        target = parent.targets[0]
        end = (parent.end_lineno or parent.lineno, parent.end_col_offset or 0)
        return depth < 2 and _binding_used_as_integer(ctx, uses, target.id, end, depth + 1)
    if not isinstance(parent, ast.Call):
        return False
    name = _call_name(ctx, parent)
    f = parent.func
    if parent.args[:1] == [node]:
        if name in ("embedding", "one_hot") and (ctx.qualname(f) or "").startswith("torch.nn.functional"):
            return True
        if isinstance(f, ast.Attribute) and _is_self_attr(f, f.attr) and f.attr in _embedding_attrs(ctx):
            return True
    if name in _INDEX_ARG:
        at = 2 if _is_torch_function(ctx, parent) else 1
        return (len(parent.args) > at and parent.args[at] is node) or keyword(parent, "index") is node
    return False


INTEGER_NAME = re.compile(r"(^|_)(lengths?|lens|ids|idx|indices)$", re.IGNORECASE)


def integer_tensor(ctx: Context, expr: ast.AST) -> bool:
    """`expr` is an integer or bool tensor (token ids, lengths, indices, masks): it has no
    gradient, so a stop-gradient on it cuts nothing. Either its value shows it, or (for a
    name) another read of the same binding is used where only an integer tensor works."""
    if INTEGER_NAME.search(terminal_name(expr) or ""):
        return True  # `text_lengths`, `token_ids`, `keep_idx`: counts and indices
    uses = _uses(ctx)
    if uses is None:
        return False
    if _integer_value(ctx, uses, expr):
        return True
    if not isinstance(expr, ast.Name) or expr.id not in uses.bindings:
        return False
    bound = uses.binding(expr.id, _pos(expr))
    return bound is not None and _binding_used_as_integer(ctx, uses, expr.id, bound, 0)


def _binding_used_as_integer(ctx: Context, uses: _Uses, name: str, bound: _Pos, depth: int) -> bool:
    """Some read of this binding of `name` is used where only an integer tensor works."""
    return any(
        uses.binding(name, _pos(r)) == bound and _used_as_integer(ctx, uses, r, depth)
        for r in uses.reads.get(name, ())
    )


# Python conversions of a tensor: what they return has no graph, stop-gradient or not


def _leaves_for_python(ctx: Context, node: ast.AST) -> bool:
    """`lengths.data.tolist()`, `x.detach().cpu().numpy()`, `int(n.data)`, or the `lengths`
    of `pack_padded_sequence`: the value leaves for Python (or for a CPU lengths list), where
    no gradient goes anyway, so the stop-gradient cuts nothing."""
    stack = ctx.stack
    i = len(stack) - 1
    while i >= 0:
        parent = stack[i]
        if isinstance(parent, ast.Attribute) and parent.value is node:
            if parent.attr in HOST_VALUE_METHODS:
                return True
            if i >= 1 and isinstance(stack[i - 1], ast.Call) and stack[i - 1].func is parent:  # type: ignore[attr-defined]
                node, i = stack[i - 1], i - 2
                continue
            return False
        if isinstance(parent, ast.Subscript) and parent.value is node:
            node, i = parent, i - 1
            continue
        if isinstance(parent, ast.Call) and node in parent.args:
            if isinstance(parent.func, ast.Name) and parent.func.id in HOST_VALUE_CALLS:
                return len(parent.args) == 1
            if _call_name(ctx, parent) == "pack_padded_sequence":
                return parent.args[1:2] == [node]
        if isinstance(parent, ast.keyword) and parent.arg == "lengths" and i >= 1:
            return _call_name(ctx, stack[i - 1]) == "pack_padded_sequence"  # type: ignore[arg-type]
        return False
    return False


# reductions subtracted for numerical stability (`x - x.max(1, keepdim=True)[0].detach()`)
_SHIFTS = frozenset({"max", "amax", "logsumexp"})


def _max_of(ctx: Context, uses: _Uses, node: ast.AST) -> ast.AST | None:
    """`x` for the pair `torch.max(x, 1)` / `x.max(1)` (values, indices), written there or
    bound to a name (`top = torch.max(x, 1)`); None for anything else, such as a pair this
    source does not show being built."""
    if isinstance(node, ast.Name):
        bound = uses.value(node)
        node = bound[0] if bound is not None and bound[1] is None else node
    if isinstance(node, ast.Call) and _call_name(ctx, node) == "max":
        return indices_of(ctx, node)
    return None


def _reduced(ctx: Context, uses: _Uses, expr: ast.AST, depth: int = 0) -> ast.AST | None:
    """The tensor `expr` is a max or logsumexp of: `x` for `x.max(1, keepdim=True)[0]`,
    `torch.logsumexp(x, 1)`, `x.amax(1)`, or a name bound to one (`m, _ = torch.max(x, 1)`)."""
    if depth > _MAX_DEPTH:
        return None
    if isinstance(expr, ast.Name):
        bound = uses.value(expr)
        if bound is None:
            return None
        value, index = bound
        if index is None:
            return _reduced(ctx, uses, value, depth + 1)
        return _max_of(ctx, uses, value) if index == 0 else None
    if isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Constant) and expr.slice.value == 0:
        return _max_of(ctx, uses, expr.value)
    if isinstance(expr, ast.Attribute) and expr.attr == "values":
        return _max_of(ctx, uses, expr.value)
    if (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and _call_name(ctx, expr) in _SHIFTS
    ):
        if _is_torch_function(ctx, expr):
            return expr.args[0] if expr.args else None
        return expr.func.value
    return None


def _stability_shift(ctx: Context, node: ast.AST, expr: ast.AST) -> bool:
    """`logits - logits_max.detach()` with `logits_max, _ = torch.max(logits, dim=1,
    keepdim=True)`: a max (or logsumexp) of the other operand, subtracted to keep `exp`
    finite. Gradients reach the layers through `logits` itself; only the shift is held."""
    parent = ctx.parent
    uses = _uses(ctx)
    if uses is None or not (
        isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Sub) and parent.right is node
    ):
        return False
    source = _reduced(ctx, uses, expr)
    if source is None:
        return False
    if isinstance(source, ast.Name):
        return any(
            isinstance(n, ast.Name)
            and n.id == source.id
            and uses.binding(n.id, _pos(n)) == uses.binding(source.id, _pos(source))
            for n in ast.walk(parent.left)
        )
    return ast.dump(source) == ast.dump(parent.left)


def _optional_argument(ctx: Context, test: ast.AST) -> tuple[str, bool] | None:
    """`targets is None` -> ("targets", True), `targets is not None` -> ("targets", False),
    for a parameter of the method that defaults to None."""
    if not (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], (ast.Is, ast.IsNot))
        and isinstance(test.left, ast.Name)
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
    ):
        return None
    fn = ctx.frame.node
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    name = test.left.id
    default = parameter_default(fn, name)
    if not (isinstance(default, ast.Constant) and default.value is None):
        return None
    return name, isinstance(test.ops[0], ast.Is)


def _inference_return(ctx: Context, node: ast.AST) -> bool:
    """`return output.data` in the branch taken when the optional targets are not given,
    while the other branch takes them and returns (a loss): a forward that trains itself
    with targets and hands back detached predictions without them, the inference path."""
    stack = ctx.stack
    if not (stack and isinstance(stack[-1], ast.Return) and stack[-1].value is node):
        return False
    ret = stack[-1]
    for anc in reversed(stack[:-1]):
        if not isinstance(anc, ast.If):
            continue
        found = _optional_argument(ctx, anc.test)
        if found is None:
            continue
        name, when_none = found
        inside = anc.body if any(ret in ast.walk(s) for s in anc.body) else anc.orelse
        other = anc.orelse if inside is anc.body else anc.body
        if (inside is anc.body) != when_none:
            return False  # the stop-gradient is where the targets are given
        given = [n for s in other for n in ast.walk(s)]
        return any(isinstance(n, ast.Return) for n in given) and any(
            isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) for n in given
        )
    return False


_GROUND_TRUTH = re.compile(r"(targets?|labels?|gts?|gt_\w+|y_true|ground_truth\w*)")


def _ground_truth(ctx: Context, expr: ast.AST) -> bool:
    """`target.data` in `forward(self, output, target)`: the ground truth a loss is handed never
    requires a gradient, so no stop-gradient there cuts anything."""
    fn = ctx.frame.node
    if not isinstance(expr, ast.Name) or not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    return (
        expr.id in parameters(fn)
        and _GROUND_TRUTH.fullmatch(expr.id) is not None
        and ctx.origin(expr) is None
    )


def _write_through(ctx: Context, node: ast.AST) -> bool:
    parent = ctx.parent
    if isinstance(parent, ast.Subscript) and parent.value is node and isinstance(parent.ctx, ast.Store):
        return True
    if isinstance(parent, ast.Attribute) and parent.value is node and parent.attr.endswith("_"):
        grand = ctx.stack[-2] if len(ctx.stack) > 1 else None
        return isinstance(grand, ast.Call) and grand.func is parent
    return False


def _owners_call_it_without_grad(ctx: Context) -> bool:
    """`self.latent = LatentModel()` in another class of the source, which calls `self.latent(x)`
    only inside `with torch.no_grad():` blocks (a frozen stage of a multi-phase model): this
    module's forward never records a graph, so a `.detach()` in it cuts nothing. Needs at least
    one such part and one call, and every call of every such part under `no_grad`."""
    if ctx.cls is None:
        return False
    name = ctx.cls.name
    cache = _state.setdefault(ctx, {}).setdefault("no_grad_only", {})
    if name in cache:
        return cache[name]
    calls = 0
    verdict = True
    for info in ctx.classes.values():
        cls = info.node
        parts = {
            attr
            for a in ast.walk(cls)
            if isinstance(a, ast.Assign) and isinstance(a.value, ast.Call) and is_name(a.value.func, name)
            for t in a.targets
            if (attr := self_attr_name(t)) is not None
        }
        if not parts:
            continue
        covered = {
            id(n)
            for w in ast.walk(cls)
            if _turns_grad_off(ctx, w)
            for stmt in w.body  # type: ignore[attr-defined]
            for n in ast.walk(stmt)
        }
        for n in ast.walk(cls):
            if isinstance(n, ast.Call) and self_attr_name(n.func) in parts:
                calls += 1
                verdict = verdict and id(n) in covered
    cache[name] = verdict and calls > 0
    return cache[name]


@check("TM107", calls={"detach"}, attrs={"data"})
def detach_in_forward(node: ast.AST, ctx: Context) -> None:
    if not ctx.in_forward or ctx.grad_mode is not None:
        return
    if isinstance(node, ast.Call):
        expr, what = node.func.value, ".detach()"  # type: ignore[attr-defined]
    else:
        if isinstance(ctx.parent, ast.Call) and ctx.parent.func is node:
            return  # `x.data(...)` is a method, not the tensor attribute
        if isinstance(getattr(node, "ctx", None), ast.Store):
            return
        if _write_through(ctx, node):
            return  # `x.data[i] = v`, `x.data.fill_(v)`: a write (TM403's), no read is detached
        expr, what = node.value, ".data"  # type: ignore[attr-defined]
        if ctx.kind(expr) not in TENSOR_KINDS or packed_sequence(ctx, expr):
            return
        if _not_a_stop_gradient(ctx, node):  # type: ignore[arg-type]
            return
    if _under_freeze_switch(ctx) or _gradient_goes_around(ctx, node, expr):
        return
    if _in_a_loss_class(ctx) and _another_input_learns(ctx, expr):
        return  # a loss's stop-gradient picks which side learns (targets, teachers, memory banks)
    if _leaves_for_python(ctx, node) or integer_tensor(ctx, expr) or _stability_shift(ctx, node, expr):
        return  # nothing that carries a gradient is cut
    if _a_draw(ctx, expr):
        return  # `dist.sample().detach()`: `sample()` draws without a graph (`rsample()` keeps one)
    if _inference_return(ctx, node) or _ground_truth(ctx, expr) or built_without_grad(ctx, expr):
        return
    if _running_statistics(ctx, node):
        return  # `F.batch_norm(x, mean.detach(), var.detach())`: running statistics must not require grad
    if _owners_call_it_without_grad(ctx):
        return  # every model that holds this module calls it inside `no_grad`: no graph to cut
    sub = _submodule_output(ctx, expr)
    if sub is not None:
        if sub in _frozen_submodules(ctx):
            return  # frozen where it is built: the stop-gradient only says so again
        ctx.flag(
            node,
            f"`{unparse_operand(expr, 40)}{what}` in `forward` stops gradients from reaching `self.{sub}` and every layer before it.",
            f"If `self.{sub}` is meant to stay frozen, say so where it is built:"
            f" `self.{sub}.requires_grad_(False)` in `__init__` (it then records no activations"
            " for a backward pass that never reaches it); otherwise remove the stop-gradient.",
        )
        return
    ctx.flag(
        node,
        f"`{unparse_operand(expr, 40)}{what}` in `forward` stops gradients from reaching earlier layers.",
        "Remove it unless a stop-gradient is intended (then say so with a comment and"
        " `# torchcheck: ignore[TM107]`).",
    )
