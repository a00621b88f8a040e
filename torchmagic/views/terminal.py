"""Terminal view of a Report: rich when printing to a console, plain text otherwise."""

from __future__ import annotations

import sys
from typing import TextIO

from ..report import Report
from .summary import human_seconds, summary_line

_STYLES = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def render_text(report: Report) -> str:
    """Plain text, one line per finding (used for text/plain and logs)."""
    lines = [summary_line(report)]
    for f in report.sorted_findings():
        where = f"line {f.line}" if f.line is not None else (f.object or "live")
        lines.append(f"  {f.severity:<7} {where:<9} {f.rule} {f.name}: {f.message}")
        lines.append(f"  {'':<7} {'':<9} fix: {f.hint}")
    for err in report.errors:
        lines.append(f"  torchmagic internal error: {err}")
    return "\n".join(lines)


def print_rich(report: Report, file: TextIO | None = None) -> None:
    """Print the report with rich (colours, aligned tables) to `file` (stdout by default)."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(file=file or sys.stdout, highlight=False, soft_wrap=False)
    console.print(Text(summary_line(report), style="bold" if report.findings else "dim"))
    for f in report.sorted_findings():
        where = f"line {f.line}" if f.line is not None else (f.object or "live")
        head = Text("  ")
        head.append(f"{f.severity:<7}", style=_STYLES.get(f.severity, ""))
        head.append(f" {where}  ")
        head.append(f"{f.rule} {f.name}", style="bold")
        console.print(head)
        console.print(Text(f"    {f.message}"))
        console.print(Text(f"    fix: {f.hint}", style="dim"))
    if report.syncs:
        table = Table(title="syncs", title_justify="left", box=None, padding=(0, 1))
        for col in ("line", "code", "count", "waited"):
            table.add_column(col)
        for s in sorted(report.syncs, key=lambda s: -s.seconds)[:20]:
            table.add_row(str(s.line), s.code.strip(), str(s.count), human_seconds(s.seconds))
        console.print(table)
    for err in report.errors:
        console.print(Text(f"torchmagic internal error: {err}", style="red"))
