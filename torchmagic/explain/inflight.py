"""InFlight: the stack of module forwards running when an exception was raised.

Two global module hooks, installed only between `start` and `stop`: a forward pre-hook pushes
(module, input metadata) and an `always_call` forward hook pops. When a forward raises,
PyTorch calls an always_call hook from its `except` block with three arguments instead of
four (it leaves out the kwargs), so the first such call for an exception sees the whole
stack: that snapshot, innermost first, is what `explain()` takes as `modules`. The real
ShapeTracer can feed the same `ModuleCall`s; this one is small enough for tests and scripts.
"""

from __future__ import annotations

import sys
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

from torch.nn.modules import module as _module_mod

from ..live import meta
from ..runtime.shapes import tensor_shapes
from .records import ModuleCall, TensorInfo, tensor_info

MAX_INPUTS = 8


@dataclass
class _Entry:
    module: Any
    inputs: list[TensorInfo]
    previous: Any = None  # weakref to the module that returned last before this call
    previous_outputs: list[list[int]] = field(default_factory=list)


class InFlight:
    """Records the in-flight module stack; `calls(exc, names)` gives it as `ModuleCall`s."""

    def __init__(self) -> None:
        self._handles: list[Any] = []
        self._stack: list[_Entry] = []
        self._last: tuple[Any, list[list[int]]] | None = None
        self._exc: BaseException | None = None
        self._snapshot: list[_Entry] = []
        self._thread = threading.get_ident()

    # ---- lifecycle ---------------------------------------------------------------------------
    def start(self) -> InFlight:
        """Install the hooks; only forwards on the calling thread are recorded."""
        self.stop()
        self._thread = threading.get_ident()
        self._handles = [
            _module_mod.register_module_forward_pre_hook(self._pre),
            _module_mod.register_module_forward_hook(self._post, with_kwargs=True, always_call=True),
        ]
        return self

    def stop(self) -> None:
        handles, self._handles = self._handles, []
        for h in handles:
            h.remove()
        self._stack = []
        self._last = None

    def clear(self) -> None:
        """Drop the snapshot (it holds the failing modules and the exception)."""
        self._exc = None
        self._snapshot = []

    def __enter__(self) -> InFlight:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ---- hooks -------------------------------------------------------------------------------
    def _pre(self, module: Any, args: Any) -> None:
        if meta.is_compiling() or threading.get_ident() != self._thread:
            return None
        try:
            inputs: list[TensorInfo] = []
            for i, v in enumerate(args[:MAX_INPUTS] if type(args) is tuple else ()):
                info = tensor_info("input" if i == 0 else f"input[{i}]", v, "traced")
                if info is not None:
                    inputs.append(info)
            prev, outs = self._last if self._last is not None else (None, [])
            self._stack.append(_Entry(module, inputs, prev, outs))
        except Exception:
            pass
        return None

    def _post(self, module: Any, args: Any, *rest: Any) -> None:
        if meta.is_compiling() or threading.get_ident() != self._thread:
            return None
        try:
            if len(rest) == 1:  # PyTorch's failure path: the forward raised
                exc = sys.exc_info()[1]
                if exc is not None and exc is not self._exc:
                    self._exc = exc
                    self._snapshot = list(reversed(self._stack))
            else:
                self._last = (weakref.ref(module), tensor_shapes(rest[-1])[0])
            for i in range(len(self._stack) - 1, -1, -1):
                if self._stack[i].module is module:
                    del self._stack[i:]
                    break
        except Exception:
            pass
        return None

    # ---- results -----------------------------------------------------------------------------
    def calls(self, exc: BaseException, names: dict[int, str] | None = None) -> list[ModuleCall]:
        """The modules in flight when `exc` was raised, innermost first ([] if another)."""
        if exc is not self._exc:
            return []
        names = names or {}
        out = []
        for e in self._snapshot:
            prev = e.previous() if e.previous is not None else None
            out.append(
                ModuleCall(
                    module=e.module,
                    name=names.get(id(e.module)),
                    type=type(e.module).__name__,
                    inputs=e.inputs,
                    previous=names.get(id(prev)) if prev is not None else None,
                    previous_outputs=e.previous_outputs,
                )
            )
        return out


def module_names(**roots: Any) -> dict[int, str]:
    """id(module) -> the name a user would type, for the given root modules (`net=net`)."""
    from .names import module_names as _names

    return _names(roots)
