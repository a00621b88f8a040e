"""ShapeTracer: the input and output shapes of every submodule that ran a forward pass.

Two global module hooks (`register_module_forward_pre_hook` and an `always_call` forward
hook) are installed for the cell only and always removed in `stop`. During the cell the
tracer keeps, per module, a weak reference and metadata (shapes, dtype, device, call
count); the names a user would type (`net.encoder.0`) are resolved once, at `stop`, by
walking the namespace's modules. Repeated calls only bump a counter, so the cost per module
call stays around a microsecond or two on top of PyTorch's own hook dispatch.
"""

from __future__ import annotations

import warnings
import weakref
from itertools import islice
from typing import Any

import torch
from torch.nn.modules import module as _module_mod

from ..live import meta
from ..report import ShapeRecord

MAX_MODULES = 5000  # distinct modules traced per cell
MAX_TENSORS = 16  # tensors listed per input/output

_device = meta.device
_dtype = meta.dtype
_is_compiling = meta.is_compiling
_size = meta.size

_Tensor = torch.Tensor


# torch.compile warns when global module hooks exist; those are ours, for this cell only.
_COMPILE_WARNING = r"Using `torch.compile\(module\)` when there are global hooks"


def quiet_compile_warning() -> Any:
    """Silence that one warning while our hooks are installed; returns the filter to remove."""
    warnings.filterwarnings("ignore", message=_COMPILE_WARNING, category=UserWarning)
    return warnings.filters[0]


def restore_warnings(entry: Any) -> None:
    try:
        warnings.filters.remove(entry)
        mutated = getattr(warnings, "_filters_mutated", None)
        if mutated is not None:
            mutated()
    except (ValueError, AttributeError):
        pass


def remove_after_cell(shell: Any, remove: Any) -> None:
    """Safety net: `remove()` on the shell's next `post_run_cell`, even if `stop` never comes
    (a failure in the caller between start and stop must not leave global hooks behind)."""
    events = getattr(shell, "events", None)
    if events is None:
        return

    def once(*args: Any) -> None:
        try:
            events.unregister("post_run_cell", once)
        except Exception:
            pass
        remove()

    try:
        events.register("post_run_cell", once)
    except Exception:
        pass


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


class ShapeTracer:
    """Collector: per-submodule shapes of the forward passes in the cell, in first-call order."""

    name = "shape_tracer"

    def __init__(self, config: Any = None) -> None:
        self.config = config
        self._handles: list[Any] = []
        self._warning_filter: Any = None
        self._calls: dict[int, _Call] = {}
        self._depth = 0

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self, run: Any) -> None:
        self._remove()
        self._calls = {}
        self._depth = 0
        if not getattr(run.config, "trace_shapes", True):
            return
        self._warning_filter = quiet_compile_warning()
        self._handles = [
            _module_mod.register_module_forward_pre_hook(self._pre),
            _module_mod.register_module_forward_hook(self._post, with_kwargs=True, always_call=True),
        ]
        remove_after_cell(run.shell, self._remove)

    def stop(self, run: Any) -> None:
        self._remove()
        calls, self._calls = self._calls, {}
        if calls:
            run.report.shape_trace.extend(self.records(calls.values(), run.shell))

    def _remove(self) -> None:
        entry, self._warning_filter = self._warning_filter, None
        if entry is not None:
            restore_warnings(entry)
        handles, self._handles = self._handles, []
        for h in handles:
            try:
                h.remove()
            except Exception:
                pass

    # ---- the hooks (must never raise into the user's forward) -------------------------------
    def _pre(self, module: Any, args: Any) -> None:
        if _is_compiling():  # inside torch.compile tracing: stay out of the graph (no breaks)
            return None
        depth = self._depth
        self._depth = depth + 1
        try:
            rec = self._calls.get(id(module))
            if rec is not None and rec.ref() is module:
                rec.calls += 1
                return None
            if len(self._calls) >= MAX_MODULES:
                return None
            inputs, _ = tensor_shapes(args)
            self._calls[id(module)] = _Call(module, inputs, depth)
        except Exception:
            pass
        return None

    def _post(self, module: Any, args: Any, *rest: Any) -> None:
        # (kwargs, output) normally; just (output) when PyTorch calls an always_call hook
        # after the forward raised, where it leaves out the kwargs.
        if _is_compiling():
            return None
        self._depth = max(0, self._depth - 1)
        try:
            rec = self._calls.get(id(module))
            if rec is None or rec.outputs is not None or rec.ref() is not module:
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

    # ---- names -------------------------------------------------------------------------------
    @staticmethod
    def records(calls: Any, shell: Any) -> list[ShapeRecord]:
        from ..live.scan import module_names

        ns = getattr(shell, "user_ns", None)
        hidden = getattr(shell, "user_ns_hidden", None)
        try:
            names = module_names(ns, hidden) if isinstance(ns, dict) else {}
        except Exception:
            names = {}
        out = []
        for rec in calls:
            obj = rec.ref()
            name = names.get(id(obj)) if obj is not None else None
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
