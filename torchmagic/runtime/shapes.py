"""ShapeTracer: the input and output shapes of every submodule that ran a forward pass.

Two global module hooks (`register_module_forward_pre_hook` and an `always_call` forward
hook) are installed for the cell only and always removed in `stop`. During the cell the
tracer keeps, per module, a weak reference and metadata (shapes, dtype, device, call
count); the names a user would type (`net.encoder.0`) are resolved once, at `stop`, by
walking the namespace's modules. Repeated calls only bump a counter, so the cost per module
call stays around a microsecond or two on top of PyTorch's own hook dispatch.

Under `torch.compile` the hooks step aside while Dynamo compiles (`hooks.aside_while_compiling`):
what it compiles is what it would compile without them. Compiled code does not call them for
the submodules it inlined, so a compiled model shows as one call of its top module.
"""

from __future__ import annotations

import sys
import weakref
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING, Any

import torch
from torch.nn.modules import module as _module_mod

from ..live import meta
from ..report import ShapeRecord
from .hooks import (
    _paused,
    aside_while_compiling,
    keep_out_of_dynamo,
    quiet_compile_warning,
    remove_handles,
    restore_warnings,
)

if TYPE_CHECKING:
    from ..run import CellRun
    from .modes import ModeRecorder

MAX_MODULES = 5000  # distinct modules traced per cell
MAX_TENSORS = 16  # tensors listed per input/output

_device = meta.device
_dtype = meta.dtype
_is_compiling = meta.is_compiling
_size = meta.size

_Tensor = torch.Tensor


def tensor_shapes(value: Any, limit: int = MAX_TENSORS) -> tuple[list[list[int]], Any]:
    """Shapes of the tensors in `value` (tuples, lists, dicts, nested), and the first tensor."""
    shapes: list[list[int]] = []
    first = None
    stack = [(value, 0)]
    while stack and len(shapes) < limit:
        v, depth = stack.pop()
        tp = type(v)
        if issubclass(tp, _Tensor):
            try:
                shapes.append([d if type(d) is int else -1 for d in _size(v)])
            except Exception:
                shapes.append([])
            if first is None:
                first = v
        elif depth < 4:
            if issubclass(tp, list):
                it = list.__iter__(v)
            elif issubclass(tp, tuple):
                it = tuple.__iter__(v)
            elif issubclass(tp, dict):
                it = iter(dict.values(v))
            else:
                continue
            items = list(islice(it, limit))  # a forward called with 10,000 tensors stays O(limit)
            stack.extend((i, depth + 1) for i in reversed(items))
    return shapes, first


class _Call:
    __slots__ = ("calls", "depth", "device", "dtype", "inputs", "outputs", "ref", "type")

    def __init__(self, module: Any, inputs: list[list[int]], depth: int) -> None:
        self.ref = weakref.ref(module)
        self.type = type(module).__name__
        self.calls = 1
        self.inputs = inputs
        self.outputs: list[list[int]] | None = None
        self.depth = depth
        self.dtype: str | None = None
        self.device: str | None = None


@dataclass
class InFlightRecord:
    """The forwards running when an exception was raised in the cell, innermost first, as
    (module, args, id of the module that returned just before it). Strong references: held
    only until the cell's report is built."""

    exc: BaseException
    stack: list[tuple[Any, Any, int | None]]
    calls: dict[int, _Call]  # what the tracer recorded, for the output shapes of the producer

    def outputs_of(self, module_id: int | None) -> list[list[int]]:
        rec = self.calls.get(module_id) if module_id is not None else None
        return (rec.outputs or []) if rec is not None else []


class ShapeTracer:
    """Collector: per-submodule shapes of the forward passes in the cell, in first-call order."""

    name = "shape_tracer"

    def __init__(self, modes: ModeRecorder | None = None) -> None:
        self._handles: list[Any] = []
        self._aside: Any = None  # removes the compile callbacks that pause the hooks
        self._warning_filter: Any = None
        self._calls: dict[int, _Call] = {}
        # the mode recorder (TM505/TM506/TM901) shares these hooks: one global pre-hook for both
        self._modes = modes
        self._shapes = True
        self._reset_flight()

    def _reset_flight(self) -> None:
        # (module, args, id of the module that returned just before) for each running forward
        self._flight: list[tuple[Any, Any, int | None]] = []
        self._last_id: int | None = None
        self._failed_with: BaseException | None = None
        self._failure: list[tuple[Any, Any, int | None]] = []

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self, run: CellRun) -> None:
        self.stop(run)
        self._calls = {}
        self._reset_flight()
        # without shape records the hooks still serve the mode checks and TM001's module chain
        self._shapes = run.options.trace_shapes
        self._warning_filter = quiet_compile_warning()
        self._install()
        keep_out_of_dynamo(self._pre, self._post)
        self._aside = aside_while_compiling(self._uninstall, self._install)

    def _install(self) -> None:
        if self._handles:
            return
        self._handles = [
            _module_mod.register_module_forward_pre_hook(self._pre),
            _module_mod.register_module_forward_hook(self._post, with_kwargs=True, always_call=True),
        ]

    def _uninstall(self) -> None:
        handles, self._handles = self._handles, []
        remove_handles(handles)

    def stop(self, run: CellRun | None = None) -> None:
        aside, self._aside = self._aside, None
        if aside is not None:
            aside()
        entry, self._warning_filter = self._warning_filter, None
        if entry is not None:
            restore_warnings(entry)
        self._uninstall()

    def collect(self, run: CellRun) -> None:
        calls, self._calls = self._calls, {}
        if self._failed_with is not None:
            run.records.inflight = InFlightRecord(self._failed_with, self._failure, calls)
        self._reset_flight()
        if calls:
            run.report.shape_trace.extend(self.records(calls.values(), run.snapshot().module_names()))

    # ---- the hooks (must never raise into the user's forward) -------------------------------
    # Every module call runs these: they are written for the common case (a module seen
    # before, not a Dropout/BatchNorm/conv) to cost as little above PyTorch's own hook dispatch
    # as two Python calls can.
    def _pre(self, module: Any, args: Any) -> None:
        if _paused.depth or _is_compiling():  # compiling: stay out of the graph (no breaks)
            return None
        flight = self._flight
        depth = len(flight)
        # what is running now, for the explanation of an error raised inside it (TM001)
        flight.append((module, args, self._last_id))
        modes = self._modes
        if modes is not None:
            k = modes._kinds.get(type(module))
            if k is None:
                k = modes.kind_of(type(module))
            if k:
                modes.observe(module, args, k)
        if not self._shapes:
            return None
        rec = self._calls.get(id(module))
        if rec is not None and rec.ref() is module:
            rec.calls += 1
            return None
        try:
            if len(self._calls) < MAX_MODULES:
                inputs, _ = tensor_shapes(args)
                self._calls[id(module)] = _Call(module, inputs, depth)
        except Exception:
            pass
        return None

    def _post(self, module: Any, args: Any, *rest: Any) -> None:
        # (kwargs, output) normally; just (output) when PyTorch calls an always_call hook
        # after the forward raised, where it leaves out the kwargs.
        if _paused.depth or _is_compiling():
            return None
        flight = self._flight
        if len(rest) == 1:
            exc = sys.exc_info()[1]
            if exc is not None and exc is not self._failed_with:
                # the innermost forward that raised sees the whole chain: keep it
                self._failed_with = exc
                self._failure = list(reversed(flight))
        else:
            self._last_id = id(module)
        if flight and flight[-1][0] is module:
            flight.pop()
        else:
            for i in range(len(flight) - 1, -1, -1):
                if flight[i][0] is module:
                    del flight[i:]
                    break
        if not self._shapes:
            return None
        rec = self._calls.get(id(module))
        if rec is None or rec.outputs is not None:
            return None
        try:
            if rec.ref() is not module:
                return None
            output = rest[-1] if rest else None
            if not rec.inputs and len(rest) == 2 and rest[0]:
                rec.inputs, _ = tensor_shapes(rest[0])  # keyword-only inputs (`model(input_ids=...)`)
            rec.outputs, first = tensor_shapes(output)
            if first is not None:
                rec.dtype = str(_dtype(first)).removeprefix("torch.")
                rec.device = str(_device(first))
        except Exception:
            pass
        return None

    # ---- records ---------------------------------------------------------------------------
    @staticmethod
    def records(calls: Any, names: dict[int, tuple[str, str]]) -> list[ShapeRecord]:
        out = []
        for rec in calls:
            obj = rec.ref()
            name = names.get(id(obj), (None, None))[0] if obj is not None else None
            out.append(
                ShapeRecord(
                    module=name or f"<{rec.type}>",
                    type=rec.type,
                    calls=rec.calls,
                    inputs=rec.inputs,
                    outputs=rec.outputs or [],
                    device=rec.device,
                    dtype=rec.dtype,
                    depth=rec.depth,
                )
            )
        return out
