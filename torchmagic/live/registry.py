"""Live checks: catalog rules with live evidence, registered by rule ID.

A live check reads a `LiveView` — the objects the namespace walk found after the cell, the
module trees and what the cell's source binds — and yields `(finding, subject)` pairs:
`subject` is the object the finding is about, which the scan remembers weakly so that a
finding is shown once per object, not after every later cell.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .. import catalog
from ..catalog import Rule
from ..report import Finding
from .cell import CellNames
from .namespace import MODULE_INTERNALS, ModuleTree, NamespaceSnapshot, instance_dict

LiveFinding = tuple[Finding, Any]
LiveFn = Callable[["LiveView", Rule], Iterable[LiveFinding]]

_SCALARS = (int, float, bool, str)


@dataclass
class LiveView:
    """What live checks read. Strong references: valid only while the report is built."""

    snapshot: NamespaceSnapshot
    cell: CellNames
    trees: list[ModuleTree]  # outermost roots only, module records already computed
    static: tuple[Finding, ...] = ()  # what the cell's source already gave (read-only)
    _attributes: dict[int, list[tuple[str, Any, str, Any]]] = field(default_factory=dict)

    def attributes(self, tree: ModuleTree) -> list[tuple[str, Any, str, Any]]:
        """`(qualname, module, attribute, value)` for each user attribute of each module in
        `tree` that is not a plain scalar, `None` or a registered part (read once per tree)."""
        out = self._attributes.get(id(tree))
        if out is not None:
            return out
        out = []
        for qual, m, _ in tree.nodes:
            try:
                d = instance_dict(m)
            except Exception:
                continue
            # Set difference in C: most modules have two or three user attributes, all ints.
            for attr in d.keys() - MODULE_INTERNALS:
                v = d.get(attr)
                if v is None or type(v) in _SCALARS or type(attr) is not str:
                    continue
                out.append((qual, m, attr, v))
        self._attributes[id(tree)] = out
        return out


@dataclass(frozen=True)
class LiveCheck:
    rule: Rule
    fn: LiveFn = field(compare=False)

    def run(self, view: LiveView) -> Iterator[LiveFinding]:
        yield from self.fn(view, self.rule)


CHECKS: dict[str, LiveCheck] = {}


def live_check(rule_id: str) -> Callable[[LiveFn], LiveFn]:
    """Register the decorated function as the live check of catalog rule `rule_id`."""
    r = catalog.require(rule_id, "live")

    def register(fn: LiveFn) -> LiveFn:
        if rule_id in CHECKS:
            raise ValueError(f"live check {rule_id} registered twice")
        CHECKS[rule_id] = LiveCheck(r, fn)
        return fn

    return register


def live_checks(select: Iterable[str] | None = None, ignore: Iterable[str] | None = None) -> list[LiveCheck]:
    from . import rules  # noqa: F401  (importing the package registers every check)

    return [c for k, c in sorted(CHECKS.items()) if catalog.selected(k, select, ignore)]
