"""Static HTML view of a Report: what a notebook shows inline, and what an exported file keeps.

Every interpolated value goes through `html.escape`: names, messages and code lines come
from the user's cell and namespace.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from html import escape
from typing import Any

from ..report import Finding, Report
from .summary import human_bytes, human_seconds, summary_line

SEVERITY_COLOURS = {"error": "#d32f2f", "warning": "#ef6c00", "info": "#1976d2"}
MAX_ROWS = 50  # static tables; the widget and the sidebar page through everything

_STYLE = """<style>
.tm-report{font-family:var(--jp-ui-font-family,system-ui,sans-serif);font-size:12.5px;
 color:var(--jp-ui-font-color1,#222);margin:2px 0}
div.tm-report table{border-collapse:collapse;margin:3px 0;width:auto;table-layout:auto}
div.tm-report table td,div.tm-report table th{padding:2px 8px;text-align:left!important;vertical-align:top;
 border:none;border-bottom:1px solid var(--jp-border-color2,#e0e0e0);max-width:none}
div.tm-report table th{font-weight:600;color:var(--jp-ui-font-color2,#555)}
div.tm-report table tbody tr:nth-child(odd){background:transparent}
.tm-report code{font-family:var(--jp-code-font-family,monospace);font-size:12px}
.tm-sev{display:inline-block;min-width:52px;font-weight:600}
div.tm-report td.tm-nowrap{white-space:nowrap}
.tm-fix{color:var(--jp-ui-font-color2,#555)}
.tm-summary{font-weight:600}
.tm-clean{color:var(--jp-ui-font-color2,#666)}
.tm-report details{margin:2px 0}
.tm-report summary{cursor:pointer;color:var(--jp-ui-font-color2,#555)}
.tm-changed td{background:var(--jp-warn-color3,#fff8e1)}
</style>"""


def _cell(value: Any) -> str:
    return f"<td>{escape(str(value))}</td>"


def _code(value: Any) -> str:
    return f"<td><code>{escape(str(value))}</code></td>"


_BACKTICKS = re.compile(r"`([^`]+)`")


def inline_code(text: str) -> str:
    """Escape, then show `spans` as code (escaping first keeps the markup ours)."""
    return _BACKTICKS.sub(r"<code>\1</code>", escape(text))


def finding_rows(findings: Iterable[Finding]) -> str:
    rows = []
    for f in findings:
        colour = SEVERITY_COLOURS.get(f.severity, "#555")
        where = f"line {f.line}" if f.line is not None else escape(f.object or "live")
        rows.append(
            "<tr>"
            f'<td class="tm-nowrap"><span class="tm-sev" style="color:{colour}">{escape(f.severity)}</span></td>'
            f'<td class="tm-nowrap">{where}</td>'
            f'<td class="tm-nowrap"><b>{escape(f.rule)}</b> {escape(f.name)}</td>'
            f"<td>{inline_code(f.message)}<br><span class='tm-fix'>fix: {inline_code(f.hint)}</span></td>"
            "</tr>"
        )
    return "".join(rows)


def _table(headers: Sequence[str], rows: Sequence[str]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _section(
    title: str,
    items: Sequence[Any],
    headers: Sequence[str],
    row: Callable[[Any], str],
    count: int | None = None,
) -> str:
    if not items:
        return ""
    shown = items[:MAX_ROWS]
    more = (
        f"<div class='tm-clean'>… {len(items) - len(shown)} more rows not shown</div>"
        if len(items) > len(shown)
        else ""
    )
    return f"<details><summary>{escape(title)} ({len(items) if count is None else count})</summary>{_table(headers, [row(i) for i in shown])}{more}</details>"


def _shape(s: Any) -> str:
    return "×".join(str(d) for d in s) if s else "scalar"


def _tensor_row(t: Any) -> str:
    cls = ' class="tm-changed"' if t.changed else ""
    grad = t.grad_fn or ("requires_grad" if t.requires_grad else "")
    return (
        f"<tr{cls}>{_code(t.name)}{_cell(_shape(t.shape))}{_cell(t.dtype)}{_cell(t.device)}"
        f"{_cell(human_bytes(t.nbytes))}{_cell(grad)}</tr>"
    )


def _module_row(m: Any) -> str:
    return (
        f"<tr>{_code(m.name)}{_cell(m.type)}{_cell(f'{m.params:,}')}{_cell(f'{m.trainable:,}')}"
        f"{_cell(', '.join(m.devices))}{_cell(', '.join(m.dtypes))}{_cell('train' if m.training else 'eval')}</tr>"
    )


def _shape_row(s: Any) -> str:
    ins = ", ".join(_shape(x) for x in s.inputs)
    outs = ", ".join(_shape(x) for x in s.outputs)
    indent = "&nbsp;" * 2 * getattr(s, "depth", 0)
    return f"<tr><td>{indent}<code>{escape(s.module)}</code></td>{_cell(s.type)}{_cell(f'{ins} → {outs}')}{_cell(s.calls)}</tr>"


def _sync_row(s: Any) -> str:
    ops = ", ".join(f"{k}×{v}" for k, v in sorted(s.ops.items(), key=lambda kv: -kv[1]))
    return f"<tr>{_cell(s.line)}{_code(s.code.strip())}{_cell(s.count)}{_cell(human_seconds(s.seconds))}{_cell(ops)}</tr>"


def render_sections(report: Report) -> str:
    """Collapsed static tables for tensors, modules, shapes and syncs."""
    syncs = sorted(report.syncs, key=lambda s: -s.seconds)
    return "".join(
        [
            _section(
                "Tensors", report.tensors, ["name", "shape", "dtype", "device", "size", "grad"], _tensor_row
            ),
            _section(
                "Modules",
                report.modules,
                ["name", "type", "params", "trainable", "devices", "dtypes", "mode"],
                _module_row,
            ),
            _section("Shapes", report.shape_trace, ["module", "type", "input → output", "calls"], _shape_row),
            _section(
                "Syncs", syncs, ["line", "code", "count", "waited", "ops"], _sync_row, report.sync_count()
            ),
        ]
    )


def render_html(report: Report, *, sections: bool = True) -> str:
    """The inline block: summary, one row per finding, internal errors, static sections."""
    summary = escape(summary_line(report))
    parts = [_STYLE, '<div class="tm-report">']
    findings = report.sorted_findings()
    if findings:
        parts.append(f'<div class="tm-summary">{summary}</div>')
        parts.append(f"<table><tbody>{finding_rows(findings)}</tbody></table>")
    else:
        parts.append(f'<div class="tm-clean">{summary}</div>')
    for err in report.errors:
        parts.append(f'<div class="tm-clean">⚠ torchmagic internal error: {escape(err)}</div>')
    if sections:
        parts.append(render_sections(report))
    parts.append("</div>")
    return "".join(parts)


class HTMLReport:
    """Displayable wrapper: HTML in notebooks, the summary line as plain text elsewhere."""

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
        REPORT_MIMETYPE: report.to_dict(max_rows=max_rows),
    }
