"""The one place rules are registered, with their IDs, names and documentation."""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..report import Finding
from .scope import Context


@dataclass(frozen=True)
class Rule:
    """One catalog rule. `check` runs on every node it subscribed to during the shared walk.

    Static rules subscribe by callee name (`calls`), attribute name (`attrs`), node type
    (`nodes`), to loops as they are left (`loops`, with a `LoopInfo`) or once at the end
    (`finish`, with the tree). Live and runtime rules are registered without subscriptions:
    their evidence is gathered elsewhere, but their ID, name and docs live here.
    """

    id: str
    name: str
    severity: str
    evidence: str
    doc: str
    check: Callable[[Any, Context], None] = field(compare=False)
    calls: frozenset[str] = frozenset()
    attrs: frozenset[str] = frozenset()
    nodes: tuple[type[ast.AST], ...] = ()
    loops: bool = False
    finish: bool = False

    def finding(
        self,
        message: str,
        hint: str,
        *,
        line: int | None = None,
        col: int | None = None,
        object: str | None = None,
        source: str = "static",
        severity: str | None = None,
    ) -> Finding:
        """A Finding of this rule, named and graded from its registration."""
        return Finding(
            rule=self.id,
            name=self.name,
            severity=severity or self.severity,  # type: ignore[arg-type]
            line=line,
            col=col,
            message=message,
            hint=hint,
            object=object,
            source=source,  # type: ignore[arg-type]
        )

    @property
    def family(self) -> str:
        return self.id[:3]

    @property
    def is_static(self) -> bool:
        return bool(self.calls or self.attrs or self.nodes or self.loops or self.finish)


RULES: dict[str, Rule] = {}


def rule(
    id: str,
    name: str,
    severity: str,
    *,
    evidence: str = "static",
    calls: Iterable[str] = (),
    attrs: Iterable[str] = (),
    nodes: Iterable[type[ast.AST]] = (),
    loops: bool = False,
    finish: bool = False,
) -> Callable[[Callable[[Any, Context], None]], Callable[[Any, Context], None]]:
    """Register the decorated function as rule `id`; its docstring is the rule's documentation."""

    def register(fn: Callable[[Any, Context], None]) -> Callable[[Any, Context], None]:
        if id in RULES:
            raise ValueError(f"rule {id} registered twice")
        RULES[id] = Rule(
            id=id,
            name=name,
            severity=severity,
            evidence=evidence,
            doc=inspect.cleandoc(fn.__doc__ or ""),
            check=fn,
            calls=frozenset(calls),
            attrs=frozenset(attrs),
            nodes=tuple(nodes),
            loops=loops,
            finish=finish,
        )
        return fn

    return register


def documented(id: str, name: str, severity: str, evidence: str, doc: str) -> None:
    """Register a rule whose evidence is live or runtime only (no static check)."""
    if id in RULES:
        raise ValueError(f"rule {id} registered twice")
    RULES[id] = Rule(id, name, severity, evidence, inspect.cleandoc(doc), check=_no_check)


def _no_check(node: Any, ctx: Context) -> None:
    return None


def get_rule(rule_id: str) -> Rule | None:
    load_rules()
    return RULES.get(rule_id.upper())


def all_rules() -> list[Rule]:
    load_rules()
    return [RULES[k] for k in sorted(RULES)]


def load_rules() -> None:
    from . import rules  # noqa: F401  (importing registers every family)


def selected(rule_id: str, select: Iterable[str] | None, ignore: Iterable[str] | None) -> bool:
    """`select`/`ignore` take IDs or prefixes (`TM3`, `TM101`)."""
    if select:
        if not any(rule_id.startswith(s.strip().upper()) for s in select if s.strip()):
            return False
    if ignore:
        if any(rule_id.startswith(s.strip().upper()) for s in ignore if s.strip()):
            return False
    return True


def make_finding(
    rule_id: str,
    message: str,
    hint: str,
    *,
    line: int | None = None,
    col: int | None = None,
    object: str | None = None,
    source: str = "live",
    severity: str | None = None,
) -> Finding:
    """A Finding for a live or runtime rule, named and graded from the registry."""
    r = get_rule(rule_id)
    if r is None:
        raise KeyError(f"unknown rule {rule_id}")
    return r.finding(message, hint, line=line, col=col, object=object, source=source, severity=severity)
