"""The rule catalog: every rule of every evidence kind, declared once.

Static checks (`lint/rules`), live checks (`live/rules`) and runtime rules (`runtime/rules`)
refer to their entry by ID; `torchmagic rules`, `torchmagic explain`, `docs/rules.md`, the
one merge of findings and the sidebar read it from here. Importing this package imports
neither torch nor IPython.
"""

from __future__ import annotations

from collections.abc import Iterable

from . import autograd, compile, config, data, devices, errors, indexing, io, models, sync, training
from .model import EVIDENCE_KINDS, Rule

__all__ = ["EVIDENCE_KINDS", "RULES", "Rule", "all_rules", "get", "require", "selected"]


def _collect() -> dict[str, Rule]:
    rules: dict[str, Rule] = {}
    for family in (errors, models, devices, sync, autograd, training, io, indexing, data, config, compile):
        for r in family.RULES:
            if r.id in rules:
                raise ValueError(f"rule {r.id} declared twice")
            rules[r.id] = r
    for r in rules.values():
        for other in r.overrides:
            if other not in rules:
                raise ValueError(f"{r.id} overrides unknown rule {other}")
    return dict(sorted(rules.items()))


RULES: dict[str, Rule] = _collect()


def get(rule_id: str) -> Rule | None:
    return RULES.get(rule_id.upper())


def all_rules() -> list[Rule]:
    return list(RULES.values())


def selected(rule_id: str, select: Iterable[str] | None, ignore: Iterable[str] | None) -> bool:
    """`select`/`ignore` take IDs or prefixes (`TM3`, `TM101`)."""
    if select and not any(rule_id.startswith(s.strip().upper()) for s in select if s.strip()):
        return False
    return not (ignore and any(rule_id.startswith(s.strip().upper()) for s in ignore if s.strip()))


def require(rule_id: str, evidence: str) -> Rule:
    """The entry of `rule_id`, for a unit of logic that gives it `evidence`."""
    r = RULES.get(rule_id)
    if r is None:
        raise KeyError(f"{rule_id} is not in the catalog")
    if evidence not in r.evidence:
        raise ValueError(f"{rule_id}: the catalog does not list {evidence} evidence")
    return r
