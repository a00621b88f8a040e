"""explain(): turn a PyTorch shape/dtype/device error into one sentence, a fix, the tensors
involved and the module chain, from what is already there: the exception's message, the
traceback's frames and the modules that were in flight. Nothing is re-executed, and nothing
of the user's runs: see `safe` and `frames` for how values are read.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from ..report import Finding
from . import frames as fr
from . import safe
from .messages import TensorError, classify
from .records import ChainEntry, ModuleCall, TensorInfo, own_tensors, summary

_traceback = BaseException.__dict__["__traceback__"].__get__
MAX_TENSORS = 10


@dataclass
class Explanation:
    """A TM001 finding's content, plus the structured facts behind it."""

    line: int | None
    kind: str
    message: str
    hint: str
    tensors: list[TensorInfo] = field(default_factory=list)
    chain: list[ChainEntry] = field(default_factory=list)  # outermost -> innermost
    layer: str | None = None  # the module blamed (`net.2`), if any
    code: str | None = None  # the failing expression in user code
    location: str | None = None  # "file:line in function" of that expression
    error: TensorError | None = None

    def to_finding(self) -> Finding:
        return Finding(
            rule="TM001",
            name="tensor-error",
            severity="error",
            line=self.line,
            col=None,
            message=self.message,
            hint=self.hint,
            object=self.layer,
            source="runtime",
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "kind": self.kind,
            "message": self.message,
            "hint": self.hint,
            "tensors": [t.to_dict() for t in self.tensors],
            "chain": [c.to_dict() for c in self.chain],
            "layer": self.layer,
            "code": self.code,
            "location": self.location,
        }


def explain(
    exc: BaseException,
    tb: TracebackType | None = None,
    modules: Sequence[ModuleCall] = (),
    cell_line: int | None = None,
) -> Explanation | None:
    """The explanation of `exc` if it is a PyTorch shape/dtype/device error, else None.

    `modules` are the forwards in flight when it was raised, innermost first (names as the
    user types them, from the shape tracer); `tb` defaults to the exception's own traceback;
    `cell_line` is the cell line the finding points at.
    """
    err = classify(exc)
    if err is None:
        return None
    if tb is None:
        tb = _traceback(exc)
    from .kinds import build

    try:
        ctx = Context(err, fr.sites(tb), list(modules))
        message, hint = build(ctx)
        err = ctx.err  # a builder may name the kind more precisely than the message did
        return Explanation(
            line=cell_line,
            kind=err.kind,
            message=message,
            hint=hint,
            tensors=ctx.tensors()[:MAX_TENSORS],
            chain=ctx.chain(),
            layer=ctx.layer_name(),
            code=ctx.code(),
            location=ctx.location(),
            error=err,
        )
    except Exception:  # an odd frame or object: the error's own words still help
        return Explanation(
            line=cell_line, kind=err.kind, message=f"{err.text.rstrip('.')}.", hint="", error=err
        )


class Context:
    """What the builders of each kind's text may read; every read is lazy and cached."""

    def __init__(self, err: TensorError, sites: list[fr.Site], modules: list[ModuleCall]) -> None:
        self.err = err
        self.sites = sites
        self.modules = modules
        self.layer: ModuleCall | None = modules[0] if modules else None
        self.layer_site: fr.Site | None = None  # a torch.nn forward frame of the layer
        self.own_site: fr.Site | None = None  # the layer's own (user) forward frame
        self.user_site: fr.Site | None = None  # innermost user frame
        self.functional_site: fr.Site | None = None  # innermost torch.nn.functional frame
        self._tensors: list[TensorInfo] | None = None
        self._expr: list[TensorInfo] | None = None
        self._user_index = -1
        self._locate()

    # ---- where -------------------------------------------------------------------------------
    def _locate(self) -> None:
        for i, s in enumerate(self.sites):
            if s.kind == fr.USER:
                self.user_site, self._user_index = s, i
            elif s.kind == fr.FUNCTIONAL:
                self.functional_site = s
        # A torch.nn forward frame deeper than the last user frame is the builtin layer that
        # raised; its `self` is the layer, named by the tracer's chain when it is there.
        for s in reversed(self.sites):
            if s.kind == fr.USER:
                break
            if s.kind == fr.NN:
                me = s.local("self")
                if safe.is_module(me):
                    self.layer_site = s
                    self._adopt(me)
                    break
        if self.layer_site is None and self.user_site is not None:
            me = self.user_site.local("self")
            if safe.is_module(me) and (self.layer is None or self.layer.module is me):
                self.own_site = self.user_site
                self._adopt(me)
        if self.functional_site is not None and self.user_site is not None:
            if self.sites.index(self.functional_site) < self._user_index:
                self.functional_site = None  # a functional call that led to user code again

    def _adopt(self, module: Any) -> None:
        """Make `module` the layer: from the traced chain if it is there, else unnamed."""
        for i, call in enumerate(self.modules):
            if call.module is module:
                self.modules = self.modules[i:]
                self.layer = call
                return
        call = ModuleCall(module=module, name=None, type=type(module).__name__)
        self.modules = [call, *self.modules]
        self.layer = call

    def builtin(self) -> bool:
        """The error was raised inside a torch.nn layer's own forward."""
        return self.layer_site is not None

    def layer_name(self) -> str | None:
        return self.layer.name if self.layer is not None else None

    def label(self, call: ModuleCall | None = None) -> str:
        call = call or self.layer
        if call is None:
            return ""
        text = summary(call.module, call.type)
        return f"`{call.name}` ({text})" if call.name else text

    def short(self, call: ModuleCall | None = None) -> str:
        call = call or self.layer
        if call is None:
            return ""
        return f"`{call.name}`" if call.name else f"the {call.type}"

    def chain(self) -> list[ChainEntry]:
        return [
            ChainEntry(name=c.name or f"<{c.type}>", type=c.type, summary=summary(c.module, c.type))
            for c in reversed(self.modules)
        ]

    def root_name(self) -> str:
        for c in reversed(self.modules):
            if c.name:
                return c.name.split(".", 1)[0].split("[", 1)[0]
        return "model"

    def code(self) -> str | None:
        return self.user_site.code() if self.user_site is not None else None

    def location(self) -> str | None:
        s = self.user_site
        if s is None:
            return None
        return f"{s.filename}:{s.lineno} in {s.function}"

    def context(self) -> str:
        """' in the forward of `model` (Net)', ' in `helper()`' or '' (top level)."""
        s = self.user_site
        if s is None:
            return ""
        if self.own_site is not None and self.layer is not None:
            if s.function == "forward":
                return f" in the forward of {self.label()}"
            return f" in `{s.function}()` of {self.label()}"
        if s.function.startswith("<"):
            return ""
        text = f" in `{s.function}()`"
        if self.layer is not None:
            text += f", called from the forward of {self.label()}"
        return text

    def subject(self) -> str:
        """How the message starts: the layer for builtin layers, else the failing code."""
        if self.builtin():
            return self.label()
        code = self.code()
        head = f"`{code}`" if code else "This line"
        return head + self.context()

    # ---- what --------------------------------------------------------------------------------
    def layer_tensors(self) -> list[TensorInfo]:
        """Tensor arguments of the builtin layer's forward (`input`, `target`), else the
        traced inputs."""
        if self.layer_site is not None:
            got = fr.local_tensors(self.layer_site, f"argument of {self.short()}")
            if got:
                return got
        if self.layer is not None:
            return list(self.layer.inputs)
        return []

    def layer_input(self) -> TensorInfo | None:
        ts = self.layer_tensors()
        for t in ts:
            if t.name in ("input", "query"):
                return t
        return ts[0] if ts else None

    def layer_arg(self, name: str) -> TensorInfo | None:
        """An argument of the builtin layer's forward, else of the functional (`target`)."""
        for group in (self.layer_tensors, self.functional_tensors):
            for t in group():
                if t.name == name:
                    return t
        return None

    def params(self) -> list[TensorInfo]:
        if self.layer is None or not self.builtin():
            return []
        return own_tensors(self.layer.module, self.layer.name)

    def param(self, name: str) -> TensorInfo | None:
        for t in self.params():
            if t.name.rsplit(".", 1)[-1] == name:
                return t
        return None

    def functional_tensors(self) -> list[TensorInfo]:
        s = self.functional_site
        if s is None:
            return []
        return fr.local_tensors(s, f"argument of `F.{s.function}`")

    def expression_tensors(self) -> list[TensorInfo]:
        if self._expr is None:
            self._expr = self.tensors_in(None)
        return self._expr

    def tensors_in(self, node: ast.AST | None) -> list[TensorInfo]:
        """Tensors named in `node`, a part of the failing expression (all of it if None)."""
        s = self.user_site
        if s is None:
            return []
        i = self.sites.index(s)
        in_comprehension = i > 0 and s.function in fr.COMPREHENSION_FRAMES  # its own frame (3.11)
        outer = self.sites[i - 1] if in_comprehension else None
        return fr.expression_tensors(s, outer, f"line {s.lineno}", tree=node)

    def operands(self) -> list[TensorInfo]:
        """The tensors the failing op most likely took: the builtin layer's arguments, a
        functional's arguments, else the tensors named on the failing expression."""
        if self.builtin():
            return self.layer_tensors()
        if self.functional_site is not None:
            got = self.functional_tensors()
            if got:
                return got
        return self.expression_tensors()

    def tensors(self) -> list[TensorInfo]:
        if self._tensors is None:
            seen: set[tuple[str, str]] = set()
            out = []
            # A functional under a builtin layer is its implementation: same tensors, new names.
            functional = [] if self.builtin() else self.functional_tensors()
            for t in self.operands() + self.params() + functional + self.expression_tensors():
                key = (t.name, t.role)
                if key not in seen:
                    seen.add(key)
                    out.append(t)
            self._tensors = out
        return self._tensors

    def producer(self, shape: list[int] | None) -> str:
        """' from `net.1`' when the module that returned just before the layer produced
        exactly this shape."""
        call = self.layer
        if call is None or shape is None or not call.previous or not call.previous_outputs:
            return ""
        if call.previous_outputs[0] != shape:
            return ""
        return f" from `{call.previous}`"

    def in_collate(self) -> bool:
        return any(s.is_collate() for s in self.sites)

    def is_loss(self) -> bool:
        if self.layer is not None and self.builtin() and self.layer.type.endswith("Loss"):
            return True
        s = self.functional_site
        return s is not None and ("loss" in s.function or "entropy" in s.function)
