"""TM405 from the cell's error: `.numpy()` on a tensor that requires grad raised.

`.numpy()` on such a tensor raises at once, so nothing is left in the namespace for a scan
to see; the cell's own error is the evidence. The static rule catches what it can prove
beforehand; the merge keeps one finding per line.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ...catalog import Rule
from ...report import Finding
from ..registry import runtime_rule

if TYPE_CHECKING:
    from ...run import CellRun

NUMPY_REQUIRES_GRAD = "Can't call numpy() on Tensor that requires grad"


@runtime_rule("TM405")
def numpy_on_grad_tensor(run: CellRun, rule: Rule) -> Iterator[Finding]:
    err = run.records.error
    if err is None or type(err.exc) is not RuntimeError or NUMPY_REQUIRES_GRAD not in (err.message or ""):
        return
    yield rule.finding(
        "`.numpy()` was called on a tensor that requires grad, and the cell failed with "
        f'"{NUMPY_REQUIRES_GRAD}".',
        "Detach first: `t.detach().cpu().numpy()` (or compute it under `torch.no_grad()`).",
        line=err.line,
        source="runtime",
    )
