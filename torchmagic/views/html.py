"""HTML of a Report: the tables, colours and styles that the widget and the static view share.

The static view (`render_html`) is what an exported notebook keeps and what shows where
widgets cannot render; the widget (`views/widget.py`) puts the same tables in tabs. Every
interpolated value goes through `html.escape`: names, messages and code lines come from the
user's cell and namespace.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from html import escape
from typing import Any

from ..lint.fixes import preview
from ..report import CompileRecord, Finding, ModuleRecord, Report, ShapeRecord, SyncRecord, TensorRecord
from .summary import human_bytes, human_seconds, summary_line

SEVERITY_COLOURS = {"error": "#d32f2f", "warning": "#ef6c00", "info": "#1976d2"}
MAX_ROWS = 50  # rows per static table; the widget and the sidebar page through everything

STYLE = """<style>
.tm-report{font-family:var(--jp-ui-font-family,system-ui,sans-serif);font-size:12.5px;
 color:var(--jp-ui-font-color1,#222);margin:2px 0}
div.tm-report table{border-collapse:collapse;margin:3px 0;width:auto;table-layout:auto}
div.tm-report table td,div.tm-report table th{padding:2px 8px;text-align:left!important;vertical-align:top;
 border:none;border-bottom:1px solid var(--jp-border-color2,#e0e0e0);max-width:none}
div.tm-report table th{font-weight:600;color:var(--jp-ui-font-color2,#555)}
div.tm-report table tbody tr:nth-child(odd){background:transparent}
.tm-report code{font-family:var(--jp-code-font-family,monospace);font-size:12px}
div.tm-report td.tm-nowrap{white-space:nowrap}
.tm-muted{color:var(--jp-ui-font-color2,#666)}
.tm-summary{font-weight:600}
.tm-report details{margin:2px 0}
.tm-report summary{cursor:pointer;color:var(--jp-ui-font-color2,#555)}
div.tm-report tr.tm-changed td{background:var(--jp-warn-color3,#fff8e1)}
.tm-report pre.tm-diff{margin:2px 0;padding:2px 4px;font-family:var(--jp-code-font-family,monospace);
 font-size:12px;background:var(--jp-layout-color2,#f5f5f5);white-space:pre-wrap}
.tm-report .tm-del{color:var(--jp-error-color1,#b00020)}
.tm-report .tm-add{color:var(--jp-success-color1,#1b5e20)}
.tm-badge{font-size:11px;color:var(--jp-ui-font-color2,#666);border:1px solid var(--jp-border-color2,#ccc);
 border-radius:3px;padding:0 3px;margin-left:4px;white-space:nowrap}
</style>"""

_BACKTICKS = re.compile(r"`([^`]+)`")


def inline_code(text: str) -> str:
    """Escape, then show `spans` as code (escaping first keeps the markup ours)."""
    return _BACKTICKS.sub(r"<code>\1</code>", escape(text))


def shape_text(shape: Sequence[int]) -> str:
    """`32×128`; symbolic sizes (nested or dynamic dimensions, recorded as -1) are `?`."""
    return "×".join("?" if d < 0 else str(d) for d in shape) if shape else "scalar"


def _td(value: Any, code: bool = False) -> str:
    text = escape(str(value))
    return f"<td><code>{text}</code></td>" if code else f"<td>{text}</td>"


def _limit(n: int, limit: int | None) -> int:
    return n if limit is None or limit <= 0 else min(n, limit)


def table(headers: Sequence[str], rows: Sequence[str], total: int) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    more = f"<div class='tm-muted'>showing {len(rows)} of {total} rows</div>" if total > len(rows) else ""
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>{more}"


def empty(what: str) -> str:
    return f"<div class='tm-muted'>{escape(what)}</div>"


def wrap(body: str) -> str:
    """A fragment as a standalone block with the shared styles."""
    return f"{STYLE}<div class='tm-report'>{body}</div>"


# ---- tables ------------------------------------------------------------------------------------


def evidence_badge(f: Finding) -> str:
    kinds = f.evidence or (f.source,)
    return f"<span class='tm-badge'>{escape(' + '.join(kinds))}</span>"


def finding_message(f: Finding, code: str = "") -> str:
    """The message, the notes the other evidence added, the fix, and the edit that makes it
    (as a diff of the cell's lines) when the finding carries one."""
    notes = "".join(f"<br><span class='tm-muted'>also: {inline_code(n)}</span>" for n in f.notes)
    text = f"{inline_code(f.message)}{notes}<br><span class='tm-muted'>fix: {inline_code(f.hint)}</span>"
    return text + fix_diff(f, code)


def fix_diff(f: Finding, code: str) -> str:
    if f.fix is None or not code:
        return ""
    lines = preview(code, f.fix)
    if not lines:
        return ""
    label = "edit" if f.fix.applicability == "safe" else "edit that may change behaviour"
    rows = "".join(
        f"<span class='tm-{'del' if ln.startswith('-') else 'add'}'>{escape(ln)}</span>\n" for ln in lines
    )
    return (
        f"<div class='tm-fix' data-applicability='{escape(f.fix.applicability)}'>"
        f"<span class='tm-muted'>{label}: {inline_code(f.fix.title)}</span>"
        f"<pre class='tm-diff'>{rows}</pre></div>"
    )


def findings_table(findings: Sequence[Finding], limit: int | None = MAX_ROWS, code: str = "") -> str:
    if not findings:
        return empty("No findings.")
    rows = []
    for f in findings[: _limit(len(findings), limit)]:
        colour = SEVERITY_COLOURS.get(f.severity, "#555")
        # the message names a live object; the line column names it only when there is no line
        where = f"line {f.line}" if f.line is not None else f"<code>{escape(f.object or 'live')}</code>"
        rows.append(
            "<tr>"
            f"<td class='tm-nowrap'><b style='color:{colour}'>{escape(f.severity)}</b></td>"
            f"<td class='tm-nowrap'>{where}</td>"
            f"<td class='tm-nowrap'><b>{escape(f.rule)}</b> {escape(f.name)}{evidence_badge(f)}</td>"
            f"<td>{finding_message(f, code)}</td>"
            "</tr>"
        )
    return table(["severity", "where", "rule", "message and fix"], rows, len(findings))


# Sort keys of the tensors table: label -> (key function, descending by default)
TENSOR_SORTS: dict[str, tuple[Callable[[TensorRecord], Any], bool]] = {
    "name": (lambda t: t.name, False),
    "size": (lambda t: t.nbytes, True),
    "shape": (lambda t: (len(t.shape), t.shape), True),
    "dtype": (lambda t: t.dtype, False),
    "device": (lambda t: t.device, False),
    "grad": (lambda t: (t.grad_fn is not None, t.requires_grad), True),
    "changed": (lambda t: t.changed, True),
}


def sort_tensors(
    tensors: Sequence[TensorRecord], key: str = "size", descending: bool | None = None
) -> list[TensorRecord]:
    fn, default_desc = TENSOR_SORTS.get(key, TENSOR_SORTS["size"])
    desc = default_desc if descending is None else descending
    try:
        return sorted(tensors, key=fn, reverse=desc)
    except TypeError:
        return list(tensors)


def tensors_table(
    tensors: Sequence[TensorRecord],
    key: str = "size",
    descending: bool | None = None,
    limit: int | None = MAX_ROWS,
) -> str:
    if not tensors:
        return empty("No tensors in the namespace.")
    ordered = sort_tensors(tensors, key, descending)
    rows = []
    for t in ordered[: _limit(len(ordered), limit)]:
        cls = " class='tm-changed'" if t.changed else ""
        grad = t.grad_fn or ("requires_grad" if t.requires_grad else "")
        notes = [t.kind] if t.kind not in ("tensor", "") else []
        if t.is_view:
            notes.append("view")
        if t.contiguous is False:
            notes.append("non-contiguous")
        rows.append(
            f"<tr{cls}>{_td(t.name, code=True)}{_td(shape_text(t.shape))}{_td(t.dtype)}{_td(t.device)}"
            f"{_td(human_bytes(t.nbytes))}{_td(grad)}{_td(', '.join(notes))}</tr>"
        )
    return table(["name", "shape", "dtype", "device", "size", "grad", "notes"], rows, len(ordered))


def modules_table(modules: Sequence[ModuleRecord], limit: int | None = MAX_ROWS) -> str:
    if not modules:
        return empty("No modules in the namespace.")
    rows = []
    for m in modules[: _limit(len(modules), limit)]:
        cls = " class='tm-changed'" if m.changed else ""
        rows.append(
            f"<tr{cls}>{_td(m.name, code=True)}{_td(m.type)}{_td(f'{m.params:,}')}{_td(f'{m.trainable:,}')}"
            f"{_td(', '.join(m.devices))}{_td(', '.join(m.dtypes))}{_td('train' if m.training else 'eval')}"
            f"{_td(human_bytes(m.nbytes))}{_td(m.submodules)}</tr>"
        )
    return table(
        ["name", "type", "params", "trainable", "devices", "dtypes", "mode", "size", "submodules"],
        rows,
        len(modules),
    )


def shapes_table(trace: Sequence[ShapeRecord], limit: int | None = MAX_ROWS) -> str:
    if not trace:
        return empty("No forward passes ran in this cell.")
    rows = []
    for s in trace[: _limit(len(trace), limit)]:
        indent = "&nbsp;&nbsp;" * max(0, min(int(s.depth or 0), 40))
        ins = ", ".join(shape_text(x) for x in s.inputs) or "–"
        outs = ", ".join(shape_text(x) for x in s.outputs) or "–"
        rows.append(
            f"<tr><td>{indent}<code>{escape(s.module)}</code></td>{_td(s.type)}"
            f"<td>{escape(ins)} → {escape(outs)}</td>{_td(s.calls)}{_td(s.dtype or '')}{_td(s.device or '')}</tr>"
        )
    return table(["module", "type", "input → output", "calls", "dtype", "device"], rows, len(trace))


def syncs_table(syncs: Sequence[SyncRecord], limit: int | None = MAX_ROWS) -> str:
    if not syncs:
        return empty("No CPU-GPU synchronisations were measured.")
    ordered = sorted(syncs, key=lambda s: -s.seconds)
    rows = []
    for s in ordered[: _limit(len(ordered), limit)]:
        ops = ", ".join(f"{k}×{v}" for k, v in sorted(s.ops.items(), key=lambda kv: -kv[1]))
        rows.append(
            f"<tr>{_td(s.line)}{_td(s.count)}{_td(human_seconds(s.seconds))}{_td(ops)}{_td(s.code.strip(), code=True)}</tr>"
        )
    return table(["line", "count", "waited", "ops", "code"], rows, len(ordered))


def compile_table(records: Sequence[CompileRecord], limit: int | None = MAX_ROWS) -> str:
    """One row per function `torch.compile` compiled in the cell: graphs, breaks, recompiles,
    the time it took, and why it recompiled."""
    if not records:
        return empty("Nothing was compiled in this cell.")
    rows = []
    for c in records[: _limit(len(records), limit)]:
        notes = [inline_code(r) for r in c.reasons]
        if c.limit_hit:
            notes.insert(0, "<b style='color:#d32f2f'>recompile limit reached: new inputs run uncompiled</b>")
        where = escape(c.location) + (
            f" <span class='tm-muted'>(called at line {c.line})</span>" if c.line else ""
        )
        rows.append(
            f"<tr>{_td(c.name, code=True)}<td>{where}</td>{_td(c.graphs)}{_td(c.breaks)}{_td(c.recompiles)}"
            f"{_td(human_seconds(c.compile_s))}<td>{'<br>'.join(notes)}</td></tr>"
        )
    return table(
        ["function", "defined", "graphs", "breaks", "recompiles", "compiling", "why it recompiled"],
        rows,
        len(records),
    )


def summary_colour(report: Report) -> str:
    counts = report.counts()
    for severity in ("error", "warning"):
        if counts.get(severity):
            return SEVERITY_COLOURS[severity]
    return "#555"


# ---- the static view ---------------------------------------------------------------------------


def _section(title: str, count: int, body: str) -> str:
    return f"<details><summary>{escape(title)} ({count})</summary>{body}</details>" if count else ""


def render_html(report: Report, *, sections: bool = True) -> str:
    """The inline block: summary, findings, internal errors, then collapsed tables."""
    parts = []
    findings = report.sorted_findings()
    summary = escape(summary_line(report))
    if findings:
        parts.append(f"<div class='tm-summary' style='color:{summary_colour(report)}'>{summary}</div>")
        parts.append(findings_table(findings, code=report.code))
    else:
        parts.append(f"<div class='tm-muted'>{summary}</div>")
    for err in report.errors:
        parts.append(f"<div class='tm-muted'>⚠ torchmagic internal error: {escape(err)}</div>")
    if sections:
        parts += [
            _section("Tensors", len(report.tensors), tensors_table(report.tensors)),
            _section("Modules", len(report.modules), modules_table(report.modules)),
            _section("Shapes", len(report.shape_trace), shapes_table(report.shape_trace)),
            _section("Syncs", report.sync_count(), syncs_table(report.syncs)),
            _section("Compile", len(report.compile), compile_table(report.compile)),
        ]
    return wrap("".join(parts))


def has_news(report: Report) -> bool:
    """Something a checked cell should show in full: findings, internal errors, forward passes,
    synchronisations or compilations it made. The namespace's tensors alone are not news."""
    return bool(report.findings or report.errors or report.shape_trace or report.syncs or report.compile)


class QuietReport:
    """A clean cell's report: the summary line, with the tensor and module tables folded
    under it; no widget is built for a cell with nothing to say."""

    def __init__(self, report: Report) -> None:
        self.report = report

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return mimebundle(self.report)

    def __repr__(self) -> str:
        return summary_line(self.report)


class HTMLReport:
    """Displayable wrapper: HTML in notebooks, the plain-text view elsewhere."""

    def __init__(self, report: Report) -> None:
        self.report = report

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return mimebundle(self.report)

    def __repr__(self) -> str:
        from .terminal import render_text

        return render_text(self.report)


REPORT_MIMETYPE = "application/vnd.torchmagic.report+json"


def mimebundle(report: Report, max_rows: int = 200) -> dict[str, Any]:
    """HTML for notebooks, text for terminals and logs, and the report itself as JSON so that
    tools reading an executed notebook (`python -m torchmagic.notebook_run`) get the data."""
    from .terminal import render_text

    return {
        "text/plain": render_text(report),
        "text/html": render_html(report),
        # capped: this copy is saved in the notebook file with the cell's outputs
        REPORT_MIMETYPE: _saved_copy(report, max_rows),
    }


def _saved_copy(report: Report, max_rows: int) -> dict[str, Any]:
    data = report.to_dict(max_rows=max_rows)
    data.pop("code", None)  # the cell's own source is saved right beside it
    return data
