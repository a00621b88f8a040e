"""The live namespace scan: tensors and modules after a cell, as metadata records, then the
live checks over the same objects.

Between cells the scan keeps only weak references (to tell which names were rebound) and,
per tensor name, its last record with the facts that prove it still holds
(`tensors.cache_key`). Everything else is released when the report is built.
"""

from __future__ import annotations

import gc
import time
import warnings
import weakref
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from .. import catalog
from ..report import Finding, ModuleRecord, TensorRecord
from ..run import CellRun
from . import meta
from .cell import CellNames, cell_names, root_name
from .modules import module_record
from .namespace import MAX_ITEMS, ModuleTree, NamespaceObjects, NamespaceSnapshot
from .registry import LiveView, live_checks
from .tensors import cached_record

_data_ptr = meta.data_ptr
_dtype = meta.dtype
_requires_grad = meta.requires_grad
_size = meta.size
_stride = meta.stride
_version = meta.version
_Tensor = torch.Tensor
_Parameter = torch.nn.Parameter
_weakref = weakref.ref


@dataclass
class ScanResult:
    """Records of one scan plus the transient objects live checks look at (dropped after)."""

    tensors: list[TensorRecord]
    modules: list[ModuleRecord]
    objects: NamespaceObjects
    trees: list[ModuleTree]
    cell: CellNames
    seconds: float = 0.0
    # name -> (version, data_ptr, requires_grad, dtype, record): for the next scan
    cache: dict[str, tuple[Any, ...]] = field(default_factory=dict)

    def outermost_trees(self) -> list[ModuleTree]:
        """Trees whose root is not a submodule of a bigger tree (names come from the outer one)."""
        covered: set[int] = set()
        out = []
        for tree in self.trees:  # biggest first
            if id(tree.root) in covered:
                continue
            covered |= {id(m) for _, m, _ in tree.nodes}
            out.append(tree)
        return out


def _same(before: Any, obj: Any) -> bool:
    """`before` is a weak ref (tensors, modules) or an id (objects without weakref support)."""
    if type(before) is int:
        return before == id(obj)
    return before() is obj


def scan_namespace(
    ns: dict[str, Any],
    *,
    raw_cell: str = "",
    previous: dict[str, Any] | None = None,
    hidden: dict[str, Any] | None = None,
    max_items: int = MAX_ITEMS,
    cache: dict[str, tuple[Any, ...]] | None = None,
    snapshot: NamespaceSnapshot | None = None,
) -> tuple[ScanResult, dict[str, Any]]:
    """Scan `ns`; `previous` is the identity map the last scan returned (None: first scan,
    where `changed` falls back to the names the cell assigns); `cache` is the last result's
    `cache`, which lets an unchanged tensor keep its record."""
    t0 = time.perf_counter()
    cell = cell_names(raw_cell)
    identities: dict[str, Any] = {}
    snap = snapshot if snapshot is not None else NamespaceSnapshot(ns, hidden, max_items)
    gc_was_enabled = gc.isenabled()
    # Collection is deferred to the end of the scan: thousands of new records would
    # otherwise run the young generations many times over in the middle of it.
    gc.disable()
    try:
        with warnings.catch_warnings(), torch._C.DisableTorchFunctionSubclass():
            warnings.simplefilter("ignore")
            result = _scan(snap, cell, previous, identities, cache or {})
    finally:
        if gc_was_enabled:
            gc.enable()
    result.seconds = time.perf_counter() - t0
    return result, identities


def _scan(
    snap: NamespaceSnapshot,
    cell: CellNames,
    previous: dict[str, Any] | None,
    identities: dict[str, Any],
    cache: dict[str, tuple[Any, ...]],
) -> ScanResult:
    """The loop runs once per tensor in the namespace after every checked cell: the usual
    next-cell case (the same object, nothing changed) is written out inline."""
    found = snap.objects
    tensors: list[TensorRecord] = []
    append = tensors.append
    new_cache: dict[str, tuple[Any, ...]] = {}
    line_of = cell.line_of

    def changed(name: str, obj: Any) -> bool:
        try:
            ref: Any = _weakref(obj)
        except TypeError:
            ref = id(obj)
        identities[name] = ref
        if previous is None:
            return line_of(name) is not None
        before = previous.get(name)
        # CPython hands out the same basic weak ref while one is alive, so `is` settles the
        # common case; dereferencing covers the rest.
        return before is None or (before is not ref and not _same(before, obj))

    first_scan = previous is None
    bound = set(cell.assigned) | set(cell.mutated)  # what a first scan counts as changed
    for name, t in found.tensors:
        try:
            # `changed(name, t)`, written out: this loop runs for every tensor after every cell
            try:
                ref: Any = _weakref(t)
            except TypeError:
                ref = id(t)
            identities[name] = ref
            if first_scan:
                ch = root_name(name) in bound
            else:
                before = previous.get(name)  # type: ignore[union-attr]
                ch = before is None or (before is not ref and not _same(before, t))
            if not ch:
                hit = cache.get(name)
                tp = type(t)
                # In-place ops, `resize_`, `set_` and `t_()` bump `_version`; `.data = x` does not,
                # but it changes the data pointer, sizes, strides or dtype.
                if hit is not None and (tp is _Tensor or tp is _Parameter):
                    ptr = _data_ptr(t)
                    if (
                        ptr == hit[1]
                        and ptr
                        and _version(t) == hit[0]
                        and _requires_grad(t) == hit[2]
                        and _dtype(t) == hit[3]
                        and _size(t) == hit[4]
                        and _stride(t) == hit[5]
                    ):
                        rec = hit[6]
                        if rec.changed:
                            rec = replace(rec, changed=False)
                            hit = (*hit[:6], rec)
                        new_cache[name] = hit
                        append(rec)
                        continue
            append(cached_record(name, t, ch, new_cache))
        except Exception:
            continue
    trees = snap.trees
    modules = []
    for tree in trees:
        try:
            modules.append(module_record(tree, changed(tree.name, tree.root)))
        except Exception:
            continue
    order = {name: i for i, (name, _) in enumerate(found.modules)}
    modules.sort(key=lambda r: order.get(r.name, 0))
    return ScanResult(tensors, modules, found, trees, cell, cache=new_cache)


class _Identity:
    """What a finding was about: a weak ref when possible, else the id."""

    __slots__ = ("oid", "ref")

    def __init__(self, obj: Any) -> None:
        self.oid = id(obj)
        try:
            self.ref: Any = weakref.ref(obj)
        except TypeError:
            self.ref = None

    def same(self, obj: Any) -> bool:
        if self.ref is not None:
            return self.ref() is obj
        return self.oid == id(obj)


class LiveScan:
    """Analyzer: scan the namespace after a checked cell, then run the live checks."""

    name = "live_scan"

    def __init__(self) -> None:
        self._previous: dict[str, Any] | None = None
        self._cache: dict[str, tuple[Any, ...]] = {}
        # (rule, object name) -> the object it was reported for: a model's finding is shown
        # once, not after every later cell, until the name is bound to a new object.
        self._reported: dict[tuple[str, str | None], _Identity] = {}

    def analyze(self, run: CellRun, static: list[Finding]) -> list[Finding]:
        """Adds tensor and module records to the report; returns the live findings."""
        opts = run.options
        if not opts.scan:
            return []
        result, self._previous = scan_namespace(
            run.namespace,
            raw_cell=run.raw_cell,
            previous=self._previous,
            cache=self._cache,
            snapshot=run.snapshot(),
        )
        self._cache = result.cache
        run.report.tensors.extend(result.tensors)
        run.report.modules.extend(result.modules)
        view = LiveView(run.snapshot(), result.cell, result.outermost_trees(), tuple(static))
        out: list[Finding] = []
        with warnings.catch_warnings(), torch._C.DisableTorchFunctionSubclass():
            warnings.simplefilter("ignore")
            for check in live_checks(opts.select, opts.ignore):
                try:
                    pairs = list(check.run(view))
                except Exception as e:  # one broken check must not take the others down
                    run.report.errors.append(f"live check {check.rule.id} failed: {type(e).__name__}: {e}")
                    continue
                out.extend(f for f, subject in pairs if self._first_time(f, subject))
        err = run.records.error
        stop = getattr(err, "top_line", None) if err is not None else None
        if stop is not None and result.cell.parsed:
            # The cell raised: a live object cannot come from a line that never ran (the
            # name still holds an older object); such a finding is about the cell as a whole.
            out = [
                f if f.line is None or result.cell.reached(f.line, stop) else replace(f, line=None, fix=None)
                for f in out
            ]
        if len(self._reported) > 4096:
            self._reported = {k: v for k, v in self._reported.items() if v.ref is None or v.ref() is not None}
        return out

    def _first_time(self, f: Finding, subject: Any) -> bool:
        if subject is None:
            return True
        key = (f.rule, f.object)
        before = self._reported.get(key)
        if before is not None and before.same(subject):
            return False
        self._reported[key] = _Identity(subject)
        return True


def known_rules() -> list[str]:
    return [r.id for r in catalog.all_rules() if "live" in r.evidence]
