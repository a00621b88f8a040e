"""TM303: a cell line whose measured CPU-GPU synchronisations waited too long (sync records)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ...catalog import Rule
from ...report import Finding
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


@runtime_rule("TM303")
def measured_sync_stall(run: CellRun, rule: Rule) -> Iterator[Finding]:
    report = run.report
    elapsed = report.elapsed_s
    opts = run.options
    limit = max(opts.sync_threshold_s, opts.sync_fraction * elapsed)
    for rec in report.syncs:
        if rec.seconds <= limit:
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
