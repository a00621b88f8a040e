"""Reads that run no user code: instance dicts, dict/list items, tensor metadata.

No `getattr`, properties, `__getattr__`, `repr`, `str`, `len` or `bool` on user objects: an
instance's `__dict__` is fetched through the C getset descriptor CPython gives classes
without `__slots__` (a class that overrides `__dict__` itself is simply not read), and
tensor facts come from `torchmagic.live.meta` with subclass `__torch_function__` disabled.
"""

from __future__ import annotations

import types
from itertools import islice
from typing import Any

import torch

from ..live import meta

_Tensor = torch.Tensor
_Module = torch.nn.Module
_GetSet = types.GetSetDescriptorType
_type_dict = type.__dict__["__dict__"].__get__  # a class's own namespace, read in C
_NO_TF = torch._C.DisableTorchFunctionSubclass

MAX_ITEMS = 64


def is_tensor(obj: Any) -> bool:
    return issubclass(type(obj), _Tensor)


def is_module(obj: Any) -> bool:
    return issubclass(type(obj), _Module)


def instance_dict(obj: Any) -> dict[str, Any] | None:
    """`obj.__dict__` when it is the plain one CPython made (else None): never calls a property."""
    for klass in type.__dict__["__mro__"].__get__(type(obj)):
        desc = _type_dict(klass).get("__dict__")
        if desc is None:
            continue
        if type(desc) is not _GetSet:
            return None
        try:
            d = desc.__get__(obj, klass)
        except Exception:
            return None
        return d if type(d) is dict else None
    return None


def module_store(module: Any, key: str) -> dict[str, Any]:
    """A module's `_parameters`, `_buffers` or `_modules` dict (empty if not a plain dict)."""
    d = instance_dict(module)
    store = d.get(key) if d is not None else None
    return store if isinstance(store, dict) else {}


def plain_attr(obj: Any, name: str) -> Any:
    """`obj.name` when it is a plain instance attribute, a parameter, buffer or submodule;
    `_MISSING` otherwise (properties, class attributes and `__getattr__` are never run)."""
    d = instance_dict(obj)
    if d is None:
        return MISSING
    if name in d:
        return dict.__getitem__(d, name)
    if is_module(obj):
        for key in ("_parameters", "_buffers", "_modules"):
            store = d.get(key)
            if isinstance(store, dict) and name in store:
                return dict.__getitem__(store, name)
    return MISSING


def item(container: Any, key: Any) -> Any:
    """`container[key]` for plain lists, tuples and dicts only (nn containers by their dicts)."""
    tp = type(container)
    try:
        if tp is list or tp is tuple:
            if type(key) is int and -len_of(container) <= key < len_of(container):
                return list.__getitem__(container, key) if tp is list else tuple.__getitem__(container, key)
            return MISSING
        if tp is dict:
            if type(key) in (str, int) and key in container:
                return dict.__getitem__(container, key)
            return MISSING
        if is_module(container) and type(key) in (str, int):
            # nn.Sequential / nn.ModuleList / nn.ModuleDict index their `_modules` by str
            subs = module_store(container, "_modules")
            k = str(key)
            if type(key) is int and key < 0:
                k = str(len(subs) + key)
            return subs[k] if k in subs else MISSING
    except Exception:
        return MISSING
    return MISSING


def len_of(seq: Any) -> int:
    tp = type(seq)
    if tp is list:
        return list.__len__(seq)
    if tp is tuple:
        return tuple.__len__(seq)
    if tp is dict:
        return dict.__len__(seq)
    return 0


def items(container: Any, limit: int = MAX_ITEMS) -> list[tuple[str, Any]]:
    """(`[i]` or `['k']`, value) for a plain list/tuple/dict, at most `limit` of them."""
    tp = type(container)
    if tp is list or tp is tuple:
        it = list.__iter__(container) if tp is list else tuple.__iter__(container)
        return [(f"[{i}]", v) for i, v in enumerate(islice(it, limit))]
    if tp is dict:
        out = []
        for k, v in islice(dict.items(container), limit):
            if type(k) is str:
                out.append((f"[{k!r}]", v))
            elif type(k) is int:
                out.append((f"[{k}]", v))
        return out
    return []


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


# ---- tensors -----------------------------------------------------------------------------------


def shape(t: Any) -> list[int] | None:
    try:
        with _NO_TF():
            return [d if type(d) is int else -1 for d in meta.size(t)]
    except Exception:
        return None


def dtype(t: Any) -> str | None:
    try:
        with _NO_TF():
            return str(meta.dtype(t)).removeprefix("torch.")
    except Exception:
        return None


def device(t: Any) -> str | None:
    try:
        with _NO_TF():
            return str(meta.device(t))
    except Exception:
        return None


def contiguous(t: Any) -> bool | None:
    try:
        with _NO_TF():
            return bool(meta.is_contiguous(t))  # a C bool: no user __bool__
    except Exception:
        return None
