"""The names a user would type for modules (`net.encoder.0`, `net.layers[2]`), found by walking
instance dicts from named roots: no `named_modules()` (a user override could run)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import safe

MAX_MODULES = 20_000


def module_names(roots: Mapping[str, Any], limit: int = MAX_MODULES) -> dict[int, str]:
    """id(module) -> name, first root first; registered submodules are `a.b`, modules held in
    a plain list/tuple/dict attribute (unregistered: the TM105 bug) are `a.layers[0]`."""
    names: dict[int, str] = {}
    stack: list[tuple[str, Any]] = [(n, m) for n, m in reversed(list(roots.items())) if safe.is_module(m)]
    while stack and len(names) < limit:
        qual, m = stack.pop()
        if id(m) in names:
            continue
        names[id(m)] = qual
        d = safe.instance_dict(m)
        if d is None:
            continue
        children: list[tuple[str, Any]] = []
        for k, v in safe.items(safe.module_store(m, "_modules"), 10_000):
            key = k[2:-2] if k.startswith("['") else k
            if v is not None and safe.is_module(v):
                children.append((f"{qual}.{key}", v))
        for attr, v in dict.items(d):
            if type(attr) is not str or attr.startswith("_") or type(v) not in (list, tuple, dict):
                continue
            children.extend((f"{qual}.{attr}{k}", item) for k, item in safe.items(v) if safe.is_module(item))
        stack.extend(reversed(children))
    return names
