"""Static checks: catalog rules whose evidence includes the source, registered by rule ID
with what they subscribe to in the shared walk. Their documentation is the catalog entry."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import catalog
from ..catalog import Rule

if TYPE_CHECKING:
    from .context import Context

CheckFn = Callable[[Any, "Context"], None]


@dataclass(frozen=True)
class StaticCheck:
    """The logic of one rule in the walk: `fn` runs on every node it subscribed to — by
    callee name (`calls`), attribute name (`attrs`), node type (`nodes`), on loops as they
    are left (`loops`, with a `LoopInfo`) or once at the end (`finish`, with the tree)."""

    rule: Rule
    fn: CheckFn = field(compare=False)
    calls: frozenset[str] = frozenset()
    attrs: frozenset[str] = frozenset()
    nodes: tuple[type[ast.AST], ...] = ()
    loops: bool = False
    finish: bool = False

    @property
    def id(self) -> str:
        return self.rule.id


CHECKS: dict[str, StaticCheck] = {}


def check(
    rule_id: str,
    *,
    calls: Iterable[str] = (),
    attrs: Iterable[str] = (),
    nodes: Iterable[type[ast.AST]] = (),
    loops: bool = False,
    finish: bool = False,
) -> Callable[[CheckFn], CheckFn]:
    """Register the decorated function as the static check of catalog rule `rule_id`."""
    r = catalog.require(rule_id, "static")

    def register(fn: CheckFn) -> CheckFn:
        if rule_id in CHECKS:
            raise ValueError(f"static check {rule_id} registered twice")
        CHECKS[rule_id] = StaticCheck(r, fn, frozenset(calls), frozenset(attrs), tuple(nodes), loops, finish)
        return fn

    return register


def static_checks(
    select: Iterable[str] | None = None, ignore: Iterable[str] | None = None
) -> list[StaticCheck]:
    from . import rules  # noqa: F401  (importing the package registers every family)

    return [c for k, c in sorted(CHECKS.items()) if catalog.selected(k, select, ignore)]
