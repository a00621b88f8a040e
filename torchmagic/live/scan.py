"""The live namespace scan: tensors and modules after a cell, as metadata records.

Safety rules, because the namespace holds arbitrary user objects:
- an object is classified by `type(obj)` and `issubclass` only: no `isinstance` (it reads
  `__class__`, which a proxy may override), no `getattr`, `repr`, `len`, `==`, `bool`;
- containers are entered one level deep and only when they are exactly `list`, `tuple` or
  `dict`, through the builtin C iterators, and only their first `MAX_ITEMS` items;
- modules are walked through their instance `__dict__` (`_modules`, `_parameters`,
  `_buffers` and plain attributes), never through methods or properties a subclass could
  override;
- tensor metadata is read through `torch._C.TensorBase`'s own descriptors with subclass
  `__torch_function__` disabled, so a subclass's Python overrides never run, and nothing
  reads a value (no `.item()`, no host copy, no device sync);
- each object is handled in its own `try`: a weird one degrades to a partial record;
- the scan returns records (strings and ints); the objects are released when it returns.

Between cells the analyzer keeps only weak references (to tell which names were rebound)
and, per name, the last record with the cheap facts that prove it still holds (same
object, `_version`, data pointer, requires_grad, dtype; sizes and strides compared with the
record): an unchanged tensor costs about a third of a fresh read.
"""

from __future__ import annotations

import gc
import time
import types
import warnings
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import nn

from ..report import MemoryRecord, ModuleRecord, TensorRecord
from . import meta
from .cell import CellNames, cell_names

MAX_ITEMS = 1000  # items looked at inside one list/tuple/dict
MAX_MODULES = 200_000  # submodules walked per scan, all roots together

IPYTHON_NAMES = frozenset({"In", "Out", "exit", "quit", "get_ipython"})

_T = torch._C.TensorBase  # for the rarer queries of the degraded path
_base = meta.base
_data_ptr = meta.data_ptr
_device = meta.device
_dtype = meta.dtype
_element_size = meta.element_size
_grad_fn = meta.grad_fn
_is_contiguous = meta.is_contiguous
_is_nested = meta.is_nested
_is_quantized = meta.is_quantized
_layout = meta.layout
_numel = meta.numel
_requires_grad = meta.requires_grad
_size = meta.size
_storage_offset = meta.storage_offset
_stride = meta.stride
_version = meta.version

_Tensor = torch.Tensor
_Parameter = nn.Parameter
_Module = nn.Module
_strided = torch.strided
_QUANTIZED = frozenset({torch.qint8, torch.quint8, torch.qint32, torch.quint4x2, torch.quint2x4})
# Attributes every nn.Module instance has: not user attributes.
MODULE_INTERNALS = frozenset(nn.Module().__dict__) | {"_compiled_call_impl"}

TENSOR, MODULE, CONTAINER, OTHER = 1, 2, 3, 0
_DTYPE_NAMES: dict[Any, str] = {}
_DEVICE_NAMES: dict[Any, str] = {}


def _kind(tp: type) -> int:
    if tp is list or tp is tuple or tp is dict:
        return CONTAINER
    if issubclass(tp, types.ModuleType):
        return OTHER
    if issubclass(tp, torch.Tensor):
        return TENSOR
    if issubclass(tp, _Module):
        return MODULE
    return OTHER


def _dtype_name(dt: Any) -> str:
    name = _DTYPE_NAMES.get(dt)
    if name is None:
        name = str(dt).removeprefix("torch.")
        _DTYPE_NAMES[dt] = name
    return name


def _device_name(dev: Any) -> str:
    name = _DEVICE_NAMES.get(dev)
    if name is None:
        name = str(dev)
        _DEVICE_NAMES[dev] = name
    return name


def instance_dict(obj: Any) -> dict[str, Any]:
    """`obj.__dict__` without running a `__getattr__`/`__getattribute__` the class defines."""
    d = object.__getattribute__(obj, "__dict__")
    return d if type(d) is dict else {}


def _ints(seq: Any) -> list[int]:
    # Jagged nested tensors have symbolic (nested int) sizes: shown as -1.
    return [d if type(d) is int else -1 for d in seq]


def tensor_record(name: str, t: Any, changed: bool) -> TensorRecord:
    """Metadata of one tensor. Fast path for plain strided tensors (1 to 2 µs); anything
    else (sparse, nested, subclasses that refuse a query) degrades field by field."""
    return cached_record(name, t, changed, None)


def cached_record(name: str, t: Any, changed: bool, cache: dict[str, Any] | None) -> TensorRecord:
    """The record; with `cache`, also `cache[name] = (*_cache_key(t), record)` for the next
    scan, from the values read here (one flat tuple: a scan allocates as little as it can)."""
    tp = type(t)
    plain = tp is _Tensor or tp is _Parameter
    try:
        if not plain and (_is_nested(t) or _layout(t) is not _strided):
            raise TypeError("not a strided tensor")
        size = _size(t)
        stride = _stride(t)
        dt = _dtype(t)
        dev = _device(t)
        devname = _DEVICE_NAMES.get(dev) or _device_name(dev)
        esize = _element_size(t)
        numel = _numel(t)
        requires_grad = _requires_grad(t)
        storage = None
        version = None
        if plain:
            if numel:
                # The storage's own address (a view's data_ptr is offset into it): shared
                # storages are counted once in the per-device totals. Sparse and nested
                # tensors have no data pointer: they raise here and take the slow path.
                raw = _data_ptr(t)
                ptr = raw - _storage_offset(t) * esize
                if ptr:
                    storage = devname + ":" + hex(ptr)
                    if cache is not None:
                        try:
                            version = _version(t)
                        except Exception:  # inference tensors have no version counter
                            version = None
            elif _layout(t) is not _strided or _is_nested(t):
                raise TypeError("empty sparse or nested tensor")
        gf = _grad_fn(t)
        if plain:
            kind = "parameter" if tp is _Parameter else "tensor"
            if dt in _QUANTIZED:
                kind = "quantized"
        else:
            kind = _tensor_kind(t, tp)
        record = TensorRecord(
            name,
            list(size) if plain else _ints(size),
            _DTYPE_NAMES.get(dt) or _dtype_name(dt),
            devname,
            numel * esize,
            requires_grad,
            type(gf).__name__ if gf is not None else None,
            _base(t) is not None,
            changed,
            list(stride) if plain else _ints(stride),
            _is_contiguous(t),
            kind,
            storage,
        )
        if version is not None:
            cache[name] = (version, raw, requires_grad, dt, record)  # type: ignore[index]
        return record
    except Exception:
        return _degraded_record(name, t, tp, changed)


def _tensor_kind(t: Any, tp: type) -> str:
    if issubclass(tp, _Parameter):
        return "parameter"
    if _is_quantized(t):
        return "quantized"
    return tp.__name__


def _try(fn: Any, t: Any, default: Any) -> Any:
    try:
        return fn(t)
    except Exception:
        return default


def _degraded_record(name: str, t: Any, tp: type, changed: bool) -> TensorRecord:
    """Sparse, nested, and subclasses that refuse some queries: every field on its own."""
    layout = _try(_layout, t, None)
    nested = _try(_is_nested, t, False)
    if nested:
        kind = "nested"
    elif layout is not None and layout is not torch.strided:
        kind = str(layout).removeprefix("torch.")
    else:
        kind = tp.__name__ if tp is not torch.Tensor else "tensor"
    shape = _try(lambda x: _ints(_size(x)), t, None)
    if shape is None:
        dim = _try(_T.dim, t, 0)
        shape = [-1] * dim if type(dim) is int else []
    dt = _try(_dtype, t, None)
    dev = _try(_device, t, None)
    esize = _try(_element_size, t, 0)
    if kind in ("sparse_coo",):
        # Values plus int64 indices; `_nnz` is metadata, not a value read.
        nnz = _try(_T._nnz, t, 0)
        sdim = _try(_T.sparse_dim, t, 0)
        nbytes = nnz * (esize * max(1, _dense_numel(shape, sdim)) + 8 * sdim) if type(nnz) is int else 0
    else:
        numel = _try(_numel, t, 0)
        nbytes = numel * esize if type(numel) is int and type(esize) is int else 0
    gf = _try(_grad_fn, t, None)
    return TensorRecord(
        name=name,
        shape=shape,
        dtype=_dtype_name(dt) if dt is not None else "?",
        device=_device_name(dev) if dev is not None else "?",
        nbytes=int(nbytes) if type(nbytes) is int else 0,
        requires_grad=bool(_try(_requires_grad, t, False)),
        grad_fn=type(gf).__name__ if gf is not None else None,
        is_view=_try(_base, t, None) is not None,
        changed=changed,
        strides=_try(lambda x: _ints(_stride(x)), t, None) if kind == "tensor" else None,
        contiguous=None,
        kind=kind,
        storage_key=None,
    )


def _dense_numel(shape: list[int], sparse_dim: int) -> int:
    n = 1
    for d in shape[sparse_dim:]:
        n *= max(d, 0)
    return n


# ---- namespace walk ------------------------------------------------------------------------


_MISSING = object()
_weakref = weakref.ref


def _key_repr(k: Any, i: int) -> str:
    tp = type(k)
    if tp is str or tp is int or tp is bool or tp is float or k is None:
        r = repr(k)
        return r if len(r) <= 40 else r[:37] + "..."
    return f"<{tp.__name__} #{i}>"


def iter_items(container: Any, name: str, max_items: int = MAX_ITEMS) -> Iterator[tuple[str, Any]]:
    """`(xs[3], item)` / `(d['w'], value)` for an exact list, tuple or dict, capped."""
    tp = type(container)
    if tp is dict:
        for i, (k, v) in enumerate(dict.items(container)):
            if i >= max_items:
                return
            yield f"{name}[{_key_repr(k, i)}]", v
    else:
        it = list.__iter__(container) if tp is list else tuple.__iter__(container)
        for i, v in enumerate(it):
            if i >= max_items:
                return
            yield f"{name}[{i}]", v


@dataclass
class NamespaceObjects:
    """What one pass over the namespace found, with strong refs: use, then drop."""

    tensors: list[tuple[str, Any]] = field(default_factory=list)
    modules: list[tuple[str, Any]] = field(default_factory=list)
    # name -> tensors found one level inside that list/tuple/dict
    containers: dict[str, list[Any]] = field(default_factory=dict)
    container_objects: dict[str, Any] = field(default_factory=dict)


def collect(
    ns: dict[str, Any], hidden: dict[str, Any] | None = None, max_items: int = MAX_ITEMS
) -> NamespaceObjects:
    found = NamespaceObjects()
    hidden = hidden or {}
    # Per scan, not global: a global cache would keep classes defined in cells alive.
    kinds: dict[type, int] = {}
    try:
        items = list(dict.items(ns)) if isinstance(ns, dict) else []
    except RuntimeError:  # changed size during iteration (another thread)
        items = []
    for name, value in items:
        try:
            tp = type(value)
            k = kinds.get(tp)
            if k is None:
                k = kinds[tp] = _kind(tp)
            if k == OTHER:
                continue
            if type(name) is not str or not name or name[0] == "_" or name in IPYTHON_NAMES:
                continue
            if hidden and hidden.get(name, _MISSING) is value:
                continue
            if k == TENSOR:
                found.tensors.append((name, value))
            elif k == MODULE:
                found.modules.append((name, value))
            else:
                inner = []
                for item_name, item in iter_items(value, name, max_items):
                    itp = type(item)
                    ik = kinds.get(itp)
                    if ik is None:
                        ik = kinds[itp] = _kind(itp)
                    if ik == TENSOR:
                        found.tensors.append((item_name, item))
                        inner.append(item)
                    elif ik == MODULE:
                        found.modules.append((item_name, item))
                if inner:
                    found.containers[name] = inner
                    found.container_objects[name] = value
        except Exception:
            continue
    return found


@dataclass
class ModuleTree:
    """One root module's subtree, walked through instance dicts (strong refs: transient)."""

    name: str
    root: Any
    # (qualified name, module, depth) in definition order
    nodes: list[tuple[str, Any, int]]
    # filled by module_record, read by the live rules (one pass over the parameters)
    tensor_ids: set[int] = field(default_factory=set)
    first_on: dict[str, tuple[str, str]] = field(default_factory=dict)  # device -> (module, tensor)
    split_ok: bool = True  # every submodule's own tensors sit on one device


def walk_module(root: Any, name: str, budget: list[int]) -> ModuleTree:
    if budget[0] <= 0:  # past the scan's module budget: the root alone
        return ModuleTree(name, root, [(name, root, 0)])
    nodes: list[tuple[str, Any, int]] = []
    seen = {id(root)}
    stack: list[tuple[str, Any, int]] = [(name, root, 0)]
    while stack and budget[0] > 0:
        qual, m, depth = stack.pop()
        budget[0] -= 1
        nodes.append((qual, m, depth))
        try:
            subs = instance_dict(m).get("_modules")
            if not isinstance(subs, dict) or not subs:
                continue
            children = []
            for k, c in dict.items(subs):
                if c is None or id(c) in seen or not issubclass(type(c), _Module):
                    continue
                seen.add(id(c))
                children.append((f"{qual}.{k}", c, depth + 1))
            stack.extend(reversed(children))
        except Exception:
            continue
    return ModuleTree(name, root, nodes)


def module_trees(found: NamespaceObjects, budget: int = MAX_MODULES) -> list[ModuleTree]:
    """Every namespace module's subtree, biggest first so nested names come from the outermost root."""
    left = [budget]
    trees = []
    seen_roots: set[int] = set()
    for name, m in found.modules:
        if id(m) in seen_roots:
            continue
        seen_roots.add(id(m))
        trees.append(walk_module(m, name, left))
    trees.sort(key=lambda t: -len(t.nodes))
    return trees


def module_names(ns: dict[str, Any], hidden: dict[str, Any] | None = None) -> dict[int, str]:
    """id(module) -> the name a user would type (`net.encoder.0`), outermost root first.

    Modules held in a plain list/dict attribute (the TM105 bug) are named too, as
    `net.layers[0]`: they run in forward passes even though PyTorch does not register them.
    """
    names: dict[int, str] = {}
    found = collect(ns, hidden)
    trees = module_trees(found)
    for tree in trees:
        for qual, m, _ in tree.nodes:
            names.setdefault(id(m), qual)
    budget = [MAX_MODULES]
    for tree in trees:
        for qual, m, _ in tree.nodes:
            try:
                d = instance_dict(m)
                attrs = [(k, v) for k, v in dict.items(d) if k not in MODULE_INTERNALS]
            except Exception:
                continue
            for attr, v in attrs:
                if type(v) not in (list, tuple, dict) or type(attr) is not str:
                    continue
                for item_name, item in iter_items(v, f"{qual}.{attr}"):
                    if id(item) in names or not issubclass(type(item), _Module):
                        continue
                    for sub_qual, sub, _ in walk_module(item, item_name, budget).nodes:
                        names.setdefault(id(sub), sub_qual)
    return names


def _own_tensors(d: dict[str, Any], key: str) -> list[tuple[str, Any]]:
    store = d.get(key)
    if not isinstance(store, dict):
        return []
    return [(k, v) for k, v in dict.items(store) if v is not None and issubclass(type(v), torch.Tensor)]


def module_record(tree: ModuleTree, changed: bool) -> ModuleRecord:
    params = trainable = nbytes = 0
    dtypes: dict[str, None] = {}
    seen = tree.tensor_ids
    first_on = tree.first_on
    for qual, m, _ in tree.nodes:
        try:
            d = instance_dict(m)
        except Exception:
            continue
        own: str | None = None
        for kind in ("_parameters", "_buffers"):
            for pname, t in _own_tensors(d, kind):
                try:
                    dev = _DEVICE_NAMES.get(_device(t)) or _device_name(_device(t))
                    if own is None:
                        own = dev
                    elif own != dev:
                        tree.split_ok = False
                    if dev not in first_on:
                        first_on[dev] = (qual, pname)
                    if id(t) in seen:
                        continue  # tied weights count once, as in `model.parameters()`
                    seen.add(id(t))
                    n = _numel(t)
                    nbytes += n * _element_size(t)
                    if kind == "_parameters":
                        params += n
                        if _requires_grad(t):
                            trainable += n
                        dt = _dtype(t)
                        dtypes[_DTYPE_NAMES.get(dt) or _dtype_name(dt)] = None
                except Exception:
                    continue
    try:
        training = bool(instance_dict(tree.root).get("training", True))
    except Exception:
        training = True
    return ModuleRecord(
        name=tree.name,
        type=type(tree.root).__name__,
        params=params,
        trainable=trainable,
        devices=list(first_on),
        dtypes=list(dtypes),
        training=training,
        nbytes=nbytes,
        changed=changed,
        submodules=len(tree.nodes) - 1,
    )


# ---- the analyzer ---------------------------------------------------------------------------


@dataclass
class ScanResult:
    """Records of one scan plus the transient objects live rules look at (dropped after)."""

    tensors: list[TensorRecord]
    modules: list[ModuleRecord]
    memory: MemoryRecord | None
    objects: NamespaceObjects
    trees: list[ModuleTree]
    cell: CellNames
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)
    # name -> (version, data_ptr, requires_grad, dtype, record): for the next scan
    cache: dict[str, tuple[Any, ...]] = field(default_factory=dict)


class _Identity:
    """What a name pointed to at the previous scan: a weak ref when possible, else the id."""

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
) -> tuple[ScanResult, dict[str, Any]]:
    """Scan `ns`; `previous` is the identity map the last scan returned (None: first scan,
    where `changed` falls back to the names the cell assigns); `cache` is the last result's
    `cache`, which lets an unchanged tensor keep its record."""
    t0 = time.perf_counter()
    cell = cell_names(raw_cell)
    identities: dict[str, Any] = {}

    def changed(name: str, obj: Any) -> bool:
        try:
            ref: Any = _weakref(obj)
        except TypeError:
            ref = id(obj)
        identities[name] = ref
        if previous is None:
            return cell.line_of(name) is not None
        before = previous.get(name)
        # CPython hands out the same basic weak ref while one is alive, so `is` settles the
        # common case; dereferencing covers the rest.
        return before is None or (before is not ref and not _same(before, obj))

    gc_was_enabled = gc.isenabled()
    # Collection is deferred to the end of the scan: thousands of new records would
    # otherwise run the young generations many times over in the middle of it.
    gc.disable()
    try:
        with warnings.catch_warnings(), torch._C.DisableTorchFunctionSubclass():
            warnings.simplefilter("ignore")
            result = _scan(ns, cell, changed, hidden, max_items, cache or {})
    finally:
        if gc_was_enabled:
            gc.enable()
    result.seconds = time.perf_counter() - t0
    return result, identities


def _cache_key(t: Any, tp: type) -> tuple[Any, ...] | None:
    """What must be equal for a tensor seen last scan (same object) to keep its record.

    In-place ops, `resize_`, `set_` and `t_()` bump `_version`; `.data = x` does not, but it
    changes the data pointer, sizes, strides or dtype. Tensors without a data pointer (meta, empty,
    fake) and inference tensors (no version counter) are always read afresh.
    """
    if tp is not _Tensor and tp is not _Parameter:
        return None
    try:
        ptr = _data_ptr(t)
        if not ptr:
            return None
        return (_version(t), ptr, _requires_grad(t), _dtype(t))
    except Exception:
        return None


def _scan(
    ns: dict[str, Any], cell: CellNames, changed: Any, hidden: Any, max_items: int, cache: dict[str, Any]
) -> ScanResult:
    found = collect(ns, hidden, max_items)
    tensors = []
    new_cache: dict[str, tuple[Any, ...]] = {}
    for name, t in found.tensors:
        try:
            ch = changed(name, t)
            rec = None
            hit = cache.get(name) if cache and not ch else None
            if hit is not None:
                key = _cache_key(t, type(t))
                old = hit[4]
                # sizes and strides are compared with the record itself: keeping them in the
                # key would double the objects every scan allocates and frees
                if (
                    key is not None
                    and hit[:4] == key
                    and list(_size(t)) == old.shape
                    and list(_stride(t)) == old.strides
                ):
                    rec = old
                    if rec.changed:
                        rec = replace(rec, changed=False)
                    new_cache[name] = (*key, rec)
            if rec is None:
                rec = cached_record(name, t, ch, new_cache)
            tensors.append(rec)
        except Exception:
            continue
    trees = module_trees(found)
    modules = []
    for tree in trees:
        try:
            modules.append(module_record(tree, changed(tree.name, tree.root)))
        except Exception:
            continue
    order = {name: i for i, (name, _) in enumerate(found.modules)}
    modules.sort(key=lambda r: order.get(r.name, 0))
    return ScanResult(tensors, modules, cuda_memory(), found, trees, cell, cache=new_cache)


def cuda_memory() -> MemoryRecord | None:
    """Allocator counters of the current CUDA device: host-side bookkeeping, no sync."""
    try:
        if not torch.cuda.is_initialized():
            return None
        dev = torch.cuda.current_device()
        return MemoryRecord(
            device=f"cuda:{dev}",
            allocated_after=torch.cuda.memory_allocated(dev),
            peak=torch.cuda.max_memory_allocated(dev),
        )
    except Exception:
        return None


# Live/runtime rules that also have a static check: one finding per line, the static one.
SHADOWED_BY_STATIC = frozenset({"TM401", "TM405"})


def drop_shadowed(findings: list[Any]) -> list[Any]:
    static = {(f.rule, f.line) for f in findings if f.source == "static" and f.line is not None}
    if not static:
        return findings
    return [
        f
        for f in findings
        if f.source == "static" or f.rule not in SHADOWED_BY_STATIC or (f.rule, f.line) not in static
    ]


class LiveScan:
    """Analyzer: scan the namespace after a checked cell, then run the live rules."""

    name = "live_scan"

    def __init__(self, config: Any = None) -> None:
        self.config = config
        self._previous: dict[str, Any] | None = None
        self._cache: dict[str, tuple[Any, ...]] = {}
        # (rule, object name) -> the object it was reported for: a model's finding is shown
        # once, not after every later cell, until the name is bound to a new object.
        self._reported: dict[tuple[str, str | None], _Identity] = {}

    def analyze(self, run: Any) -> None:
        if not getattr(run.config, "scan", True):
            return
        from .rules import live_findings

        shell = run.shell
        ns = getattr(shell, "user_ns", None)
        if not isinstance(ns, dict):
            return
        hidden = getattr(shell, "user_ns_hidden", None)
        result, self._previous = scan_namespace(
            ns,
            raw_cell=run.raw_cell,
            previous=self._previous,
            hidden=hidden if isinstance(hidden, dict) else None,
            cache=self._cache,
        )
        self._cache = result.cache
        report = run.report
        try:
            report.tensors.extend(result.tensors)
            report.modules.extend(result.modules)
            if result.memory is not None and report.memory.allocated_after is None:
                # CudaMemoryProbe, when it ran, already holds before/after/peak for the cell.
                report.memory = result.memory
            with warnings.catch_warnings(), torch._C.DisableTorchFunctionSubclass():
                warnings.simplefilter("ignore")
                pairs = live_findings(result, report.findings)
            if len(self._reported) > 4096:
                self._reported = {
                    k: v for k, v in self._reported.items() if v.ref is None or v.ref() is not None
                }
            for f, obj, show in pairs:
                if obj is not None:
                    key = (f.rule, f.object)
                    before = self._reported.get(key)
                    if before is not None and before.same(obj):
                        continue
                    self._reported[key] = _Identity(obj)
                if show:
                    report.findings.append(f)
            pairs = []
            report.findings = drop_shadowed(report.findings)
        finally:
            # The records are plain data; the objects go now.
            result.objects = NamespaceObjects()
            result.trees = []
