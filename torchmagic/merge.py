"""One merge of findings from every source: one finding per problem.

Two findings are the same problem when they are of the same rule and about the same thing:
the same cell line (and the same object, when both name one), or, for findings about a live
object without a line, the same object. The static finding leads (it points at the code, where
the fix goes); a live or runtime finding of the same problem adds its evidence kind and its
sentence as a note. Then a rule that the catalog says is more specific (`overrides`) removes
the other rule's finding on the same line or object. Nothing here looks at message text.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from . import catalog
from .report import SEVERITY_ORDER, Finding

_SOURCE_ORDER = {"static": 0, "live": 1, "runtime": 2}


def _place(f: Finding) -> tuple[str, int | str | None]:
    return ("line", f.line) if f.line is not None else ("object", f.object)


def _same_thing(a: Finding, b: Finding) -> bool:
    if a.line is not None:
        return a.object is None or b.object is None or a.object == b.object
    return a.object == b.object


def _combine(lead: Finding, other: Finding) -> Finding:
    evidence = tuple(
        dict.fromkeys((*(lead.evidence or (lead.source,)), *(other.evidence or (other.source,))))
    )
    notes = list(lead.notes)
    for text in (other.message, *other.notes):
        if text != lead.message and text not in notes:
            notes.append(text)
    severity = min(lead.severity, other.severity, key=lambda s: SEVERITY_ORDER.get(s, 3))
    return replace(
        lead,
        severity=severity,
        object=lead.object or other.object,
        col=lead.col if lead.col is not None else other.col,
        evidence=tuple(sorted(evidence, key=lambda e: _SOURCE_ORDER.get(e, 3))),
        notes=tuple(notes),
        # a second static finding on the line is about another expression: its edit is not this one's
        fix=lead.fix if lead.fix is not None or other.source == lead.source else other.fix,
    )


def merge_findings(findings: Iterable[Finding]) -> list[Finding]:
    """One finding per problem, ordered by line, column and rule."""
    ordered = sorted(findings, key=lambda f: _SOURCE_ORDER.get(f.source, 3))
    groups: dict[tuple[str, tuple[str, int | str | None]], list[Finding]] = {}
    for f in ordered:
        group = groups.setdefault((f.rule, _place(f)), [])
        for i, kept in enumerate(group):
            if _same_thing(kept, f):
                group[i] = _combine(kept, f)
                break
        else:
            group.append(f if f.evidence else replace(f, evidence=(f.source,)))
    merged = [f for group in groups.values() for f in group]
    rules_at: dict[tuple[str, int | str | None], set[str]] = {}
    for f in merged:
        rules_at.setdefault(_place(f), set()).add(f.rule)
    out = [f for f in merged if not _overridden(f, rules_at[_place(f)])]
    out.sort(key=lambda f: (f.line if f.line is not None else 10**9, f.col or 0, f.rule, f.object or ""))
    return out


def _overridden(f: Finding, rules_here: set[str]) -> bool:
    for other in rules_here:
        if other != f.rule:
            r = catalog.get(other)
            if r is not None and f.rule in r.overrides:
                return True
    return False
