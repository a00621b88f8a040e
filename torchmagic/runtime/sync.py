"""The sync probe: how long the CPU waited for the device, per cell line.

`SyncProbe` is a runtime collector. While a checked cell runs it times every CPU-device
synchronisation and charges it to the innermost frame that belongs to the cell (code in
functions from earlier cells or libraries is charged to the cell line that called it). Its
`collect` fills `report.syncs` (one `SyncRecord` per line) and `report.sync_s`; TM303
(`runtime/rules/stalls.py`) reports the lines whose waits exceed the threshold.

Two parts share one ledger (`SyncLedger`: attribution through the cell's `CellLocator`, and
grouping), both installed for the checked cell only:

*Sync-prone calls* (`SyncWrappers`): `.item()`, `bool()`, `float()`, `.tolist()`, `.cpu()`,
`.numpy()`, boolean masks, `nonzero`, `unique`, printing, blocking or pageable `non_blocking`
host-device copies, ... — the `Tensor` methods and `torch` functions in `OP_NAMES` are wrapped
in place, and a call on a tensor whose device type is in `sync_devices` is timed whole: on a
GPU such a call's duration is the wait for the queued work plus a small copy. Every other
torch call runs untouched: a `TorchFunctionMode` would see them all, and its Python dispatch
on every op added 15-20% to a launch-bound training step (bench/cell_cost.py).

*Explicit syncs* (`ExplicitSyncs`, when CUDA is in `sync_devices` and available):
`torch.cuda.synchronize()`, `Stream.synchronize()`, `Event.synchronize()` and
`torch.accelerator.synchronize()` are wrapped in place while the cell runs and timed; they
are put back when it ends.

Why not PyTorch's GPU-trace callbacks (`torch.cuda._gpu_trace`): `torch._C._activate_gpu_trace`
cannot be undone, so after the first checked cell every CUDA allocation, free and event in
the process would call into Python: a loop of small CUDA allocations ran 2.9× slower in every
later cell, checked or not, even after `%unload_ext`. Why not
`torch.cuda.set_sync_debug_mode("warn")`: the warning reaches Python after the wait, so it
times nothing; it misses explicit syncs and pageable copies; and it is a global mode the
user may have set.

A call that starts CUDA in the process (the first `.cuda()` of a notebook, say) is not
charged: nothing can be queued on a GPU before CUDA starts, so its time is CUDA's own
start-up (hundreds of ms), not a wait the user could remove.

Syncs made by other threads (data-loader pinning threads) have no cell frame and are not
charged to a line. Nothing here initialises CUDA, changes results, or touches warnings.

`torch.compile`: a call traced by dynamo goes straight to the original method; compiled
graphs do not pass through the wrappers when they run, so only syncs at graph breaks are
timed. Dynamo guards on the identity of the `torch.*` functions a compiled function calls
(`torch.where`, `torch.nonzero`, `torch.cuda.synchronize`): replacing them for one cell would
compile such a function again in that cell and again in the next. So in a cell that may
compile or run compiled code (`hooks.compile_in_play`) only the `Tensor` methods (and
Stream/Event methods) are wrapped, which Dynamo resolves by name: there `torch.nonzero(x)`
is not timed, `x.nonzero()` is.
"""

from __future__ import annotations

import functools
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from ..live import meta
from ..report import SyncRecord
from .frames import CellLocator
from .hooks import aside_while_compiling, compile_in_play, keep_out_of_dynamo

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
_SETITEM = Tensor.__setitem__
_is_compiling = meta.is_compiling
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


Saved = list[tuple[Any, str, Any, bool]]  # (owner, attribute, original, the owner's own)


def _restore(saved: Saved) -> None:
    """Put back what a wrapper replaced, last first: the owner's own attribute, or, where the
    owner only inherited it (a method of `TensorBase` seen through `Tensor`), remove the override
    so the inherited one shows again."""
    for owner, attr, original, own in reversed(saved):
        try:
            if own:
                setattr(owner, attr, original)
            else:
                delattr(owner, attr)
        except Exception:
            pass


class SyncLedger:
    """Charges timed syncs to cell lines (the innermost frame in the cell's code)."""

    def __init__(self, locator: CellLocator) -> None:
        self.locator = locator
        self.thread = threading.get_ident()
        self.by_line: dict[int, list[Any]] = {}  # line -> [count, seconds, {op: count}]
        self.outside_s = 0.0
        self.cuda_started = False

    def starts_cuda(self) -> bool:
        """Whether CUDA has not started in this process yet, so that the CUDA call about to run
        starts it and has no queued GPU work to wait for."""
        if not self.cuda_started:
            self.cuda_started = torch.cuda.is_initialized()
        return not self.cuda_started

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


# --- explicit synchronisation calls --------------------------------------------------------

# Python functions and methods that block the CPU until device work is done: wrapped for the
# checked cell only (and always put back), so nothing is left behind for later cells.
EXPLICIT_SYNCS: tuple[tuple[str, str, str], ...] = (
    ("torch.cuda", "synchronize", "torch.cuda.synchronize"),
    ("torch.cuda.Stream", "synchronize", "Stream.synchronize"),
    ("torch.cuda.Event", "synchronize", "Event.synchronize"),
    ("torch.accelerator", "synchronize", "torch.accelerator.synchronize"),
)


def _resolve(path: str) -> Any:
    obj: Any = torch
    for part in path.split(".")[1:]:
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


class ExplicitSyncs:
    """Times `torch.cuda.synchronize()`, `Stream.synchronize()`, `Event.synchronize()` (and
    `torch.accelerator.synchronize()`) while a cell runs: each call is wrapped in place and
    restored by `uninstall`. Calls from other threads pass straight through."""

    def __init__(
        self, ledger: SyncLedger, targets: tuple[tuple[str, str, str], ...] = EXPLICIT_SYNCS
    ) -> None:
        self.ledger = ledger
        self.targets = targets
        # (owner, attribute, original, whether the owner itself defined it)
        self._saved: Saved = []

    def install(self, module_functions: bool = True) -> None:
        for owner_path, attr, label in self.targets:
            owner = _resolve(owner_path)
            if owner is None or (not module_functions and not isinstance(owner, type)):
                continue
            own = isinstance(owner, type) and attr in owner.__dict__
            original = owner.__dict__[attr] if own else getattr(owner, attr, None)
            if original is None:
                continue
            timed = self._timed(original, label)
            setattr(owner, attr, timed)
            self._saved.append((owner, attr, original, own or not isinstance(owner, type)))
            keep_out_of_dynamo(timed)

    def uninstall(self) -> None:
        saved, self._saved = self._saved, []
        _restore(saved)

    def _timed(self, original: Any, label: str) -> Any:
        ledger = self.ledger

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True  # noqa: F841  (IPython hides this frame in tracebacks)
            if threading.get_ident() != ledger.thread or ledger.starts_cuda():
                return original(*args, **kwargs)
            t0 = _perf()
            try:
                return original(*args, **kwargs)
            finally:
                ledger.add(label, _perf() - t0, sys._getframe(1))

        return timed


# --- portable backend ------------------------------------------------------------------------


class SyncWrappers:
    """Times the sync-prone calls on tensors of the `timed` device types: each entry point in
    `OP_NAMES` (`Tensor.item`, `Tensor.__bool__`, `Tensor.cpu`, `torch.nonzero`, ...) is wrapped
    in place while the cell runs and put back by `uninstall` (an inherited method is deleted
    again). Every other torch call runs untouched, at no cost.

    A call made while one is being timed (printing a tensor reads its values) is not counted
    again, calls from other threads and calls traced by `torch.compile` pass straight through.
    """

    def __init__(self, ledger: SyncLedger, timed: frozenset[str]) -> None:
        self.ledger = ledger
        self.timed = timed
        self.depth = 0  # > 0 while a timed call runs (on the ledger's thread)
        self._saved: Saved = []

    def install(self, module_functions: bool = True) -> None:
        """`module_functions=False`: wrap the `Tensor` methods only (see the module docstring)."""
        for key, name in OP_NAMES.items():
            owner_name, attr = name.split(".", 1)
            owner = Tensor if owner_name == "Tensor" else torch
            if owner is torch and not module_functions:
                continue
            own = owner is torch or attr in owner.__dict__
            current = owner.__dict__[attr] if own and owner is Tensor else getattr(owner, attr, None)
            if current is None:
                continue
            wrapper = self._timed(current, key, name)
            setattr(owner, attr, wrapper)
            self._saved.append((owner, attr, current, own))
        if self._saved:
            keep_out_of_dynamo(wrapper)  # one code object for every wrapper

    def uninstall(self) -> None:
        saved, self._saved = self._saved, []
        _restore(saved)

    def _timed(self, original: Any, key: Any, name: str) -> Any:
        ledger, timed, thread = self.ledger, self.timed, self.ledger.thread
        indexing = key is _GETITEM or key is _SETITEM
        probe = self

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True  # noqa: F841  (IPython hides this frame in tracebacks)
            if probe.depth or threading.get_ident() != thread or _is_compiling():
                return original(*args, **kwargs)
            if indexing and not isinstance(args[1], _INDEX_CONTAINERS):
                return original(*args, **kwargs)  # x[i], x[1:3]: the common, sync-free indexing
            try:
                device = sync_device(key, args, kwargs)
            except Exception:
                device = None
            if device not in timed or (device == "cuda" and ledger.starts_cuda()):
                return original(*args, **kwargs)
            probe.depth += 1
            t0 = _perf()
            try:
                return original(*args, **kwargs)
            finally:
                seconds = _perf() - t0
                probe.depth -= 1
                ledger.add(name, seconds, sys._getframe(1))

        return wrapper


# --- the collector ---------------------------------------------------------------------------


class SyncProbe:
    """Collector: times CPU-device synchronisations per cell line (see module docstring)."""

    name = "sync"

    def __init__(self, *, cuda_available: Callable[[], bool] | None = None) -> None:
        self._cuda_available = cuda_available or torch.cuda.is_available
        self._ledger: SyncLedger | None = None
        self._wrappers: SyncWrappers | None = None
        self._explicit: ExplicitSyncs | None = None
        self._aside: Callable[[], None] | None = None

    def start(self, run: CellRun) -> None:
        self.stop(run)
        self._ledger = None
        devices = frozenset(run.options.sync_devices)
        if "cuda" in devices and not self._cuda_available():
            devices = devices - {"cuda"}  # no CUDA tensor can exist: nothing to time, no per-op cost
        if not devices:
            return
        self._ledger = ledger = SyncLedger(run.locator)
        module_functions = not compile_in_play(run.raw_cell)
        try:
            if "cuda" in devices:
                self._explicit = ExplicitSyncs(ledger)
                self._explicit.install(module_functions)
            self._wrappers = SyncWrappers(ledger, devices)
            self._wrappers.install(module_functions)
            # Dynamo would trace the wrappers into what it compiles: they step aside meanwhile
            self._aside = aside_while_compiling(self._pause, lambda: self._resume(module_functions))
        except Exception as exc:  # a probe that cannot start must not break the cell
            self.stop(run)
            run.report.errors.append(f"sync probe: could not start: {exc!r}")

    def _pause(self) -> None:
        for part in (self._wrappers, self._explicit):
            if part is not None:
                part.uninstall()

    def _resume(self, module_functions: bool) -> None:
        for part in (self._wrappers, self._explicit):
            if part is not None:
                part.uninstall()  # never wrap twice
                part.install(module_functions)

    def stop(self, run: CellRun | None = None) -> None:
        aside, self._aside = self._aside, None
        if aside is not None:
            aside()
        wrappers, self._wrappers = self._wrappers, None
        explicit, self._explicit = self._explicit, None
        if wrappers is not None:
            wrappers.uninstall()
        if explicit is not None:
            explicit.uninstall()

    def collect(self, run: CellRun) -> None:
        ledger, self._ledger = self._ledger, None
        if ledger is None:
            return
        records = ledger.records(run.lines)
        run.report.syncs = records
        run.report.sync_s = sum(r.seconds for r in records)
