"""Module records: parameter counts, devices, dtypes, mode and memory of a live module tree.

Read through instance dicts (`_parameters`, `_buffers`, `training`), never through
`.parameters()` or other methods a subclass could override.
"""

from __future__ import annotations

from typing import Any

import torch

from ..report import ModuleRecord
from . import meta
from .namespace import ModuleTree, instance_dict
from .tensors import device_name, dtype_name


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
                    dev = device_name(meta.device(t))
                    if own is None:
                        own = dev
                    elif own != dev:
                        tree.split_ok = False
                    if dev not in first_on:
                        first_on[dev] = (qual, pname)
                    if id(t) in seen:
                        continue  # tied weights count once, as in `model.parameters()`
                    seen.add(id(t))
                    n = meta.numel(t)
                    nbytes += n * meta.element_size(t)
                    if kind == "_parameters":
                        params += n
                        if meta.requires_grad(t):
                            trainable += n
                        dt = meta.dtype(t)
                        dtypes[dtype_name(dt)] = None
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
