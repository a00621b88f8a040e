"""What TM105 and TM106 share: one finding per (class, attribute), placed where it is fixed."""

from __future__ import annotations

import sys
import sysconfig
from typing import Any

from torch import nn

from ...catalog import Rule
from ..registry import LiveFinding, LiveView

_TYPE_MODULE = type.__dict__["__module__"]
_LIBRARY_ROOTS = tuple(
    {p for key in ("stdlib", "platstdlib", "purelib", "platlib") if (p := sysconfig.get_paths().get(key))}
)
_MOVERS = ("_apply", "to", "cuda")


def users_class(cls: type) -> bool:
    """A class the user can change: defined in the notebook/session or a file of theirs, not in
    an installed library or the standard library (read from the class's module, no instance)."""
    try:
        module = _TYPE_MODULE.__get__(cls)
    except Exception:
        return False
    if module == "__main__":
        return True
    mod = sys.modules.get(module) if isinstance(module, str) else None
    path = getattr(mod, "__file__", None) if mod is not None else None
    if not isinstance(path, str):
        return False
    return not any(path.startswith(root) for root in _LIBRARY_ROOTS) and "site-packages" not in path


def users_attribute(view: LiveView, cls: type, qual: str, attr: str) -> bool:
    """The user's to fix: an attribute of a class of theirs, or one their cell set on an
    instance of a library class from outside (`model.heads = [...]`); never what a library's
    own code keeps on its modules."""
    return users_class(cls) or (qual, attr) in view.cell.attr_sets


def moves_its_own_tensors(cls: type) -> bool:
    """The class (or a base of its own, not `nn.Module`) overrides `_apply`, `to` or `cuda`:
    it keeps plain tensor state on purpose and moves it itself (metric objects do)."""
    for base in cls.__mro__:
        if base is nn.Module or base is object:
            break
        if any(name in base.__dict__ for name in _MOVERS):
            return True
    return False


def attribute_finding(
    rule: Rule,
    cls: type,
    attr: str,
    hits: list[tuple[str, Any, Any]],
    view: LiveView,
    what: str,
    why: str,
    hint: str,
) -> LiveFinding:
    """Names the first instance (`net.layers`) and counts the others of the same class. The
    line is the `self.<attr> = ...` assignment when the cell defines the class (where the fix
    goes), else the line that built the instance."""
    qual, root, _ = hits[0]
    more = f" (and {len(hits) - 1} more `{cls.__name__}` instances)" if len(hits) > 1 else ""
    name = f"{qual}.{attr}"
    f = rule.finding(
        f"`{name}` {what}{more}: {why}",
        hint,
        line=view.cell.attribute_line(cls.__name__, attr, qual),
        object=name,
        source="live",
    )
    return f, root
