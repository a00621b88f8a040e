"""What a catalog rule is: its identity, its documentation, and how it wins over others."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

from ..report import Evidence, Finding, Fix, Severity

EVIDENCE_KINDS: tuple[Evidence, ...] = ("static", "live", "runtime")


@dataclass(frozen=True)
class Rule:
    """One rule of any evidence kind, declared once.

    `evidence` lists where its findings come from (the cell's source, the live namespace
    after the cell, hooks while the cell runs). `overrides` names the rules this one wins
    over when both report the same line: one finding per problem, the more specific rule.
    The texts are ruff-style documentation: `what` it flags, `why` that is bad, an
    `example` and the `fix` as code, and what it must not flag.
    """

    id: str
    name: str
    severity: Severity
    evidence: tuple[Evidence, ...] = ("static",)
    what: str = ""
    why: str = ""
    example: str = ""
    fix: str = ""
    not_flagged: str = ""
    overrides: tuple[str, ...] = ()
    # what the fix edits do and why they are safe or unsafe (empty: no edit is offered)
    autofix: str = ""

    def __post_init__(self) -> None:
        for name in ("what", "why", "example", "fix", "not_flagged", "autofix"):
            object.__setattr__(self, name, inspect.cleandoc(getattr(self, name)))
        unknown = set(self.evidence) - set(EVIDENCE_KINDS)
        if unknown or not self.evidence:
            raise ValueError(f"{self.id}: evidence must be among {EVIDENCE_KINDS}, got {self.evidence}")

    def finding(
        self,
        message: str,
        hint: str,
        *,
        line: int | None = None,
        col: int | None = None,
        object: str | None = None,
        source: Evidence | None = None,
        severity: Severity | None = None,
        notes: tuple[str, ...] = (),
        fix: Fix | None = None,
    ) -> Finding:
        """A Finding of this rule, named and graded from its declaration."""
        src = source or self.evidence[0]
        return Finding(
            rule=self.id,
            name=self.name,
            severity=severity or self.severity,
            line=line,
            col=col,
            message=message,
            hint=hint,
            object=object,
            source=src,
            evidence=(src,),
            notes=notes,
            fix=fix,
        )

    @property
    def summary(self) -> str:
        """The first sentence of `what`."""
        para = " ".join(self.what.split())
        return para.split(". ")[0].rstrip(".") + "." if para else ""

    @property
    def doc(self) -> str:
        """The documentation as Markdown, in ruff's sections."""
        parts = [
            f"## What it does\n{self.what}",
            f"## Why is this bad?\n{self.why}",
            f"## Example\n```python\n{self.example}\n```",
            f"## Use instead\n```python\n{self.fix}\n```",
        ]
        if self.not_flagged:
            parts.append(f"## Not flagged\n{self.not_flagged}")
        if self.autofix:
            parts.append(f"## Fix applied by `torchmagic check --fix`\n{self.autofix}")
        return "\n\n".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "severity": self.severity,
            "evidence": list(self.evidence),
            "what": self.what,
            "why": self.why,
            "example": self.example,
            "fix": self.fix,
            "not_flagged": self.not_flagged,
            "overrides": list(self.overrides),
            "autofix": self.autofix,
        }
