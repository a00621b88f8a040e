"""The sync probe: how long the CPU waited for the device, per cell line.

`SyncProbe` is a runtime collector. While a checked cell runs it times every CPU-device
synchronisation and charges it to the innermost frame that belongs to the cell (code in
functions from earlier cells or libraries is charged to the cell line that called it). Its
`collect` fills `report.syncs` (one `SyncRecord` per line) and `report.sync_s`; TM303
(`runtime/rules/stalls.py`) reports the lines whose waits exceed the threshold.

Two backends share one ledger (`SyncLedger`: attribution through the cell's `CellLocator`,
and grouping):

*Portable* (`_SyncMode`, a `TorchFunctionMode`): sees every torch function and tensor method
call; a frozenset membership test lets everything but the sync-prone calls through at once
(about 1 µs per torch call on the bench machine, see bench/sync_overhead.py). Sync-prone
calls (`.item()`, `bool()`, `.tolist()`, `.cpu()`, masks, `nonzero`, `unique`, printing,
...) on a tensor whose device type is in `sync_devices` are timed whole. On a GPU such a
call's duration is the wait plus a tiny copy, so this alone would be a fair timer; but it
cannot see `torch.cuda.synchronize()`, `Event.synchronize()`, stream syncs, or syncs
hidden inside ops that are not on its list.

*CUDA* (`CudaSyncBackend`, only when `"cuda"` is in `sync_devices` and
`torch.cuda.is_available()`): PyTorch's GPU-trace callbacks (`torch.cuda._gpu_trace`, the
ones the CUDA sanitizer uses). c10 fires the device/stream/event-synchronisation callbacks
*before* it blocks in `cudaDeviceSynchronize`/`cudaStreamSynchronize`/`cudaEventSynchronize`
(`c10/cuda/CUDAFunctions.h`: `memcpy_and_sync`, `stream_synchronize`, `device_synchronize`),
so the callback can drain the device itself and time that drain; the user's own sync then
returns at once and the program's results and order of work are unchanged. A stream sync
drains only that stream; device and event syncs drain the device (for an event this is an
upper bound when other streams are busy). With the CUDA backend the function mode only
*names* the op (the callback charges its drained time to the op the mode is inside) and
drains before non-blocking copies from pageable host memory, which the trace misses.

Why not `torch.cuda.set_sync_debug_mode("warn")` with a warnings hook: the C++ warning
reaches Python only when the op returns, after the wait, so it cannot time anything; it
misses `torch.cuda.synchronize()`, event syncs and pageable non-blocking copies; it is
de-duplicated per line unless the user's warnings filters are changed; and it is a global
mode the user may have set. The cost of the trace: PyTorch 2.13 has no way to switch it off
from Python (`torch._C._activate_gpu_trace` is one-way), so from the first checked cell with
the CUDA backend on, every CUDA allocation, free and event in the process calls into Python
(an empty callback list when no cell is checked). It is therefore activated lazily, only then.

Syncs made by other threads (data-loader pinning threads) have no cell frame and are not
charged to a line. Nothing here initialises CUDA, changes results, or touches warnings.

`torch.compile`: dynamo traces through function modes, so a compiled function recompiles
once the first time it runs inside a checked cell; compiled graphs do not pass through the
mode when they run, so the mode sees syncs only at graph breaks (the CUDA trace callbacks
come from c10 and fire for compiled code too).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from torch.overrides import TorchFunctionMode

from ..report import SyncRecord
from .frames import CellLocator

if TYPE_CHECKING:
    from ..run import CellRun

_perf = time.perf_counter
Tensor = torch.Tensor

# --- which calls synchronise ------------------------------------------------------------

# (callable as it reaches __torch_function__, display name). Methods arrive as the
# `TensorBase` descriptors, so `Tensor.item` is the object we see.
_ALWAYS: tuple[tuple[Any, str], ...] = (
    (Tensor.item, "Tensor.item"),
    (Tensor.tolist, "Tensor.tolist"),
    (Tensor.__bool__, "Tensor.__bool__"),
    (Tensor.__float__, "Tensor.__float__"),
    (Tensor.__int__, "Tensor.__int__"),
    (Tensor.__index__, "Tensor.__index__"),
    (Tensor.__complex__, "Tensor.__complex__"),
    (Tensor.__repr__, "Tensor.__repr__"),
    (Tensor.__format__, "Tensor.__format__"),
    (Tensor.__array__, "Tensor.__array__"),
    (Tensor.numpy, "Tensor.numpy"),
    (Tensor.cpu, "Tensor.cpu"),
    (Tensor.nonzero, "Tensor.nonzero"),
    (torch.nonzero, "torch.nonzero"),
    (Tensor.argwhere, "Tensor.argwhere"),
    (torch.argwhere, "torch.argwhere"),
    (Tensor.masked_select, "Tensor.masked_select"),
    (torch.masked_select, "torch.masked_select"),
    (Tensor.unique, "Tensor.unique"),
    (torch.unique, "torch.unique"),
    (Tensor.unique_consecutive, "Tensor.unique_consecutive"),
    (torch.unique_consecutive, "torch.unique_consecutive"),
    (Tensor.equal, "Tensor.equal"),
    (torch.equal, "torch.equal"),
    (Tensor.allclose, "Tensor.allclose"),
    (torch.allclose, "torch.allclose"),
    (Tensor.bincount, "Tensor.bincount"),
    (torch.bincount, "torch.bincount"),
)
# Calls that synchronise only for some arguments (masks, tensor repeats, copies to the host).
_MASK_INDEXING = (
    (Tensor.__getitem__, "Tensor.__getitem__"),
    (Tensor.__setitem__, "Tensor.__setitem__"),
    (Tensor.index_put_, "Tensor.index_put_"),
    (Tensor.index_put, "Tensor.index_put"),
    (torch.index_put, "torch.index_put"),
    (torch.index_put_, "torch.index_put_"),
)
_REPEATS = ((Tensor.repeat_interleave, "Tensor.repeat_interleave"),)
_TORCH_REPEATS = ((torch.repeat_interleave, "torch.repeat_interleave"),)
_WHERE = ((torch.where, "torch.where"),)
_TO = ((Tensor.to, "Tensor.to"),)
_CUDA = ((Tensor.cuda, "Tensor.cuda"),)
_COPY = ((Tensor.copy_, "Tensor.copy_"),)

OP_NAMES: dict[Any, str] = dict(
    _ALWAYS + _MASK_INDEXING + _REPEATS + _TORCH_REPEATS + _WHERE + _TO + _CUDA + _COPY
)
SYNC_FUNCS: frozenset[Any] = frozenset(OP_NAMES)

_MASK_DTYPES = (torch.bool, torch.uint8)
_GETITEM = Tensor.__getitem__
_INDEX_CONTAINERS = (Tensor, tuple, list)


def _has_mask(index: Any) -> bool:
    if isinstance(index, Tensor):
        return index.dtype in _MASK_DTYPES
    if isinstance(index, (tuple, list)):
        return any(isinstance(i, Tensor) and i.dtype in _MASK_DTYPES for i in index)
    return False


def _target_device(args: tuple, kwargs: dict) -> torch.device | None:
    """The device of a `Tensor.to(...)` call, or None for a dtype-only conversion."""
    dev = kwargs.get("device")
    if dev is None:
        for a in args[1:3]:
            if isinstance(a, Tensor):
                return a.device
            if isinstance(a, (str, torch.device)) or (isinstance(a, int) and not isinstance(a, bool)):
                dev = a
                break
    if dev is None:
        return None
    try:
        return torch.device(dev)
    except (RuntimeError, TypeError):
        return None


def _pinned(t: Tensor) -> bool:
    try:
        return t.is_pinned()
    except RuntimeError:
        return False


def _transfer(src: Tensor, dst_type: str, non_blocking: bool, host: Tensor | None) -> str | None:
    """Device type a copy from `src` to a `dst_type` device waits on, or None if it does not.

    `host` is the CPU side of the copy when known (pinned memory makes non-blocking copies
    asynchronous in both directions).
    """
    src_type = src.device.type
    if dst_type == "cpu":
        if src_type != "cpu" and non_blocking and (host is None or _pinned(host)):
            return None  # D2H into pinned memory: asynchronous
        return src_type  # on "cpu" itself this is the portable stand-in for a D2H copy
    if src_type == "cpu":
        if non_blocking and _pinned(src):
            return None
        return dst_type  # blocking H2D, or non-blocking from pageable memory
    return None


def sync_device(func: Any, args: tuple, kwargs: dict) -> str | None:
    """The device type whose queue this call waits for, or None if it does not sync."""
    if not args:
        return None
    first = args[0]
    if func in _ALWAYS_SET:
        if isinstance(first, Tensor):
            return first.device.type
        for a in args:
            if isinstance(a, Tensor):
                return a.device.type
        return None
    if not isinstance(first, Tensor):
        return None
    if func in _MASK_SET:
        index = args[1] if len(args) > 1 else kwargs.get("indices")
        return first.device.type if _has_mask(index) else None
    if func in _REPEAT_SET:
        repeats = args[1] if len(args) > 1 else kwargs.get("repeats")
        if isinstance(repeats, Tensor) and kwargs.get("output_size") is None:
            return first.device.type
        return None
    if func in _TORCH_REPEAT_SET:
        if len(args) == 1:  # torch.repeat_interleave(repeats)
            return first.device.type
        repeats = args[1] if len(args) > 1 else kwargs.get("repeats")
        if isinstance(repeats, Tensor) and kwargs.get("output_size") is None:
            return first.device.type
        return None
    if func in _WHERE_SET:
        return first.device.type if len(args) == 1 and not kwargs else None
    non_blocking = bool(kwargs.get("non_blocking", False))
    if func in _TO_SET:
        target = _target_device(args, kwargs)
        if target is None or target.type == first.device.type != "cpu":
            return None
        return _transfer(first, target.type, non_blocking, None)
    if func in _CUDA_SET:
        if len(args) > 2:
            non_blocking = bool(args[2])
        return _transfer(first, "cuda", non_blocking, None) if first.device.type == "cpu" else None
    if func in _COPY_SET:
        src = args[1] if len(args) > 1 else kwargs.get("src")
        if len(args) > 2:
            non_blocking = bool(args[2])
        if not isinstance(src, Tensor) or src.device.type == first.device.type != "cpu":
            return None
        if first.device.type == "cpu" and src.device.type == "cpu":
            return None
        return _transfer(src, first.device.type, non_blocking, first if src.is_cuda else src)
    return None


_ALWAYS_SET = frozenset(f for f, _ in _ALWAYS)
_MASK_SET = frozenset(f for f, _ in _MASK_INDEXING)
_REPEAT_SET = frozenset(f for f, _ in _REPEATS)
_TORCH_REPEAT_SET = frozenset(f for f, _ in _TORCH_REPEATS)
_WHERE_SET = frozenset(f for f, _ in _WHERE)
_TO_SET = frozenset(f for f, _ in _TO)
_CUDA_SET = frozenset(f for f, _ in _CUDA)
_COPY_SET = frozenset(f for f, _ in _COPY)


# --- attribution --------------------------------------------------------------------------


class SyncLedger:
    """Charges timed syncs to cell lines (the innermost frame in the cell's code)."""

    def __init__(self, locator: CellLocator) -> None:
        self.locator = locator
        self.thread = threading.get_ident()
        self.by_line: dict[int, list[Any]] = {}  # line -> [count, seconds, {op: count}]
        self.outside_s = 0.0

    def add(self, op: str, seconds: float, frame: Any) -> None:
        line = self.locator.line(frame)
        if line is None:
            self.outside_s += seconds
            return
        entry = self.by_line.get(line)
        if entry is None:
            entry = self.by_line[line] = [0, 0.0, {}]
        entry[0] += 1
        entry[1] += seconds
        ops = entry[2]
        ops[op] = ops.get(op, 0) + 1

    def records(self, lines: list[str]) -> list[SyncRecord]:
        out = []
        for line in sorted(self.by_line):
            count, seconds, ops = self.by_line[line]
            code = lines[line - 1].strip() if 0 < line <= len(lines) else ""
            out.append(SyncRecord(line=line, count=count, seconds=seconds, ops=dict(ops), code=code))
        return out


# --- CUDA backend ----------------------------------------------------------------------------

Drain = Callable[[str, int | None], None]


def cuda_drain(kind: str, handle: int | None) -> None:
    """Wait for the work a sync of `kind` waits for (a stream's queue, else the device)."""
    if torch.cuda.is_current_stream_capturing():
        return  # a sync during graph capture fails on its own; draining here would too
    if kind == "stream" and handle:
        try:
            torch.cuda.ExternalStream(handle).synchronize()
            return
        except (RuntimeError, ValueError, TypeError):
            pass
    torch.cuda.synchronize()


def activate_gpu_trace() -> None:
    torch._C._activate_gpu_trace()


_KIND_NAMES = {
    "device": "cudaDeviceSynchronize",
    "stream": "cudaStreamSynchronize",
    "event": "cudaEventSynchronize",
}


class CudaSyncBackend:
    """GPU-trace synchronisation callbacks that drain the device themselves and time it.

    `drain(kind, handle)` is injectable: tests (no GPU) pass a function that sleeps and fire
    the callbacks through `torch.cuda._gpu_trace` the way c10 would.
    """

    def __init__(
        self, ledger: SyncLedger, drain: Drain = cuda_drain, activate: Callable[[], None] = activate_gpu_trace
    ) -> None:
        self.ledger = ledger
        self.drain = drain
        self.activate = activate
        self.current_op: str | None = None
        self._draining = False
        self._callbacks: list[tuple[Any, Any]] = []

    def install(self) -> None:
        import torch.cuda._gpu_trace as gpu_trace

        self.activate()
        self._callbacks = [
            (gpu_trace.DeviceSynchronizationCallbacks, self._on_device),
            (gpu_trace.StreamSynchronizationCallbacks, self._on_stream),
            (gpu_trace.EventSynchronizationCallbacks, self._on_event),
        ]
        for registry, cb in self._callbacks:
            registry.add_callback(cb)

    def uninstall(self) -> None:
        for registry, cb in self._callbacks:
            lst = registry.callback_list
            for i in range(len(lst) - 1, -1, -1):
                if lst[i] is cb:
                    del lst[i]
        self._callbacks = []

    def _on_device(self) -> None:
        self._sync("device", None)

    def _on_stream(self, stream: int) -> None:
        self._sync("stream", stream)

    def _on_event(self, event: int) -> None:
        self._sync("event", event)

    def _sync(self, kind: str, handle: int | None, op: str | None = None) -> None:
        # Our own drain fires these callbacks again; other threads are not the cell's.
        if self._draining or threading.get_ident() != self.ledger.thread:
            return
        self._draining = True
        try:
            t0 = _perf()
            self.drain(kind, handle)
            seconds = _perf() - t0
        finally:
            self._draining = False
        self.ledger.add(op or self.current_op or _KIND_NAMES[kind], seconds, sys._getframe(1))

    def stall(self, op: str) -> None:
        """A stall the trace does not report (a non-blocking copy from pageable memory)."""
        stream = torch.cuda.current_stream()
        self._sync("stream", stream.cuda_stream, op)


# --- portable backend ------------------------------------------------------------------------


class _SyncMode(TorchFunctionMode):
    """Times sync-prone calls on `timed` devices; names them for the CUDA backend on `traced`."""

    def __init__(
        self,
        ledger: SyncLedger,
        timed: frozenset[str],
        traced: frozenset[str] = frozenset(),
        backend: CudaSyncBackend | None = None,
    ) -> None:
        super().__init__()
        self.ledger = ledger
        self.timed = timed
        self.traced = traced
        self.backend = backend

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func not in SYNC_FUNCS:
            if kwargs:
                return func(*args, **kwargs)
            return func(*args)
        if func is _GETITEM and not isinstance(args[1], _INDEX_CONTAINERS):
            return func(*args)  # x[i], x[1:3]: the common, sync-free indexing
        return self._sync_prone(func, args, kwargs or {})

    def _sync_prone(self, func: Any, args: tuple, kwargs: dict) -> Any:
        device = sync_device(func, args, kwargs)
        if device in self.timed:
            t0 = _perf()
            out = func(*args, **kwargs)
            self.ledger.add(OP_NAMES[func], _perf() - t0, sys._getframe(1))
            return out
        backend = self.backend
        if device in self.traced and backend is not None:
            name = OP_NAMES[func]
            if _is_async_pageable_copy(func, args, kwargs):
                backend.stall(name)
            previous = backend.current_op
            backend.current_op = name
            try:
                return func(*args, **kwargs)
            finally:
                backend.current_op = previous
        return func(*args, **kwargs)


def _is_async_pageable_copy(func: Any, args: tuple, kwargs: dict) -> bool:
    non_blocking = bool(kwargs.get("non_blocking", False))
    if func in _COPY_SET:
        src = args[1] if len(args) > 1 else kwargs.get("src")
        if len(args) > 2:
            non_blocking = bool(args[2])
    else:
        src = args[0]
        if func in _CUDA_SET and len(args) > 2:
            non_blocking = bool(args[2])
    return (
        non_blocking
        and isinstance(src, Tensor)
        and src.device.type == "cpu"
        and func in (_TO_SET | _CUDA_SET | _COPY_SET)
        and not _pinned(src)
    )


def _remove_mode(mode: TorchFunctionMode) -> None:
    """Take `mode` off this thread's function-mode stack, wherever it is, keeping the rest."""
    from torch._C import (
        _get_function_stack_at,
        _len_torch_function_stack,
        _pop_torch_function_stack,
        _push_on_torch_function_stack,
    )

    n = _len_torch_function_stack()
    if not any(_get_function_stack_at(i) is mode for i in range(n)):
        return
    above = []
    while _len_torch_function_stack():
        m = _pop_torch_function_stack()
        if m is mode:
            break
        above.append(m)
    for m in reversed(above):
        _push_on_torch_function_stack(m)


# --- the collector ---------------------------------------------------------------------------


class SyncProbe:
    """Collector: times CPU-device synchronisations per cell line (see module docstring)."""

    name = "sync"

    def __init__(
        self,
        *,
        cuda_drain: Drain | None = None,
        cuda_available: Callable[[], bool] | None = None,
        activate_trace: Callable[[], None] | None = None,
    ) -> None:
        self._drain = cuda_drain or globals()["cuda_drain"]
        self._cuda_available = cuda_available or torch.cuda.is_available
        self._activate = activate_trace or activate_gpu_trace
        self._trace_active = False
        self._ledger: SyncLedger | None = None
        self._mode: _SyncMode | None = None
        self._backend: CudaSyncBackend | None = None

    def _activate_once(self) -> None:
        if not self._trace_active:
            self._activate()
            self._trace_active = True

    def start(self, run: CellRun) -> None:
        self.stop(run)
        self._ledger = None
        devices = frozenset(run.options.sync_devices)
        if not devices:
            return
        self._ledger = ledger = SyncLedger(run.locator)
        traced: frozenset[str] = frozenset()
        try:
            if "cuda" in devices:
                if self._cuda_available():
                    backend = CudaSyncBackend(ledger, self._drain, self._activate_once)
                    self._backend = backend
                    backend.install()
                    traced = frozenset({"cuda"})
                else:  # no CUDA tensor can exist: nothing to time, no per-op cost
                    devices = devices - {"cuda"}
            if not devices:
                return
            mode = _SyncMode(ledger, devices - traced, traced, self._backend)
            torch._C._push_on_torch_function_stack(mode)
            self._mode = mode
        except Exception as exc:  # a probe that cannot start must not break the cell
            self.stop(run)
            run.report.errors.append(f"sync probe: could not start: {exc!r}")

    def stop(self, run: CellRun | None = None) -> None:
        mode, self._mode = self._mode, None
        backend, self._backend = self._backend, None
        if mode is not None:
            _remove_mode(mode)
        if backend is not None:
            backend.uninstall()

    def collect(self, run: CellRun) -> None:
        ledger, self._ledger = self._ledger, None
        if ledger is None:
            return
        records = ledger.records(run.lines)
        run.report.syncs = records
        run.report.sync_s = sum(r.seconds for r in records)
