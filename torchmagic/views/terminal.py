"""Terminal view of a Report: a rich renderable, and plain text for logs and `text/plain`."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, TextIO

from ..lint.fixes import preview
from ..report import Finding, Report
from .html import shape_text
from .summary import human_seconds, summary_line

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult

_STYLES = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def _where(line: int | None, obj: str | None) -> str:
    return f"line {line}" if line is not None else (obj or "live")


def _edit_lines(f: Finding, code: str) -> list[str]:
    """`edit: <title>` and the changed lines as `-`/`+`, for a finding that carries an edit."""
    if f.fix is None or not code:
        return []
    lines = preview(code, f.fix)
    if not lines:
        return []
    label = "edit" if f.fix.applicability == "safe" else "edit (may change behaviour)"
    return [f"{label}: {f.fix.title}", *lines]


def render_text(report: Report) -> str:
    """Plain text, one line per finding (used for text/plain and logs)."""
    lines = [summary_line(report)]
    for f in report.sorted_findings():
        lines.append(f"  {f.severity:<7} {_where(f.line, f.object):<9} {f.rule} {f.name}: {f.message}")
        lines.extend(f"  {'':<7} {'':<9} also: {note}" for note in f.notes)
        lines.append(f"  {'':<7} {'':<9} fix: {f.hint}")
        lines.extend(f"  {'':<7} {'':<9} {line}" for line in _edit_lines(f, report.code))
    for err in report.errors:
        lines.append(f"  torchmagic internal error: {err}")
    return "\n".join(lines)


class TerminalReport:
    """A Report as a rich renderable: `Console().print(TerminalReport(report))`."""

    def __init__(self, report: Report, max_rows: int = 20) -> None:
        self.report = report
        self.max_rows = max_rows

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from rich.table import Table
        from rich.text import Text

        report = self.report
        yield Text(summary_line(report), style="bold" if report.findings else "dim")
        for f in report.sorted_findings():
            head = Text("  ")
            head.append(f"{f.severity:<7}", style=_STYLES.get(f.severity, ""))
            head.append(f" {_where(f.line, f.object)}  ")
            head.append(f"{f.rule} {f.name}", style="bold")
            evidence = f.evidence or (f.source,)
            head.append(f"  [{' + '.join(evidence)}]", style="dim")
            yield head
            yield Text(f"    {f.message}")
            for note in f.notes:
                yield Text(f"    also: {note}", style="dim")
            yield Text(f"    fix: {f.hint}", style="dim")
            for line in _edit_lines(f, report.code):
                style = "red" if line.startswith("-") else "green" if line.startswith("+") else "dim"
                yield Text(f"    {line}", style=style)
        if report.shape_trace:
            table = Table(title="shapes", title_justify="left", box=None, padding=(0, 1))
            for col in ("module", "type", "input → output", "calls"):
                table.add_column(col)
            for s in report.shape_trace[: self.max_rows]:
                ins = ", ".join(shape_text(x) for x in s.inputs) or "–"
                outs = ", ".join(shape_text(x) for x in s.outputs) or "–"
                table.add_row("  " * min(s.depth, 20) + s.module, s.type, f"{ins} → {outs}", str(s.calls))
            yield table
        if report.syncs:
            table = Table(title="syncs", title_justify="left", box=None, padding=(0, 1))
            for col in ("line", "code", "count", "waited"):
                table.add_column(col)
            for s in sorted(report.syncs, key=lambda s: -s.seconds)[: self.max_rows]:
                table.add_row(str(s.line), s.code.strip(), str(s.count), human_seconds(s.seconds))
            yield table
        if report.compile:
            table = Table(title="compile", title_justify="left", box=None, padding=(0, 1))
            table.add_column("function")
            for col in ("graphs", "breaks", "recompiles", "time"):
                table.add_column(col, justify="right", no_wrap=True)
            table.add_column("why it recompiled", ratio=1)
            for c in report.compile[: self.max_rows]:
                why = "; ".join(c.reasons)
                if c.limit_hit:
                    why = "recompile limit reached: new inputs run uncompiled" + (f"; {why}" if why else "")
                name = Text(c.name)
                name.append(f" ({c.location})", style="dim")
                table.add_row(
                    name,
                    str(c.graphs),
                    str(c.breaks),
                    str(c.recompiles),
                    human_seconds(c.compile_s),
                    why,
                    style="red" if c.limit_hit else None,
                )
            yield table
        for err in report.errors:
            yield Text(f"torchmagic internal error: {err}", style="red")


def print_rich(report: Report, file: TextIO | None = None) -> None:
    """Print the report with rich (colours, aligned tables) to `file` (stdout by default)."""
    from rich.console import Console

    Console(file=file or sys.stdout, highlight=False, soft_wrap=False).print(TerminalReport(report))
