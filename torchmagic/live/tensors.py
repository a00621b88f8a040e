"""Tensor metadata records: shape, dtype, device, memory, autograd links — never values.

Metadata is read through `torch._C.TensorBase`'s own descriptors (`live.meta`) with subclass
`__torch_function__` disabled by the caller, so a subclass's Python overrides never run and
nothing reads a value (no `.item()`, no host copy, no device sync).

Between cells the scan keeps, per name, the last record with the cheap facts that prove it
still holds (`_version`, data pointer, requires_grad, dtype; sizes and strides compared with
the record): an unchanged tensor costs about a third of a fresh read.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ..report import TensorRecord
from . import meta

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
_strided = torch.strided
_QUANTIZED = frozenset({torch.qint8, torch.quint8, torch.qint32, torch.quint4x2, torch.quint2x4})
_DTYPE_NAMES: dict[Any, str] = {}
_DEVICE_NAMES: dict[Any, str] = {}


def dtype_name(dt: Any) -> str:
    name = _DTYPE_NAMES.get(dt)
    if name is None:
        name = str(dt).removeprefix("torch.")
        _DTYPE_NAMES[dt] = name
    return name


def device_name(dev: Any) -> str:
    name = _DEVICE_NAMES.get(dev)
    if name is None:
        name = str(dev)
        _DEVICE_NAMES[dev] = name
    return name


def _ints(seq: Any) -> tuple[int, ...]:
    # Jagged nested tensors have symbolic (nested int) sizes: shown as -1.
    return tuple(d if type(d) is int else -1 for d in seq)


def tensor_record(name: str, t: Any, changed: bool) -> TensorRecord:
    """Metadata of one tensor. Fast path for plain strided tensors (1 to 2 µs); anything
    else (sparse, nested, subclasses that refuse a query) degrades field by field."""
    return cached_record(name, t, changed, None)


def cached_record(name: str, t: Any, changed: bool, cache: dict[str, Any] | None) -> TensorRecord:
    """The record; with `cache`, also `cache[name] = (version, data pointer, requires_grad,
    dtype, size, stride, record)` for the next
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
        devname = _DEVICE_NAMES.get(dev) or device_name(dev)
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
            size if plain else _ints(size),  # a torch.Size is a tuple: kept as read
            _DTYPE_NAMES.get(dt) or dtype_name(dt),
            devname,
            numel * esize,
            requires_grad,
            type(gf).__name__ if gf is not None else None,
            _base(t) is not None,
            changed,
            stride if plain else _ints(stride),
            _is_contiguous(t),
            kind,
            storage,
        )
        if version is not None:
            cache[name] = (version, raw, requires_grad, dt, size, stride, record)  # type: ignore[index]
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
        dtype=dtype_name(dt) if dt is not None else "?",
        device=device_name(dev) if dev is not None else "?",
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
