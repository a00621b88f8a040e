"""TM106 live: a module holding a plain tensor attribute (not a Parameter, not a buffer)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from ...catalog import Rule
from .. import meta
from ..namespace import instance_dict
from ..registry import LiveFinding, LiveView, live_check
from ._attributes import attribute_finding, moves_its_own_tensors, users_attribute

_Tensor = torch.Tensor
_Parameter = nn.Parameter
# Hooks that recompute a plain tensor attribute from registered parameters before each forward.
_RECOMPUTING_HOOKS = frozenset({"WeightNorm", "SpectralNorm"})


@live_check("TM106")
def plain_tensor_attributes(view: LiveView, rule: Rule) -> Iterator[LiveFinding]:
    hits: dict[tuple[type, str], list[tuple[str, Any, Any]]] = {}
    for tree in view.trees:
        for qual, m, attr, v in view.attributes(tree):
            cls = type(m)
            if (
                not is_plain_tensor_state(m, attr, v)
                or not users_attribute(view, cls, qual, attr)
                or moves_its_own_tensors(cls)
                or (cls.__name__, attr) in view.cell.host_attrs
            ):
                continue  # library internals are not the user's to fix; self-moving state is on
                # purpose; host data read only for Python values stays on the CPU
            hits.setdefault((cls, attr), []).append((qual, tree.root, v))
    for (cls, attr), found in hits.items():
        yield attribute_finding(
            rule,
            cls,
            attr,
            found,
            view,
            "is a plain tensor attribute",
            "it will not follow `.to(device)` and is missing from `state_dict()`.",
            f'In `{cls.__name__}`: `self.register_buffer("{attr}", tensor)`, or `nn.Parameter(...)` '
            "if it should be trained.",
        )


def is_plain_tensor_state(module: Any, attr: str, value: Any) -> bool:
    """A tensor the module holds as state without registering it (shared with TM205)."""
    tp = type(value)
    if not issubclass(tp, _Tensor) or issubclass(tp, _Parameter):
        return False
    try:
        return not _computed_attribute(instance_dict(module), attr, value)
    except Exception:
        return False


def _computed_attribute(d: dict[str, Any], attr: str, t: Any) -> bool:
    """A plain tensor attribute that is derived or a constant, not state: TM106 would be noise.

    `weight_norm`/`spectral_norm` keep `weight` as a plain attribute recomputed from
    registered parameters by a forward pre-hook; a tensor with a `grad_fn` was computed from
    others (a cached activation, a derived weight) rather than created as a constant.
    """
    try:
        if meta.grad_fn(t) is not None:
            return True
        if len(meta.size(t)) == 0 and meta.device(t).type == "cpu" and not meta.requires_grad(t):
            return True  # a 0-dim CPU constant: mixes with tensors on any device, as a number
    except Exception:
        pass
    hooks = d.get("_forward_pre_hooks")
    if isinstance(hooks, dict):
        for hook in dict.values(hooks):
            if type(hook).__name__ in _RECOMPUTING_HOOKS:
                try:
                    if instance_dict(hook).get("name") == attr:
                        return True
                except Exception:
                    continue
    return False
