"""Runtime rules: catalog rules with runtime evidence, registered by rule ID.

A runtime rule reads the records the collectors left for one cell (`run.report.syncs`,
`run.records.modes`, `run.records.error`, ...) and returns findings. Adding one that needs
no new hook is its unit here, its catalog entry and its fixtures.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .. import catalog
from ..catalog import Rule
from ..report import Finding

if TYPE_CHECKING:
    from ..run import CellRun

RuntimeFn = Callable[["CellRun", Rule], Iterable[Finding]]


@dataclass(frozen=True)
class RuntimeRule:
    rule: Rule
    fn: RuntimeFn = field(compare=False)

    def run(self, run: CellRun) -> list[Finding]:
        return list(self.fn(run, self.rule))


RULES: dict[str, RuntimeRule] = {}


def runtime_rule(rule_id: str, evidence: str = "runtime") -> Callable[[RuntimeFn], RuntimeFn]:
    """Register the decorated function as the runtime rule of catalog rule `rule_id`."""
    r = catalog.require(rule_id, evidence)

    def register(fn: RuntimeFn) -> RuntimeFn:
        if rule_id in RULES:
            raise ValueError(f"runtime rule {rule_id} registered twice")
        RULES[rule_id] = RuntimeRule(r, fn)
        return fn

    return register


def runtime_rules(
    select: Iterable[str] | None = None, ignore: Iterable[str] | None = None
) -> list[RuntimeRule]:
    from . import rules  # noqa: F401  (importing the package registers every rule)

    return [r for k, r in sorted(RULES.items()) if catalog.selected(k, select, ignore)]
