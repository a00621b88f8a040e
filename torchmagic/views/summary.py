"""The one-line summary every renderer shows above a report."""

from __future__ import annotations

from ..report import Report, human_bytes


def human_seconds(s: float) -> str:
    if s < 1e-3:
        return f"{s * 1e6:.0f} µs"
    if s < 1:
        return f"{s * 1e3:.0f} ms"
    return f"{s:.2f} s"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def summary_parts(report: Report) -> list[str]:
    """Findings by severity, syncs and time waited, memory by device."""
    parts: list[str] = []
    counts = report.counts()
    for sev, word in (("error", "error"), ("warning", "warning"), ("info", "info")):
        if counts.get(sev):
            parts.append(_plural(counts[sev], word) if sev != "info" else f"{counts[sev]} info")
    if not parts:
        parts.append("no issues")
    n_sync = report.sync_count()
    if n_sync:
        pct = f" ({100 * report.sync_s / report.elapsed_s:.0f}% of the cell)" if report.elapsed_s > 0 else ""
        parts.append(f"{_plural(n_sync, 'sync')} · {human_seconds(report.sync_s)} waited{pct}")
    if report.compile:
        parts.append(
            f"compiled {_plural(len(report.compile), 'function')} in {human_seconds(report.compile_s())}"
        )
    for device, nbytes in sorted(report.memory_by_device().items()):
        parts.append(f"{device} {human_bytes(nbytes)}")
    model_bytes = sum(m.nbytes for m in report.modules)
    if model_bytes:
        parts.append(f"modules {human_bytes(model_bytes)}")
    if report.errors:
        parts.append(_plural(len(report.errors), "internal error"))
    return parts


def summary_line(report: Report) -> str:
    """`torchcheck: 1 error · 2 warnings · 50 syncs · 0.9 s waited (63% of the cell) · 12 ms`."""
    parts = summary_parts(report)
    parts.append(human_seconds(report.check_s))
    return "torchcheck: " + " · ".join(parts)
