"""A copy of a module's structure whose every tensor is a fresh meta tensor of the same
shape, dtype and strides. The user's parameters, buffers and tensor attributes are never
moved, copied or modified, and the copy keeps no reference to them.

`copy.deepcopy` does the structure (submodules, plain attributes, hooks, containers) with a
memo that answers for every tensor before deepcopy could copy it: deepcopy asks
`memo.get(id(x))` before anything else, and when that asks about a tensor not seen yet, the
memo reads `x` from deepcopy's own frame (stdlib code, checked by its code object) and
returns a meta twin. So a tensor anywhere in the object graph (a parameter, a buffer, a plain
attribute, a tensor in a list or in a config object) is replaced, never copied. If deepcopy
fails (a lock or a file handle in an attribute), `structural_copy` rebuilds the module tree
by hand: instance dicts copied shallowly, tensors and submodules replaced, other attributes
shared.
"""

from __future__ import annotations

import copy
import sys
from typing import Any

import torch
from torch import nn
from torch.nn.parameter import UninitializedTensorMixin

from ..live import meta
from . import safe

_DEEPCOPY_CODE = copy.deepcopy.__code__
_NO_TF = torch._C.DisableTorchFunctionSubclass
_MISSING = object()


def meta_twin(t: Any) -> Any:
    """A fresh meta tensor like `t` (a Parameter stays a Parameter); no data is read."""
    with _NO_TF():
        rg = bool(meta.requires_grad(t))
        if issubclass(type(t), UninitializedTensorMixin):  # lazy modules materialize on the twin
            return type(t)(requires_grad=rg, device="meta", dtype=meta.dtype(t))
        size = tuple(meta.size(t))
        dtype = meta.dtype(t)
        try:
            if meta.layout(t) is torch.strided and not meta.is_nested(t):
                twin = torch.empty_strided(size, tuple(meta.stride(t)), dtype=dtype, device="meta")
            else:
                twin = torch.empty(size, dtype=dtype, device="meta")
        except Exception:  # quantized and other dtypes meta cannot hold: keep the shape
            twin = torch.empty(size, device="meta")
    if issubclass(type(t), nn.Parameter):
        return nn.Parameter(twin, requires_grad=rg)
    if rg and twin.is_floating_point():
        twin.requires_grad_(True)
    return twin


def _twin_of(x: Any) -> Any:
    tp = type(x)
    if issubclass(tp, torch.Tensor):
        return meta_twin(x)
    if tp is torch.UntypedStorage:
        return torch.UntypedStorage(x.nbytes(), device="meta")
    return _MISSING


class MetaMemo(dict):
    """A deepcopy memo that maps every tensor deepcopy meets to a meta twin."""

    def get(self, key: Any, default: Any = None) -> Any:
        found = dict.get(self, key, _MISSING)
        if found is not _MISSING:
            return found
        caller = sys._getframe(1)
        if caller.f_code is _DEEPCOPY_CODE:
            x = dict.get(caller.f_locals, "x", _MISSING)
            if x is not _MISSING and id(x) == key:
                twin = _twin_of(x)
                if twin is not _MISSING:
                    dict.__setitem__(self, key, twin)
                    return twin
        return default


def deep_meta_copy(obj: Any, memo: MetaMemo) -> Any:
    return copy.deepcopy(obj, memo)


def structural_copy(module: Any, memo: dict[int, Any]) -> Any:
    """The fallback: new instances (no `__init__`), shallow instance dicts, tensors twinned,
    submodules and plain containers rebuilt; any other attribute is shared with the user's."""
    done = memo.get(id(module))
    if done is not None:
        return done
    d = safe.instance_dict(module)
    if d is None:
        raise TypeError(f"cannot copy {type(module).__name__}: no plain instance dict")
    new = object.__new__(type(module))
    memo[id(module)] = new
    nd = safe.instance_dict(new)
    assert nd is not None
    for k, v in dict.items(d):
        nd[k] = _rebuild(v, memo, 0)
    return new


def _rebuild(v: Any, memo: dict[int, Any], depth: int) -> Any:
    done = memo.get(id(v))
    if done is not None:
        return done
    tp = type(v)
    if issubclass(tp, torch.Tensor):
        memo[id(v)] = twin = meta_twin(v)
        return twin
    if issubclass(tp, nn.Module):
        return structural_copy(v, memo)
    if depth > 6:
        return v
    if tp is list:
        return [_rebuild(x, memo, depth + 1) for x in v]
    if tp is tuple:
        return tuple(_rebuild(x, memo, depth + 1) for x in v)
    if tp is dict or (issubclass(tp, dict) and tp.__module__ == "collections"):
        out = tp()
        for k, x in dict.items(v):
            out[k] = _rebuild(x, memo, depth + 1)
        return out
    if tp is set:
        return set(v)
    return v
