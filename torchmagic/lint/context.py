"""What a rule may ask while the walker stands on a node: where we are (loops, grad mode,
module and dataset classes), what names and expressions hold, and how to report."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..report import Finding, Fix
from .accelerator import spelled_device_type
from .fixes import EditMaker
from .kinds import (
    DATASET,
    DEFAULT_IMPORTS,
    DEVICE,
    DICT,
    DTYPE,
    LIST,
    MODULE,
    MODULE_METHOD_KINDS,
    MODULE_SELF_METHODS,
    NDARRAY,
    NONE,
    NUMBER,
    NUMBER_FUNCS,
    PARAMETER,
    SHAPE,
    STRING,
    TENSOR,
    TENSOR_KINDS,
    TENSOR_NON_TENSOR,
    TENSOR_SEQUENCE_FUNCS,
    TENSOR_TO_NUMBER,
    TENSORS,
    class_path,
    classify_class,
    classify_object,
    is_class,
    qualified_call_kind,
)
from .nodes import isinstance_test, unpackings

if TYPE_CHECKING:
    from .registry import StaticCheck


_BLOCKS = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.If,
    ast.With,
    ast.AsyncWith,
    ast.Try,
    ast.Match,
)
if sys.version_info >= (3, 11):
    _BLOCKS = (*_BLOCKS, ast.TryStar)


# types whose `isinstance` test says a value is a Python container or number, not a tensor
_CONTAINER_TYPES = frozenset(
    {
        "list",
        "tuple",
        "dict",
        "set",
        "str",
        "int",
        "float",
        "bool",
        "collections.abc.Sequence",
        "collections.abc.Mapping",
        "typing.Sequence",
        "typing.Mapping",
        "Sequence",
        "Mapping",
        "numpy.ndarray",
    }
)


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
    steps_itself: bool | None = None  # see walker.steps_itself; computed at the first inner loop
    facts: dict[str, Any] = field(default_factory=dict)  # rule-owned facts about this loop


@dataclass
class Frame:
    """A function scope (the module level is the outermost frame)."""

    node: ast.AST | None
    names: dict[str, str | None] = field(default_factory=dict)
    values: dict[str, ast.AST] = field(default_factory=dict)  # the expression a name was last bound to
    loop_sources: dict[str, ast.AST] = field(default_factory=dict)  # loop variable -> what it iterates
    earlier: dict[str, ast.AST] = field(default_factory=dict)  # the binding before the last one
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
    accelerator: bool = False  # an earlier cell moved something to an accelerator
    notes: dict[str, Any] = field(default_factory=dict)  # rule-owned facts (`Context.notes`)
    # module-level names an earlier cell bound to a device literal (`DEVICE = "cpu"`,
    # `device = torch.device("cuda")`) -> its device type
    devices: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, ctx: Context) -> Carry:
        built = {}
        devices = dict(ctx.carried_devices)
        for name in ctx.frames[0].names:
            node = ast.Name(id=name, ctx=ast.Load())
            b = ctx.built_by(node)
            if b is not None:
                built[name] = b
            origin = ctx.origin(node)
            if origin is not None:
                devices.pop(name, None)
                kind = spelled_device_type(ctx, origin)
                if kind is not None:
                    devices[name] = kind
        return cls(
            dict(ctx.imports),
            dict(ctx.classes),
            dict(ctx.frames[0].names),
            built,
            ctx.accelerator_seen or ctx.accelerator_hint,
            {k: dict(v) if isinstance(v, dict) else v for k, v in ctx.notes.items()},
            devices,
        )

    def into(self, ctx: Context) -> None:
        ctx.imports.update(self.imports)
        ctx.classes.update(self.classes)
        ctx.frames[0].names.update(self.names)
        ctx.carried_built.update(self.built)
        ctx.carried_devices.update(self.devices)
        ctx.notes.update({k: dict(v) if isinstance(v, dict) else v for k, v in self.notes.items()})


class Context:
    """What a rule may ask while the walker stands on a node."""

    def __init__(
        self,
        lines: list[str],
        namespace: dict[str, Any] | None = None,
        *,
        post_run: bool = False,
        accelerator_hint: bool = False,
    ) -> None:
        self.lines = lines
        # the whole file or notebook this source is part of (set by the CLI for notebooks):
        # fixes read it for other uses of what they change
        self._document: str | None = None
        self.wider_document = False  # `document` was given, not read from this source's own lines
        # the project around a checked file declares it runs on CUDA only (a file that imports
        # cupy, asserts a GPU): a hardcoded `.cuda()` costs this source no portability either
        self.project_cuda_only = False
        self.namespace = namespace
        # the namespace holds what this very source bound when it ran (a checked cell, after it
        # ran): live values may answer for names the source binds too
        self.post_run = post_run and namespace is not None
        # evidence outside this source that something lives on an accelerator (a kernel with
        # CUDA in use, an earlier notebook cell that moved a model)
        self.accelerator_hint = accelerator_hint
        self.accelerator_seen = False  # this source moves something to an accelerator
        self.default_device_set = False  # torch.set_default_device(...): factories may not be CPU
        self.gpu_findings: list[Finding] = []  # kept only where there is an accelerator path
        self.top_level_gpu_findings: list[Finding] = []  # the same, outside functions and classes
        self.edits = EditMaker(lines)  # builds a finding's fix from AST nodes
        self.imports: dict[str, str] = {}
        self._kernel_modules: list[tuple[str, str]] | None = None  # for spelling()
        self.classes: dict[str, ClassInfo] = {}
        self.frames: list[Frame] = [Frame(None)]
        self.stack: list[ast.AST] = []
        self.findings: list[Finding] = []
        self.check: StaticCheck | None = None  # the check being run (set by the walker)
        self.leaving: LoopInfo | None = None
        self._live_kinds: dict[str, str | None] = {}
        self.errors: list[str] = []
        self.carried_built: dict[str, str] = {}  # builders of names bound in earlier cells
        self.carried_devices: dict[str, str] = {}  # device types of names earlier cells bound to a literal
        # facts a rule keeps for the rest of the source and for the next cells of a notebook
        # (plain data, never AST nodes), keyed by rule ID
        self.notes: dict[str, Any] = {}
        # later cells of the same notebook read this source's notes (a carry is passed on):
        # facts only they need are worth collecting
        self.feeds_later_cells = False

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
    def at_top_level(self) -> bool:
        """At the top level of the script or cell, in no loop and no function: code that runs once."""
        return self.frame.node is None and not self.frame.loops

    @property
    def cls(self) -> ClassInfo | None:
        return self.frame.cls

    def enclosing_function(self) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        """The innermost `def` around the node being checked (a lambda is not one)."""
        return next(
            (n for n in reversed(self.stack) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None
        )

    def class_chain(self, start: ast.ClassDef | None = None) -> list[ast.ClassDef]:
        """The current class (or `start`) and its bases defined in the same source, nearest
        first, each once (`class Foo(Foo)` over an imported `Foo` names itself)."""
        out: list[ast.ClassDef] = []
        todo = [start] if start is not None else [self.cls.node] if self.cls is not None else []
        while todo and len(out) < 8:
            node = todo.pop(0)
            if any(node is n for n in out):
                continue
            out.append(node)
            for base in node.bases:
                if isinstance(base, ast.Name) and base.id in self.classes:
                    todo.append(self.classes[base.id].node)
        return out

    def class_methods(self) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
        """The methods of the current class and of its bases in this source, nearest class first."""
        for cls in self.class_chain():
            for fn in cls.body:
                if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield fn

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

    def statement(self) -> ast.stmt | None:
        """The innermost simple statement around the node being checked (not a block)."""
        for node in reversed(self.stack):
            if isinstance(node, ast.stmt):
                return None if isinstance(node, _BLOCKS) else node
        return None

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
        needs_accelerator: bool = False,
        fix: Fix | None = None,
    ) -> Finding:
        """Report `node`. `needs_accelerator`: the finding speaks of a GPU and the value's place is
        unknown; it is kept only when the code (file, notebook or kernel) has an accelerator path."""
        check = self.check
        assert check is not None, "flag() is called from a check during the walk"
        # a call written over several lines is reported where it starts, as editors show it;
        # within a simple statement spread over lines, at the statement's first line, so that
        # one statement gives one finding of a rule (`print(a.item(),\n      b.item())`)
        line, col = getattr(node, "lineno", None), getattr(node, "col_offset", None)
        stmt = self.statement()
        if stmt is not None and line is not None and stmt.lineno != line and stmt.end_lineno != stmt.lineno:
            line, col = stmt.lineno, stmt.col_offset
        f = check.rule.finding(message, hint, line=line, col=col, severity=severity, fix=fix)  # type: ignore[arg-type]
        if not needs_accelerator:
            self.findings.append(f)
        elif any(
            isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef))
            for n in self.stack
        ):
            self.gpu_findings.append(f)
        else:
            self.top_level_gpu_findings.append(f)
        return f

    def amend(self, finding: Finding, *, certain: bool = False, **changes: Any) -> Finding:
        """Replace a finding given earlier in the walk by a copy with `changes`; `certain`: what
        was added needs no accelerator path to hold, so the finding no longer waits for one."""
        new = replace(finding, **changes)
        for found in (self.findings, self.gpu_findings, self.top_level_gpu_findings):
            for i, f in enumerate(found):
                if f is finding:
                    if certain and found is not self.findings:
                        del found[i]
                        self.findings.append(new)
                    else:
                        found[i] = new
                    return new
        return new

    def withdraw(self, finding: Finding) -> None:
        """Take back a finding given earlier in the walk, for a rule that learns only at the end
        of a loop that its finding does not hold."""
        for found in (self.findings, self.gpu_findings, self.top_level_gpu_findings):
            for i, f in enumerate(found):
                if f is finding:
                    del found[i]
                    return

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

    @property
    def document(self) -> str:
        if self._document is None:
            self._document = "\n".join(self.lines)
        return self._document

    def use_document(self, text: str) -> None:
        """Set the whole file or notebook this source is part of."""
        self._document = text
        self.wider_document = True

    def spelling(self, qualified: str) -> str | None:
        """How this source can write `qualified` (`torch.nn.ModuleList` is `nn.ModuleList`
        after `from torch import nn`), from its imports or the kernel's modules; None when it
        has no name for it. Used by fixes, which must not introduce an undefined name."""
        best: str | None = None
        for local, target in self._import_names():
            if qualified == target or qualified.startswith(target + "."):
                candidate = local + qualified[len(target) :]
                if best is None or len(candidate) < len(best):
                    best = candidate
        return best

    def _import_names(self) -> list[tuple[str, str]]:
        if self._kernel_modules is None:  # the kernel's torch modules, read once
            self._kernel_modules = []
            for name, obj in (self.namespace or {}).items():
                if type(obj) is type(sys):
                    mod_name = obj.__dict__.get("__name__")
                    if isinstance(mod_name, str) and mod_name.split(".")[0] == "torch":
                        self._kernel_modules.append((name, mod_name))
        pairs = [(k, v) for k, v in self.imports.items() if not self._bound(k)]
        pairs += [(k, v) for k, v in self._kernel_modules if k not in self.imports and not self._bound(k)]
        return pairs

    def defined(self, name: str) -> bool:
        """The name has a value here: bound by this source (so far), imported, or in the kernel."""
        return self._bound(name) or name in self.imports or bool(self.namespace and name in self.namespace)

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
        frame = self.frame
        frame.names[name] = kind
        if value is not None:
            before = frame.values.get(name)
            if before is not None:
                frame.earlier[name] = before
            frame.values[name] = value
        else:
            frame.values.pop(name, None)
            frame.earlier.pop(name, None)

    def lookup(self, name: str) -> str | None:
        for f in (self.frame, self.frames[0]):
            if name in f.names:
                return f.names[name]
        if name in self.imports:
            return None
        return self.live_kind(name)

    def loop_source(self, name: str) -> ast.AST | None:
        """What a loop variable iterates over (`xs` for `for x in xs`), innermost binding first."""
        for f in (self.frame, self.frames[0]):
            if name in f.loop_sources:
                return f.loop_sources[name]
            if name in f.names:
                return None
        return None

    def last_unpacking(self, node: ast.Name) -> ast.Assign | None:
        """The last assignment of the current scope before `node` that unpacks into its name
        (`loss, eer = ...`, `_, best = x.max(1)`), which `origin` does not record."""
        scope = self.frame.node or (self.stack[0] if self.stack else None)
        if scope is None:
            return None
        line = getattr(node, "lineno", 0)
        earlier = [a for a in unpackings(scope).get(node.id, ()) if a.lineno < line]
        return max(earlier, key=lambda a: a.lineno, default=None)

    def origin(self, node: ast.AST) -> ast.AST | None:
        """The expression a plain name was last assigned from in this cell (None when unknown).
        For an update of the name by itself (`x = x * scale`), `earlier_origin` gives the one before."""
        if not isinstance(node, ast.Name):
            return None
        for f in (self.frame, self.frames[0]):
            if node.id in f.names:
                return f.values.get(node.id)
        return None

    def earlier_origin(self, name: str) -> ast.AST | None:
        for f in (self.frame, self.frames[0]):
            if name in f.names:
                return f.earlier.get(name)
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
    def _narrowed_to_a_container(self, node: ast.Name) -> bool:
        """`if isinstance(data, (list, tuple)): for d in data: ...`: in the branch where a test
        of this source says the name holds a Python container (or, in the `else` of
        `isinstance(x, torch.Tensor)`, anything but a tensor), it is no tensor there, whatever
        its annotation or another binding says."""
        line = getattr(node, "lineno", None)
        if line is None:
            return False
        for anc in self.stack:
            if not isinstance(anc, ast.If):
                continue
            tested = isinstance_test(anc.test)
            if tested is None or tested[0] != node.id:
                continue
            names = [self.qualname(t) or ast.unparse(t) for t in tested[1]]
            for branch, containers in ((anc.body, True), (anc.orelse, False)):
                if not branch or not branch[0].lineno <= line <= (branch[-1].end_lineno or 0):
                    continue
                if containers and all(n in _CONTAINER_TYPES for n in names):
                    return True
                if not containers and any(n in ("torch.Tensor", "Tensor") for n in names):
                    return True
        return False

    def is_tensor(self, node: ast.AST) -> bool:
        return self.kind(node) in TENSOR_KINDS

    def kind(self, node: ast.AST | None) -> str | None:
        if node is None:
            return None
        t = type(node)
        if t is ast.Name:
            found = self.lookup(node.id)  # type: ignore[attr-defined]
            if found is None and _is_torch_dtype(self.resolve_import(node.id)):  # type: ignore[attr-defined]
                return DTYPE  # `from torch import int32`
            if found in TENSOR_KINDS and self._narrowed_to_a_container(node):  # type: ignore[arg-type]
                return None
            return found
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
            if STRING in (left, right):
                return STRING  # `"LABEL: " + label`: text (a tensor there would raise)
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
            if any(isinstance(o, ast.Constant) and o.value is None for o in operands):
                return NUMBER  # `t != None`: Tensor.__ne__(None) answers a Python bool, reads no data
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
        if _is_torch_dtype(self.qualname(node)):
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

    def _submodule_of_a_class_here(self, receiver: ast.AST, attr: str) -> bool:
        """`receiver` is built by a class of this source whose `self.<attr>` is a module."""
        value = self.origin(receiver) if isinstance(receiver, ast.Name) else None
        while (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and value.func.attr in MODULE_SELF_METHODS
        ):
            value = value.func.value  # `RND().to(device)`, `Net().cuda().eval()`
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)):
            return False
        info = self.classes.get(value.func.id)
        return info is not None and info.attrs.get(attr) == MODULE

    def _call_kind(self, node: ast.Call) -> str | None:
        func = node.func
        q = self.qualname(func)
        if q is not None:
            k = qualified_call_kind(q)
            if k is not None:
                return k
            head = q.split(".", 1)[0]
            if head in self.classes and "." not in q:
                return self.classes[head].kind
            if isinstance(func, ast.Name):
                if func.id in NUMBER_FUNCS:
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
                if m in TENSOR_TO_NUMBER or m.startswith(("is_", "has_")):
                    return NUMBER
                if m in TENSOR_NON_TENSOR:
                    if m == "size" and node.args:
                        return NUMBER
                    return TENSOR_NON_TENSOR[m]
                if m in TENSOR_SEQUENCE_FUNCS:
                    return TENSORS
                if m[:1] == "_" or (m == "type" and not node.args and not node.keywords):
                    return None  # dunder/private protocol methods; `x.type()` is a string
                if m in _MAPPING_METHODS:
                    return None  # `cache.get("offset")`: the guess of a tensor was wrong

                return TENSOR
            if recv == MODULE:
                if m in MODULE_SELF_METHODS:
                    return MODULE
                if m in MODULE_METHOD_KINDS:
                    return MODULE_METHOD_KINDS[m]
                if m == "forward":
                    return TENSOR
                if self._submodule_of_a_class_here(func.value, m):
                    return TENSOR  # `rnd_model.target(x)`: a submodule that `__init__` assigned
                return None
            if recv == NDARRAY:
                return {"tolist": LIST, "item": NUMBER}.get(m, NDARRAY)
            if recv == SHAPE and m == "numel":
                return NUMBER
            if isinstance(func.value, ast.Name) and func.value.id == "self" and self.frame.cls is not None:
                if self.frame.cls.attrs.get(m) == MODULE:
                    return TENSOR
        return None


# methods of dicts, lists and strings that a tensor does not have
_MAPPING_METHODS = frozenset(
    {
        "get",
        "items",
        "keys",
        "values",
        "append",
        "extend",
        "update",
        "setdefault",
        "startswith",
        "endswith",
        "join",
    }
)

_GRAD_CONTEXTS = {
    "torch.no_grad": "no_grad",
    "torch.inference_mode": "inference_mode",
    "torch.enable_grad": "enable_grad",
    "torch.autograd.grad_mode.no_grad": "no_grad",
    "torch.autograd.no_grad": "no_grad",
}


def _is_torch_dtype(qualname: str | None) -> bool:
    """`torch.float16`, `torch.int32`, `torch.bfloat16`, `torch.long`."""
    if qualname is None or not qualname.startswith("torch.") or qualname.count(".") != 1:
        return False
    tail = qualname[6:]
    return tail.startswith(("float", "int", "uint", "complex")) or tail in (
        "bfloat16",
        "half",
        "bool",
        "long",
        "double",
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
    if not q:
        return None
    if q in _GRAD_CONTEXTS:
        return _GRAD_CONTEXTS[q]
    # a project's own wrapper (`@smart_inference_mode()` in yolov5 picks `inference_mode` or
    # `no_grad` by torch version): its name says what it does
    last = q.rsplit(".", 1)[-1]
    if not q.startswith("torch.") and last.endswith(("inference_mode", "no_grad")):
        return "inference_mode" if last.endswith("inference_mode") else "no_grad"
    return None
