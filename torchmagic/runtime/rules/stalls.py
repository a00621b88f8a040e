"""TM303: a cell line whose measured CPU-GPU synchronisations waited too long (sync records).

A line that only displays values, once (`print(loss)`, `f"{acc:.3f}"`, a list of parameters as
the cell's result) is not reported: the user asked to see the values, so the wait is the price
of the answer, and on a GPU the first display of a notebook mostly times loading the printing
kernels (~0.2 s on an H100), not queued work. The same display inside a loop, or in a function
whose callers are not known, waits on every call and is reported. Its record stays in the
report's sync table either way.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ...catalog import Rule
from ...lint.nodes import COMPREHENSIONS, LOOPS, SCOPES
from ...lint.source import parse_cell
from ...report import Finding, SyncRecord
from ..registry import runtime_rule

if TYPE_CHECKING:
    from ...run import CellRun

_HINTS = {
    "cudaDeviceSynchronize": "Drop `torch.cuda.synchronize()` outside timing code; CUDA orders "
    "work on a stream by itself.",
    "cudaEventSynchronize": "Wait on the event from the device (`stream.wait_event(e)`) instead of "
    "blocking the CPU, or synchronise once at the end.",
}
_DEFAULT_HINT = (
    "Keep values on the device and read them once after the loop or every N steps "
    "(`total += loss.detach()`, then `total.item()`); use masks/`torch.where` instead of "
    "tensor-valued `if`; move results to the host once."
)
_DISPLAYS = frozenset({"Tensor.__repr__", "Tensor.__format__"})
_REPEATING = (*LOOPS, *COMPREHENSIONS, *SCOPES)


def _repeating_lines(raw_cell: str) -> set[int] | None:
    """Cell lines that may run more than once: in loops, comprehensions and the bodies of
    functions and classes the cell defines. None when the cell cannot be read as Python."""
    tree = parse_cell(raw_cell)
    if tree is None:
        return None
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, _REPEATING):
            lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return lines


def _one_off_display(rec: SyncRecord, repeating: set[int] | None) -> bool:
    return (
        bool(rec.ops) and rec.ops.keys() <= _DISPLAYS and repeating is not None and rec.line not in repeating
    )


@runtime_rule("TM303")
def measured_sync_stall(run: CellRun, rule: Rule) -> Iterator[Finding]:
    report = run.report
    elapsed = report.elapsed_s
    opts = run.options
    limit = max(opts.sync_threshold_s, opts.sync_fraction * elapsed)
    over = [rec for rec in report.syncs if rec.seconds > limit]
    repeating = _repeating_lines(run.raw_cell) if over else None
    for rec in over:
        if _one_off_display(rec, repeating):
            continue
        top = max(rec.ops, key=rec.ops.__getitem__) if rec.ops else ""
        share = f" ({rec.seconds / elapsed:.0%} of the cell)" if elapsed > 0 else ""
        times = "once" if rec.count == 1 else f"{rec.count} times"
        code = f"`{rec.code}`" if rec.code else f"line {rec.line}"
        yield rule.finding(
            f"{code} synchronised with the device {times} and waited {rec.seconds * 1e3:.1f} ms{share}.",
            _HINTS.get(top, _DEFAULT_HINT),
            line=rec.line,
            source="runtime",
        )
