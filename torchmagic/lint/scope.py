"""The shared analysis pass: one walk of a cell's AST that knows what names hold.

Rules never walk the tree themselves. The walker keeps the context a rule needs — which
names hold tensors, modules, optimizers, schedulers or DataLoaders (from assignments,
`import` aliases and, when given, the live namespace), which statements sit inside loops,
`no_grad`/`inference_mode` blocks, and `nn.Module`/`Dataset` classes — and dispatches each
node to the rules that subscribed to it (by callee name, attribute name or node type).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..report import Finding

if TYPE_CHECKING:
    from .registry import Rule

# What a name or expression holds. Plain strings keep rules short: `ctx.kind(x) == TENSOR`.
TENSOR = "tensor"
PARAMETER = "parameter"
MODULE = "module"
OPTIMIZER = "optimizer"
SCHEDULER = "scheduler"
LOADER = "dataloader"
DATASET = "dataset"
DEVICE = "device"
DTYPE = "dtype"
NUMBER = "number"
STRING = "str"
NONE = "none"
SHAPE = "shape"
NDARRAY = "ndarray"
LIST = "list"
DICT = "dict"
STATE_DICT = "state_dict"
BATCH = "batch"

TENSORS = "tensors"  # a tuple/list of tensors: `x.split(2)`, `torch.meshgrid(...)`

TENSOR_KINDS = frozenset({TENSOR, PARAMETER})

# torch functions and tensor methods that return a sequence of tensors, not one tensor.
_TENSOR_SEQUENCE_FUNCS = frozenset(
    {
        "split",
        "chunk",
        "tensor_split",
        "unbind",
        "hsplit",
        "vsplit",
        "dsplit",
        "meshgrid",
        "broadcast_tensors",
        "split_with_sizes",
        "unsafe_chunk",
        "unsafe_split",
    }
)

# Conventional notebook aliases, used when a cell relies on an import made in an earlier cell.
DEFAULT_IMPORTS = {
    "torch": "torch",
    "nn": "torch.nn",
    "F": "torch.nn.functional",
    "optim": "torch.optim",
    "np": "numpy",
    "DataLoader": "torch.utils.data.DataLoader",
    "Dataset": "torch.utils.data.Dataset",
    "IterableDataset": "torch.utils.data.IterableDataset",
    "TensorDataset": "torch.utils.data.TensorDataset",
}

# torch.<fn>(...) results that are not tensors.
_TORCH_NON_TENSOR = frozenset(
    {
        "device",
        "load",
        "save",
        "no_grad",
        "enable_grad",
        "inference_mode",
        "set_grad_enabled",
        "manual_seed",
        "seed",
        "is_tensor",
        "is_floating_point",
        "is_complex",
        "numel",
        "compile",
        "get_default_dtype",
        "set_default_dtype",
        "set_default_device",
        "is_grad_enabled",
        "finfo",
        "iinfo",
        "Size",
        "Generator",
        "dtype",
        "use_deterministic_algorithms",
        "set_num_threads",
        "get_num_threads",
        "set_printoptions",
        "autocast",
        "is_inference_mode_enabled",
        "equal",
        "allclose",
        "is_nonzero",
        "is_same_size",
        "is_storage",
        "is_autocast_enabled",
        "are_deterministic_algorithms_enabled",
    }
)
_NUMBER_FUNCS = frozenset({"len", "int", "float", "round", "abs", "sum", "min", "max", "bool"})
_TENSOR_TO_NUMBER = frozenset(
    {
        "item",
        "dim",
        "ndimension",
        "numel",
        "element_size",
        "nelement",
        "get_device",
        "data_ptr",
        "stride",
        "equal",
        "allclose",
        "is_complex",
        "is_pinned",
        "is_shared",
        "is_set_to",
    }
)
_TENSOR_NON_TENSOR = {
    "tolist": LIST,
    "numpy": NDARRAY,
    "backward": NONE,
    "size": SHAPE,
    "register_hook": None,
    "storage": None,
    "untyped_storage": None,
    "is_contiguous": NUMBER,
    "is_floating_point": NUMBER,
    "requires_grad_": TENSOR,
    "qscheme": None,
    "q_scale": NUMBER,
    "q_zero_point": NUMBER,
    "storage_offset": NUMBER,
}
_MODULE_SELF_METHODS = frozenset(
    {
        "to",
        "cuda",
        "cpu",
        "train",
        "eval",
        "float",
        "double",
        "half",
        "bfloat16",
        "requires_grad_",
        "apply",
        "type",
        "share_memory",
        "to_empty",
    }
)
_MODULE_METHOD_KINDS = {
    "state_dict": STATE_DICT,
    "parameters": None,
    "named_parameters": None,
    "children": None,
    "modules": None,
}


@dataclass
class ClassInfo:
    """A class defined in the source, and what it is to PyTorch."""

    name: str
    kind: str | None  # MODULE, DATASET or None
    node: ast.ClassDef
    attrs: dict[str, str | None] = field(default_factory=dict)
    forward_helpers: frozenset[str] = frozenset()
    flagged: set[str] = field(default_factory=set)  # attributes a rule already reported


@dataclass
class LoopInfo:
    """A loop (or comprehension) and every call made anywhere inside its body."""

    node: ast.AST
    calls: list[ast.Call] = field(default_factory=list)
    # set once a nested `for`/`while` has been walked: code after it runs once per outer
    # iteration (an epoch loop around a batch loop), not in the hot path
    inner_loop_seen: bool = False


@dataclass
class Frame:
    """A function scope (the module level is the outermost frame)."""

    node: ast.AST | None
    names: dict[str, str | None] = field(default_factory=dict)
    values: dict[str, ast.AST] = field(default_factory=dict)  # the expression a name was last bound to
    loops: list[LoopInfo] = field(default_factory=list)
    grad: list[str] = field(default_factory=list)
    cls: ClassInfo | None = None
    method: str | None = None
    in_forward: bool = False


@dataclass
class Carry:
    """What one cell's analysis hands to the next cell of the same notebook: imports, classes,
    what module-level names hold and which call built them. Never AST nodes of the earlier
    cell, so no finding can point at another cell's lines."""

    imports: dict[str, str] = field(default_factory=dict)
    classes: dict[str, ClassInfo] = field(default_factory=dict)
    names: dict[str, str | None] = field(default_factory=dict)
    built: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, ctx: Context) -> Carry:
        built = {}
        for name in ctx.frames[0].names:
            b = ctx.built_by(ast.Name(id=name, ctx=ast.Load()))
            if b is not None:
                built[name] = b
        return cls(dict(ctx.imports), dict(ctx.classes), dict(ctx.frames[0].names), built)

    def into(self, ctx: Context) -> None:
        ctx.imports.update(self.imports)
        ctx.classes.update(self.classes)
        ctx.frames[0].names.update(self.names)
        ctx.carried_built.update(self.built)


class Context:
    """What a rule may ask while the walker stands on a node."""

    def __init__(self, lines: list[str], namespace: dict[str, Any] | None = None) -> None:
        self.lines = lines
        self.namespace = namespace
        self.imports: dict[str, str] = {}
        self.classes: dict[str, ClassInfo] = {}
        self.frames: list[Frame] = [Frame(None)]
        self.stack: list[ast.AST] = []
        self.findings: list[Finding] = []
        self.rule: Rule | None = None
        self.leaving: LoopInfo | None = None
        self._live_kinds: dict[str, str | None] = {}
        self.errors: list[str] = []
        self.carried_built: dict[str, str] = {}  # builders of names bound in earlier cells

    # ---- where we are -------------------------------------------------------------------
    @property
    def frame(self) -> Frame:
        return self.frames[-1]

    @property
    def parent(self) -> ast.AST | None:
        return self.stack[-1] if self.stack else None

    @property
    def loops(self) -> list[LoopInfo]:
        return self.frame.loops

    @property
    def in_loop(self) -> bool:
        return bool(self.frame.loops)

    @property
    def cls(self) -> ClassInfo | None:
        return self.frame.cls

    @property
    def method(self) -> str | None:
        return self.frame.method

    @property
    def in_module_method(self) -> bool:
        c = self.frame.cls
        return c is not None and c.kind == MODULE

    @property
    def in_forward(self) -> bool:
        return self.in_module_method and self.frame.in_forward

    @property
    def in_dataset_method(self) -> bool:
        c = self.frame.cls
        return c is not None and c.kind == DATASET

    @property
    def grad_mode(self) -> str | None:
        """ "no_grad" or "inference_mode" when the current code runs with grad disabled."""
        g = self.frame.grad
        return g[-1] if g and g[-1] != "enable_grad" else None

    def source_line(self, lineno: int) -> str:
        return self.lines[lineno - 1] if 0 < lineno <= len(self.lines) else ""

    # ---- reporting ----------------------------------------------------------------------
    def flag(
        self,
        node: ast.AST,
        message: str,
        hint: str,
        *,
        severity: str | None = None,
        rule: Rule | None = None,
    ) -> None:
        r = rule or self.rule
        assert r is not None
        line, col = getattr(node, "lineno", None), getattr(node, "col_offset", None)
        func = getattr(node, "func", None)
        if type(node) is ast.Call and type(func) is ast.Attribute and func.end_lineno != line:
            # a chained call split over lines: point at the line of `.method(`, not the chain's start
            line, col = func.end_lineno, func.end_col_offset - len(func.attr)  # type: ignore[operator]
        self.findings.append(r.finding(message, hint, line=line, col=col, severity=severity))

    # ---- names --------------------------------------------------------------------------
    def qualname(self, node: ast.AST) -> str | None:
        """Dotted name with import aliases resolved: `F.softmax` -> "torch.nn.functional.softmax"."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        root = self.resolve_import(node.id)
        parts.append(root if root is not None else node.id)
        return ".".join(reversed(parts))

    def resolve_import(self, name: str) -> str | None:
        if name in self.imports:
            return self.imports[name]
        if self._bound(name):
            return None
        live = self._live_module_name(name)
        if live is not None:
            return live
        return DEFAULT_IMPORTS.get(name)

    def _bound(self, name: str) -> bool:
        return any(name in f.names for f in (self.frame, self.frames[0]))

    def _live_module_name(self, name: str) -> str | None:
        ns = self.namespace
        if not ns or name not in ns:
            return None
        obj = ns[name]
        if type(obj).__name__ == "module" and type(obj) is type(sys):
            mod_name = obj.__dict__.get("__name__")
            return mod_name if isinstance(mod_name, str) else None
        return class_path(obj) if is_class(obj) else None

    def bind(self, name: str, kind: str | None, value: ast.AST | None = None) -> None:
        self.frame.names[name] = kind
        if value is not None:
            self.frame.values[name] = value
        else:
            self.frame.values.pop(name, None)

    def lookup(self, name: str) -> str | None:
        for f in (self.frame, self.frames[0]):
            if name in f.names:
                return f.names[name]
        if name in self.imports:
            return None
        return self.live_kind(name)

    def origin(self, node: ast.AST) -> ast.AST | None:
        """The expression a plain name was last assigned from in this cell (None when unknown)."""
        if not isinstance(node, ast.Name):
            return None
        for f in (self.frame, self.frames[0]):
            if node.id in f.names:
                return f.values.get(node.id)
        return None

    def built_by(self, node: ast.AST) -> str | None:
        """Qualified name of the call that built `node` (directly or through a name it was
        assigned from): `nn.CrossEntropyLoss()` -> "torch.nn.CrossEntropyLoss". Live objects
        answer with their class's public path, read from `type(obj)` only."""
        seen = 0
        while isinstance(node, ast.Name) and seen < 8:
            value = self.origin(node)
            if value is None and node.id in self.carried_built and node.id in self.frames[0].names:
                return self.carried_built[node.id]
            if value is None:
                live = self.live_object(node.id)
                if live is None or is_class(live):
                    return None
                return class_path(type(live))
            node = value
            seen += 1
        if isinstance(node, ast.Call):
            return self.qualname(node.func)
        return None

    def live_object(self, name: str) -> Any:
        """The live object behind a name the source did not bind (None when unknown)."""
        if self.namespace is None or self._bound(name) or name in self.imports:
            return None
        return self.namespace.get(name)

    def live_kind(self, name: str) -> str | None:
        if self.namespace is None:
            return None
        if name not in self._live_kinds:
            self._live_kinds[name] = classify_object(self.namespace[name]) if name in self.namespace else None
        return self._live_kinds[name]

    # ---- what an expression holds -------------------------------------------------------
    def is_tensor(self, node: ast.AST) -> bool:
        return self.kind(node) in TENSOR_KINDS

    def kind(self, node: ast.AST | None) -> str | None:
        if node is None:
            return None
        t = type(node)
        if t is ast.Name:
            return self.lookup(node.id)  # type: ignore[attr-defined]
        if t is ast.Constant:
            v = node.value  # type: ignore[attr-defined]
            if v is None:
                return NONE
            if isinstance(v, str):
                return STRING
            return NUMBER if isinstance(v, (int, float, complex)) else None
        if t is ast.Call:
            return self._call_kind(node)  # type: ignore[arg-type]
        if t is ast.Attribute:
            return self._attribute_kind(node)  # type: ignore[arg-type]
        if t is ast.Subscript:
            base = self.kind(node.value)  # type: ignore[attr-defined]
            if base in TENSOR_KINDS:
                return TENSOR
            if base == SHAPE:
                return NUMBER if not isinstance(node.slice, ast.Slice) else SHAPE  # type: ignore[attr-defined]
            if base == NDARRAY:
                return NDARRAY  # an array or a numpy scalar: never a tensor
            return None
        if t is ast.BinOp:
            left, right = self.kind(node.left), self.kind(node.right)  # type: ignore[attr-defined]
            if left in TENSOR_KINDS or right in TENSOR_KINDS:
                return TENSOR
            if left == NUMBER and right == NUMBER:
                return NUMBER
            return None
        if t is ast.UnaryOp:
            k = self.kind(node.operand)  # type: ignore[attr-defined]
            if isinstance(node.op, ast.Not):  # type: ignore[attr-defined]
                return TENSOR if k in TENSOR_KINDS else NUMBER
            return TENSOR if k in TENSOR_KINDS else k
        if t is ast.Compare:
            operands = [node.left, *node.comparators]  # type: ignore[attr-defined]
            if any(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in node.ops):  # type: ignore[attr-defined]
                return NUMBER
            return TENSOR if any(self.kind(o) in TENSOR_KINDS for o in operands) else NUMBER
        if t is ast.BoolOp:
            kinds = {self.kind(v) for v in node.values}  # type: ignore[attr-defined]
            return TENSOR if kinds & TENSOR_KINDS else (NUMBER if kinds == {NUMBER} else None)
        if t is ast.IfExp:
            a, b = self.kind(node.body), self.kind(node.orelse)  # type: ignore[attr-defined]
            return a if a == b else None
        if t is ast.NamedExpr:
            return self.kind(node.value)  # type: ignore[attr-defined]
        if t in (ast.List, ast.ListComp):
            return LIST
        if t in (ast.Dict, ast.DictComp):
            return DICT
        if t is ast.JoinedStr:
            return STRING
        return None

    def _attribute_kind(self, node: ast.Attribute) -> str | None:
        attr = node.attr
        value = node.value
        if attr in ("weight", "bias") and isinstance(value, ast.Attribute):
            # `model.fc.weight`: a parameter of a submodule of a known module
            root: ast.AST = value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id != "self" and self.lookup(root.id) == MODULE:
                return PARAMETER
        if isinstance(value, ast.Name) and value.id == "self" and self.frame.cls is not None:
            return self.frame.cls.attrs.get(attr)
        q = self.qualname(node)
        if q is not None and q.startswith("torch.") and q.count(".") >= 1:
            tail = q.rsplit(".", 1)[1]
            if (
                q.startswith("torch.float")
                or q.startswith("torch.int")
                or tail in ("bfloat16", "half", "bool", "long", "double")
            ):
                return DTYPE
        base = self.kind(value)
        if base in TENSOR_KINDS:
            if attr == "shape":
                return SHAPE
            if attr in ("T", "mT", "H", "mH", "data", "grad", "real", "imag"):
                return TENSOR
            if attr == "device":
                return DEVICE
            if attr == "dtype":
                return DTYPE
            if attr in ("ndim", "is_cuda", "requires_grad", "is_leaf"):
                return NUMBER
        if base == MODULE and attr in ("weight", "bias"):
            return PARAMETER
        return None

    def _call_kind(self, node: ast.Call) -> str | None:
        func = node.func
        q = self.qualname(func)
        if q is not None:
            k = _qualified_call_kind(q)
            if k is not None:
                return k
            head = q.split(".", 1)[0]
            if head in self.classes and "." not in q:
                return self.classes[head].kind
            if isinstance(func, ast.Name):
                if func.id in _NUMBER_FUNCS:
                    return NUMBER
                if func.id in ("str", "repr", "format"):
                    return STRING
                if func.id == "list":
                    return LIST
                if func.id == "dict":
                    return DICT
                callee = self.lookup(func.id)
                if callee == MODULE:
                    return TENSOR  # calling a module runs forward
                cls = self.live_object(func.id)
                if is_class(cls):
                    return classify_class(cls)
                return None
        if isinstance(func, ast.Attribute):
            recv = self.kind(func.value)
            m = func.attr
            if recv in TENSOR_KINDS:
                if m in _TENSOR_TO_NUMBER or m.startswith(("is_", "has_")):
                    return NUMBER
                if m in _TENSOR_NON_TENSOR:
                    if m == "size" and node.args:
                        return NUMBER
                    return _TENSOR_NON_TENSOR[m]
                if m in _TENSOR_SEQUENCE_FUNCS:
                    return TENSORS
                if m[:1] == "_" or (m == "type" and not node.args and not node.keywords):
                    return None  # dunder/private protocol methods; `x.type()` is a string
                return TENSOR
            if recv == MODULE:
                if m in _MODULE_SELF_METHODS:
                    return MODULE
                if m in _MODULE_METHOD_KINDS:
                    return _MODULE_METHOD_KINDS[m]
                if m == "forward":
                    return TENSOR
                return None
            if recv == NDARRAY:
                return {"tolist": LIST, "item": NUMBER}.get(m, NDARRAY)
            if recv == SHAPE and m == "numel":
                return NUMBER
            if isinstance(func.value, ast.Name) and func.value.id == "self" and self.frame.cls is not None:
                if self.frame.cls.attrs.get(m) == MODULE:
                    return TENSOR
        return None


def is_class(obj: object) -> bool:
    """`isinstance(obj, type)` without consulting `obj.__class__` (which runs user code)."""
    return issubclass(type(obj), type)


_TYPE_QUALNAME = type.__dict__["__qualname__"]
_TYPE_MODULE = type.__dict__["__module__"]


def class_path(cls: type) -> str | None:
    """Public dotted path of a class, read through `type`'s own descriptors (a metaclass
    cannot intercept them): `torch.nn.modules.loss.CrossEntropyLoss` -> `torch.nn.CrossEntropyLoss`."""
    try:
        mod, qn = _TYPE_MODULE.__get__(cls), _TYPE_QUALNAME.__get__(cls)
    except Exception:
        return None
    if isinstance(mod, str) and isinstance(qn, str):
        return _public_torch_path(mod, qn)
    return None


def _public_torch_path(module: str, qualname: str) -> str:
    """`torch.nn.modules.linear.Linear` -> `torch.nn.Linear`, so live classes match rules."""
    if module.startswith("torch.nn.modules"):
        return f"torch.nn.{qualname}"
    if module.startswith("torch.optim.lr_scheduler"):
        return f"torch.optim.lr_scheduler.{qualname}"
    if module.startswith("torch.optim."):
        return f"torch.optim.{qualname}"
    if module.startswith("torch.utils.data"):
        return f"torch.utils.data.{qualname}"
    return f"{module}.{qualname}"


def _qualified_call_kind(q: str) -> str | None:
    if not q.startswith("torch."):
        if q.startswith("numpy."):
            return NDARRAY
        return None
    parts = q.split(".")
    last = parts[-1]
    if len(parts) == 2:
        if last in _TORCH_NON_TENSOR or last.startswith(("is_", "are_", "get_", "set_", "_")):
            return DEVICE if last == "device" else None
        if last in _TENSOR_SEQUENCE_FUNCS:
            return TENSORS
        if last[:1].islower() or last == "Tensor" or last.endswith("Tensor"):
            return TENSOR
        return None
    if parts[1] == "nn":
        if len(parts) >= 3 and parts[2] == "functional":
            return TENSOR
        if len(parts) >= 3 and parts[2] == "init":
            # the in-place initialisers return their tensor; helpers return numbers/tuples
            return TENSOR if last.endswith("_") else None
        if last == "Parameter":
            return PARAMETER
        if len(parts) == 3 and last[:1].isupper():
            return MODULE
        return None
    if parts[1] == "optim":
        if "lr_scheduler" in parts:
            return SCHEDULER if last[:1].isupper() else None
        return OPTIMIZER if last[:1].isupper() else None
    if parts[1] == "utils" and len(parts) >= 3 and parts[2] == "data":
        if last == "DataLoader":
            return LOADER
        if last.endswith("Dataset") or last in ("Subset", "random_split"):
            return DATASET
        return None
    if parts[1] in ("fft", "linalg", "special") or (parts[1] == "autograd" and last == "Variable"):
        return TENSOR
    return None


def classify_class(cls: type) -> str | None:
    """What instances of a live class are, judged by type only (never touching instances)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        if issubclass(cls, torch.nn.Parameter):
            return PARAMETER
        if issubclass(cls, torch.Tensor):
            return TENSOR
        if issubclass(cls, torch.nn.Module):
            return MODULE
        if issubclass(cls, torch.optim.Optimizer):
            return OPTIMIZER
        sched = (
            getattr(torch.optim.lr_scheduler, "LRScheduler", None) or torch.optim.lr_scheduler._LRScheduler
        )
        if issubclass(cls, (sched, torch.optim.lr_scheduler.ReduceLROnPlateau)):
            return SCHEDULER
        data = torch.utils.data
        if issubclass(cls, data.DataLoader):
            return LOADER
        if issubclass(cls, data.Dataset):
            return DATASET
        if issubclass(cls, torch.device):
            return DEVICE
        if issubclass(cls, torch.dtype):
            return DTYPE
    except TypeError:
        return None
    return None


def classify_object(obj: object) -> str | None:
    """What a live object is, from `type(obj)` alone: no attribute access on the object."""
    t = type(obj)
    if t is bool or t is int or t is float or t is complex:
        return NUMBER
    if t is str:
        return STRING
    if t is list or t is tuple:
        return LIST
    if t is dict:
        return DICT
    if obj is None:
        return NONE
    if is_class(obj):
        return None
    np = sys.modules.get("numpy")
    if np is not None and issubclass(t, np.ndarray):
        return NDARRAY
    if np is not None and issubclass(t, np.number):
        return NUMBER
    return classify_class(t)


# ---- the walker ---------------------------------------------------------------------------

_GRAD_CONTEXTS = {
    "torch.no_grad": "no_grad",
    "torch.inference_mode": "inference_mode",
    "torch.enable_grad": "enable_grad",
    "torch.autograd.grad_mode.no_grad": "no_grad",
    "torch.autograd.no_grad": "no_grad",
}
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
# Node types with nothing below them that a rule could want (contexts and operators).
_LEAVES = frozenset(
    c
    for base in (ast.expr_context, ast.operator, ast.cmpop, ast.boolop, ast.unaryop)
    for c in base.__subclasses__()
)


def grad_context(ctx: Context, expr: ast.AST) -> str | None:
    """ "no_grad"/"inference_mode"/"enable_grad" for `torch.no_grad()`-like expressions."""
    call = expr
    if isinstance(expr, ast.Call):
        call = expr.func
        q = ctx.qualname(call)
        if q == "torch.set_grad_enabled" and expr.args:
            a = expr.args[0]
            if isinstance(a, ast.Constant) and a.value is False:
                return "no_grad"
            return "enable_grad"
        if q == "torch.inference_mode" and expr.args:
            a = expr.args[0]
            if isinstance(a, ast.Constant) and a.value is False:
                return None
    q = ctx.qualname(call)
    return _GRAD_CONTEXTS.get(q) if q else None


class Walker:
    """Walks one tree once, keeping `Context` current and dispatching to subscribed rules."""

    def __init__(self, ctx: Context, rules: Iterable[Rule]) -> None:
        self.ctx = ctx
        self.by_call: dict[str, list[Rule]] = {}
        self.by_attr: dict[str, list[Rule]] = {}
        self.by_node: dict[type, list[Rule]] = {}
        self.on_loop: list[Rule] = []
        self.on_finish: list[Rule] = []
        for r in rules:
            for name in r.calls:
                self.by_call.setdefault(name, []).append(r)
            for name in r.attrs:
                self.by_attr.setdefault(name, []).append(r)
            for t in r.nodes:
                self.by_node.setdefault(t, []).append(r)
            if r.loops:
                self.on_loop.append(r)
            if r.finish:
                self.on_finish.append(r)

        self._special: dict[type, Callable[[Any], None]] = {
            ast.FunctionDef: self._visit_function,
            ast.AsyncFunctionDef: self._visit_function,
            ast.ClassDef: self._visit_class,
            ast.For: self._visit_for,
            ast.AsyncFor: self._visit_for,
            ast.While: self._visit_while,
            ast.With: self._visit_with,
            ast.AsyncWith: self._visit_with,
            ast.Lambda: self._visit_lambda,
            **{c: self._visit_comprehension for c in _COMPREHENSIONS},
        }

    def run(self, tree: ast.Module) -> None:
        self._prescan_imports(tree)
        self.visit(tree)
        for r in self.on_finish:
            self._call(r, tree)

    def _call(self, r: Rule, node: Any) -> None:
        ctx = self.ctx
        ctx.rule = r
        try:
            r.check(node, ctx)
        except RecursionError:
            raise
        except Exception as e:  # one broken rule must not take the others down
            line = getattr(node, "lineno", None) or getattr(getattr(node, "node", None), "lineno", None)
            ctx.errors.append(f"rule {r.id} failed at line {line}: {type(e).__name__}: {e}")
        finally:
            ctx.rule = None

    def _prescan_imports(self, tree: ast.Module) -> None:
        # Imports bind for the whole file (they usually sit at the top anyway).
        for node in tree.body:
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.ctx.imports[a.asname] = a.name
                    else:
                        head = a.name.split(".", 1)[0]
                        self.ctx.imports[head] = head
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    if a.name != "*":
                        self.ctx.imports[a.asname or a.name] = f"{node.module}.{a.name}"

    def visit(self, node: ast.AST) -> None:
        t = type(node)
        rules = self.by_node.get(t)
        if rules:
            for r in rules:
                self._call(r, node)
        if t is ast.Name or t is ast.Constant:
            return  # leaves (their only child is the Load/Store context)
        if t is ast.Call:
            self._on_call(node)  # type: ignore[arg-type]
        elif t is ast.Attribute:
            rules = self.by_attr.get(node.attr)  # type: ignore[attr-defined]
            if rules:
                for r in rules:
                    self._call(r, node)
        special = self._special.get(t)
        if special is not None:
            special(node)
            return
        stack = self.ctx.stack
        stack.append(node)
        visit = self.visit
        for name in node._fields:
            value = getattr(node, name, None)
            if type(value) is list:
                for item in value:
                    if type(item) not in _LEAVES and isinstance(item, ast.AST):
                        visit(item)
            elif value is not None and type(value) not in _LEAVES and isinstance(value, ast.AST):
                visit(value)
        stack.pop()
        if t is ast.Assign or t is ast.AnnAssign or t is ast.AugAssign or t is ast.NamedExpr:
            self._bind_assignment(node)

    def _visit_while(self, node: ast.While) -> None:
        self._visit_loop(node, list(ast.iter_child_nodes(node)))

    def _visit_lambda(self, node: ast.Lambda) -> None:
        f = self.ctx.frame
        self._visit_in_frame(
            node, Frame(node, cls=f.cls, method=f.method, in_forward=f.in_forward), [node.body]
        )

    def _on_call(self, node: ast.Call) -> None:
        for loop in self.ctx.frame.loops:
            loop.calls.append(node)
        func = node.func
        name = (
            func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        )
        if name is not None:
            rules = self.by_call.get(name)
            if rules:
                for r in rules:
                    self._call(r, node)

    def _visit_children(self, node: ast.AST, children: Iterable[ast.AST]) -> None:
        self.ctx.stack.append(node)
        for child in children:
            self.visit(child)
        self.ctx.stack.pop()

    def _visit_in_frame(self, node: ast.AST, frame: Frame, children: Iterable[ast.AST]) -> None:
        ctx = self.ctx
        ctx.frames.append(frame)
        try:
            self._visit_children(node, children)
        finally:
            ctx.frames.pop()

    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        ctx = self.ctx
        outer = ctx.frame
        parent = ctx.parent
        self._visit_children(
            node,
            [*node.decorator_list, *node.args.defaults, *[d for d in node.args.kw_defaults if d is not None]],
        )
        cls_info = None
        if isinstance(parent, ast.ClassDef):
            cls_info = ctx.classes.get(parent.name)
            method = node.name
            in_forward = cls_info is not None and (
                node.name == "forward" or node.name in cls_info.forward_helpers
            )
        else:
            cls_info, method, in_forward = outer.cls, outer.method, outer.in_forward
        frame = Frame(node, cls=cls_info, method=method, in_forward=in_forward)
        for d in node.decorator_list:
            g = grad_context(ctx, d)
            if g:
                frame.grad.append(g)
        self._bind_params(node, frame)
        ctx.bind(node.name, None, node)  # origin(name) -> the def, for rules that follow callbacks
        self._visit_in_frame(node, frame, node.body)

    def _bind_params(self, node: ast.FunctionDef | ast.AsyncFunctionDef, frame: Frame) -> None:
        args = node.args
        positional = [*args.posonlyargs, *args.args]
        defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
        pairs = list(zip(positional, defaults)) + list(zip(args.kwonlyargs, args.kw_defaults))
        for i, (a, default) in enumerate(pairs):
            kind: str | None = None
            if a.annotation is not None:
                ann = self.ctx.qualname(a.annotation) or ""
                if ann.endswith("Tensor"):
                    kind = TENSOR
                elif ann.endswith("Module"):
                    kind = MODULE
                elif ann in ("int", "float", "bool"):
                    kind = NUMBER
            elif (
                frame.in_forward
                and frame.cls is not None
                and frame.cls.kind == MODULE
                and not (i == 0 and a.arg == "self")
            ):
                if default is None or (isinstance(default, ast.Constant) and default.value is None):
                    kind = TENSOR
                else:
                    kind = self.ctx.kind(default)
            frame.names[a.arg] = kind
        for a in (args.vararg, args.kwarg):
            if a is not None:
                frame.names[a.arg] = None

    def _visit_class(self, node: ast.ClassDef) -> None:
        ctx = self.ctx
        kind = self._class_kind(node)
        helpers: set[str] = set()
        if kind == MODULE:
            for stmt in node.body:
                if isinstance(stmt, _FUNCS) and stmt.name == "forward":
                    for sub in ast.walk(stmt):
                        if (
                            isinstance(sub, ast.Call)
                            and isinstance(sub.func, ast.Attribute)
                            and isinstance(sub.func.value, ast.Name)
                            and sub.func.value.id == "self"
                        ):
                            helpers.add(sub.func.attr)
        ctx.classes[node.name] = ClassInfo(node.name, kind, node, forward_helpers=frozenset(helpers))
        ctx.bind(node.name, None)
        self._visit_children(node, [*node.decorator_list, *node.bases, *node.keywords, *node.body])

    def _class_kind(self, node: ast.ClassDef) -> str | None:
        ctx = self.ctx
        for base in node.bases:
            if isinstance(base, ast.Name) and base.id in ctx.classes:
                k = ctx.classes[base.id].kind
                if k:
                    return k
            q = ctx.qualname(base) or ""
            if q.startswith("torch.nn.") and q.count(".") == 2 and q.rsplit(".", 1)[1][:1].isupper():
                return MODULE
            if q.startswith("torch.utils.data.") and ("Dataset" in q or q.endswith("Sampler")):
                return DATASET
            if isinstance(base, ast.Name):
                live = ctx.live_object(base.id)
                if is_class(live):
                    k = classify_class(live)
                    if k in (MODULE, DATASET):
                        return k
        return None

    def _visit_for(self, node: ast.For | ast.AsyncFor) -> None:
        self._visit_children(node, [node.iter])
        self._bind_loop_target(node.target, node.iter)
        self._visit_children(node, [node.target])
        self._visit_loop(node, node.body)
        self._visit_children(node, node.orelse)

    def _bind_loop_target(self, target: ast.AST, it: ast.AST) -> None:
        """Bind a `for`/comprehension target from what iterating `it` yields."""
        if isinstance(it, ast.Call) and isinstance(target, (ast.Tuple, ast.List)) and len(target.elts) == 2:
            name = terminal_name(it.func)
            if name == "enumerate" and it.args:
                self._bind_target(target.elts[0], NUMBER)
                self._bind_loop_target(target.elts[1], it.args[0])
                return
            if name in ("named_parameters", "named_buffers"):
                self._bind_target(target.elts[0], STRING)
                self._bind_target(target.elts[1], PARAMETER if name == "named_parameters" else TENSOR)
                return
        self._bind_target(target, self._iter_item_kind(it))

    def _iter_item_kind(self, it: ast.AST) -> str | None:
        if isinstance(it, ast.Call):
            name = terminal_name(it.func)
            if name in ("tqdm", "iter") and it.args:
                return self._iter_item_kind(it.args[0])
            if name == "parameters" and isinstance(it.func, ast.Attribute):
                return PARAMETER
        display = self.ctx.origin(it) if isinstance(it, ast.Name) else it
        if isinstance(display, (ast.List, ast.Tuple)) and display.elts:
            kinds = {self.ctx.kind(e) for e in display.elts}
            if len(kinds) == 1:
                return kinds.pop()
        elif isinstance(display, ast.ListComp) and isinstance(display.elt, ast.Call):
            k = self.ctx.kind(display.elt)
            if k in TENSOR_KINDS or k == MODULE:
                return k
        k = self.ctx.kind(it)
        if k == LOADER:
            return BATCH
        if k in TENSOR_KINDS or k == TENSORS:
            return TENSOR
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range":
            return NUMBER
        return None

    def _visit_loop(self, node: ast.AST, children: Iterable[ast.AST]) -> None:
        ctx = self.ctx
        info = LoopInfo(node)
        if ctx.frame.loops and not isinstance(node, _COMPREHENSIONS):
            ctx.frame.loops[-1].inner_loop_seen = True
        ctx.frame.loops.append(info)
        try:
            self._visit_children(node, children)
        finally:
            ctx.frame.loops.pop()
        if self.on_loop:
            ctx.leaving = info
            for r in self.on_loop:
                self._call(r, info)
            ctx.leaving = None

    def _visit_comprehension(self, node: ast.AST) -> None:
        gens: list[ast.comprehension] = node.generators  # type: ignore[attr-defined]
        self._visit_children(node, [gens[0].iter])
        for g in gens:
            self._bind_loop_target(g.target, g.iter)
        rest: list[ast.AST] = [g.iter for g in gens[1:]] + [c for g in gens for c in g.ifs]
        if isinstance(node, ast.DictComp):
            rest += [node.key, node.value]
        else:
            rest.append(node.elt)  # type: ignore[attr-defined]
        self._visit_loop(node, rest)

    def _visit_with(self, node: ast.With | ast.AsyncWith) -> None:
        ctx = self.ctx
        modes = [g for item in node.items if (g := grad_context(ctx, item.context_expr))]
        self._visit_children(
            node, [c for item in node.items for c in (item.context_expr, item.optional_vars) if c is not None]
        )
        ctx.frame.grad.extend(modes)
        try:
            self._visit_children(node, node.body)
        finally:
            for _ in modes:
                ctx.frame.grad.pop()

    # ---- bindings -----------------------------------------------------------------------
    def _bind_assignment(self, node: ast.AST) -> None:
        ctx = self.ctx
        if isinstance(node, ast.Assign):
            kind = ctx.kind(node.value)
            for target in node.targets:
                self._bind_target(target, kind, node.value)
        elif isinstance(node, ast.AnnAssign):
            if node.value is not None:
                self._bind_target(node.target, ctx.kind(node.value), node.value)
        elif isinstance(node, ast.AugAssign):
            if isinstance(node.target, ast.Name):
                old = ctx.lookup(node.target.id)
                new = ctx.kind(node.value)
                if new in TENSOR_KINDS or old in TENSOR_KINDS:
                    ctx.bind(node.target.id, TENSOR)
        elif isinstance(node, ast.NamedExpr):
            self._bind_target(node.target, ctx.kind(node.value), node.value)

    def _bind_target(self, target: ast.AST, kind: str | None, value: ast.AST | None = None) -> None:
        ctx = self.ctx
        if isinstance(target, ast.Name):
            ctx.bind(target.id, kind, value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            values = (
                value.elts
                if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts)
                else None
            )
            for i, elt in enumerate(target.elts):
                if values is not None:
                    self._bind_target(elt, ctx.kind(values[i]), values[i])
                else:
                    item = TENSOR if kind in (BATCH, TENSOR, TENSORS) else None
                    self._bind_target(elt, item)
        elif isinstance(target, ast.Starred):
            self._bind_target(target.value, None)
        elif (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
            and ctx.frame.cls is not None
        ):
            ctx.frame.cls.attrs[target.attr] = kind


def terminal_name(func: ast.AST) -> str | None:
    """`a.b.c` -> "c", `f` -> "f"."""
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def keyword(call: ast.Call, name: str) -> ast.AST | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def has_kwargs_splat(call: ast.Call) -> bool:
    return any(kw.arg is None for kw in call.keywords)


CheckFn = Callable[[Any, Context], None]
