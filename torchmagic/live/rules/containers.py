"""TM105 live: a module attribute that is a plain list/tuple/dict of modules or parameters."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from torch import nn

from ...catalog import Rule
from ..namespace import MAX_ITEMS, iter_items
from ..registry import LiveFinding, LiveView, live_check
from ._attributes import attribute_finding, users_attribute

_Module = nn.Module
_Parameter = nn.Parameter


@live_check("TM105")
def unregistered_containers(view: LiveView, rule: Rule) -> Iterator[LiveFinding]:
    hits: dict[tuple[type, str], list[tuple[str, Any, Any]]] = {}
    for tree in view.trees:
        ids = {id(m) for _, m, _ in tree.nodes}
        for qual, m, attr, v in view.attributes(tree):
            tp = type(v)
            # Judged on the whole tree: items registered elsewhere in the same model (a
            # convenience alias of `self.blocks`) do follow `.to()` and the optimizer.
            if (
                (tp is list or tp is tuple or tp is dict)
                and users_attribute(view, type(m), qual, attr)
                and _unregistered(v, ids, tree.tensor_ids)
            ):
                hits.setdefault((type(m), attr), []).append((qual, tree.root, v))
    for (cls, attr), found in hits.items():
        kind = "dict" if type(found[0][2]) is dict else type(found[0][2]).__name__
        fix = "nn.ModuleDict" if kind == "dict" else "nn.ModuleList"
        yield attribute_finding(
            rule,
            cls,
            attr,
            found,
            view,
            f"is a plain {kind} of modules/parameters",
            "they are invisible to `.parameters()`, `.to()`, `state_dict()` and the optimizer.",
            f"In `{cls.__name__}.__init__`: `self.{attr} = {fix}(...)` "
            "(`nn.ParameterList`/`nn.ParameterDict` for parameters).",
        )


def _unregistered(container: Any, module_ids: set[int], param_ids: set[int]) -> bool:
    """Holds a module or Parameter that the owning model does not register anywhere."""
    for _, item in iter_items(container, "", MAX_ITEMS):
        tp = type(item)
        if issubclass(tp, _Module):
            if id(item) not in module_ids:
                return True
        elif issubclass(tp, _Parameter) and id(item) not in param_ids:
            return True
    return False
