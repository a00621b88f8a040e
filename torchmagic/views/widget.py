"""ipywidgets view of a Report: summary line and tabs (Findings, Tensors, Modules, Shapes, Syncs).

`render_widget(report)` returns a `ReportView`. Displayed in a live notebook it is an
interactive widget (sortable tensor table, "show all" per tab); wherever widgets cannot
render (an exported HTML file, nbviewer, a terminal) the same display carries the static
HTML view and a plain-text summary, because `_repr_mimebundle_` returns all three.

The tables are built by pure functions (`*_table`) that return escaped HTML strings: every
value from the user's code or namespace goes through `html.escape`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from html import escape
from typing import Any

from ..report import Finding, ModuleRecord, Report, ShapeRecord, SyncRecord, TensorRecord
from .html import inline_code, mimebundle, render_html
from .summary import human_bytes, human_seconds, summary_line

DEFAULT_ROWS = 30
SEVERITY_COLOURS = {"error": "#d32f2f", "warning": "#ef6c00", "info": "#1976d2"}

_STYLE = """<style>
.tmw{font-family:var(--jp-ui-font-family,system-ui,sans-serif);font-size:12.5px;color:var(--jp-ui-font-color1,#222)}
.tmw table{border-collapse:collapse;width:auto}
.tmw th,.tmw td{padding:2px 8px;text-align:left;vertical-align:top;border-bottom:1px solid var(--jp-border-color2,#e0e0e0)}
.tmw th{font-weight:600;color:var(--jp-ui-font-color2,#555)}
.tmw code{font-family:var(--jp-code-font-family,monospace);font-size:12px}
.tmw .tmw-changed td{background:var(--jp-warn-color3,#fff8e1)}
.tmw .tmw-muted{color:var(--jp-ui-font-color2,#666)}
</style>"""

# Sort keys of the Tensors tab: label -> (key function, descending by default)
TENSOR_SORTS: dict[str, tuple[Callable[[TensorRecord], Any], bool]] = {
    "name": (lambda t: t.name, False),
    "size": (lambda t: t.nbytes, True),
    "shape": (lambda t: (len(t.shape), t.shape), True),
    "dtype": (lambda t: t.dtype, False),
    "device": (lambda t: t.device, False),
    "grad": (lambda t: (t.grad_fn is not None, t.requires_grad), True),
    "changed": (lambda t: t.changed, True),
}


def _td(value: Any, code: bool = False) -> str:
    text = escape(str(value))
    return f"<td><code>{text}</code></td>" if code else f"<td>{text}</td>"


def _table(headers: Sequence[str], rows: Sequence[str], total: int) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    more = ""
    if total > len(rows):
        more = f"<div class='tmw-muted'>showing {len(rows)} of {total} rows</div>"
    return f"{_STYLE}<div class='tmw'><table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>{more}</div>"


def _empty(what: str) -> str:
    return f"{_STYLE}<div class='tmw tmw-muted'>{escape(what)}</div>"


def _shape(shape: Sequence[int]) -> str:
    return "×".join("?" if d < 0 else str(d) for d in shape) if shape else "scalar"


def _limit(n: int, limit: int | None) -> int:
    return n if limit is None or limit <= 0 else min(n, limit)


# ---- pure table builders -----------------------------------------------------------------------


def findings_table(findings: Sequence[Finding], limit: int | None = DEFAULT_ROWS) -> str:
    if not findings:
        return _empty("No findings.")
    rows = []
    for f in findings[: _limit(len(findings), limit)]:
        colour = SEVERITY_COLOURS.get(f.severity, "#555")
        # the message names a live object; the line column names it only when there is no line
        where = escape(str(f.line)) if f.line is not None else f"<code>{escape(f.object or '')}</code>"
        rows.append(
            "<tr>"
            f"<td>{where}</td>"
            f"<td style='white-space:nowrap'><b style='color:{colour}'>{escape(f.rule)}</b> {escape(f.name)}</td>"
            f"<td>{inline_code(f.message)}</td>"
            f"<td>{inline_code(f.hint)}</td>"
            "</tr>"
        )
    return _table(["line", "rule", "message", "fix"], rows, len(findings))


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
    limit: int | None = DEFAULT_ROWS,
) -> str:
    if not tensors:
        return _empty("No tensors in the namespace.")
    ordered = sort_tensors(tensors, key, descending)
    rows = []
    for t in ordered[: _limit(len(ordered), limit)]:
        cls = " class='tmw-changed'" if t.changed else ""
        grad = t.grad_fn or ("requires_grad" if t.requires_grad else "")
        extra = []
        if t.kind not in ("tensor", ""):
            extra.append(t.kind)
        if t.is_view:
            extra.append("view")
        if t.contiguous is False:
            extra.append("non-contiguous")
        rows.append(
            f"<tr{cls}>{_td(t.name, code=True)}{_td(_shape(t.shape))}{_td(t.dtype)}{_td(t.device)}"
            f"{_td(human_bytes(t.nbytes))}{_td(grad)}{_td(', '.join(extra))}</tr>"
        )
    return _table(["name", "shape", "dtype", "device", "size", "grad", "notes"], rows, len(ordered))


def modules_table(modules: Sequence[ModuleRecord], limit: int | None = DEFAULT_ROWS) -> str:
    if not modules:
        return _empty("No modules in the namespace.")
    rows = []
    for m in modules[: _limit(len(modules), limit)]:
        cls = " class='tmw-changed'" if m.changed else ""
        rows.append(
            f"<tr{cls}>{_td(m.name, code=True)}{_td(m.type)}{_td(f'{m.params:,}')}{_td(f'{m.trainable:,}')}"
            f"{_td(', '.join(m.devices))}{_td(', '.join(m.dtypes))}{_td('train' if m.training else 'eval')}"
            f"{_td(human_bytes(m.nbytes))}{_td(m.submodules)}</tr>"
        )
    return _table(
        ["name", "type", "params", "trainable", "devices", "dtypes", "mode", "size", "submodules"],
        rows,
        len(modules),
    )


def shapes_table(trace: Sequence[ShapeRecord], limit: int | None = DEFAULT_ROWS) -> str:
    if not trace:
        return _empty("No forward passes ran in this cell.")
    rows = []
    for s in trace[: _limit(len(trace), limit)]:
        indent = "&nbsp;&nbsp;" * max(0, min(int(s.depth or 0), 40))
        ins = ", ".join(_shape(x) for x in s.inputs) or "–"
        outs = ", ".join(_shape(x) for x in s.outputs) or "–"
        rows.append(
            f"<tr><td>{indent}<code>{escape(s.module)}</code></td>{_td(s.type)}"
            f"<td>{escape(ins)} → {escape(outs)}</td>{_td(s.calls)}{_td(s.dtype or '')}{_td(s.device or '')}</tr>"
        )
    return _table(["module", "type", "input → output", "calls", "dtype", "device"], rows, len(trace))


def syncs_table(syncs: Sequence[SyncRecord], limit: int | None = DEFAULT_ROWS) -> str:
    if not syncs:
        return _empty("No CPU-GPU synchronisations were measured.")
    ordered = sorted(syncs, key=lambda s: -s.seconds)
    rows = []
    for s in ordered[: _limit(len(ordered), limit)]:
        ops = ", ".join(f"{k}×{v}" for k, v in sorted(s.ops.items(), key=lambda kv: -kv[1]))
        rows.append(
            f"<tr>{_td(s.line)}{_td(s.count)}{_td(human_seconds(s.seconds))}{_td(ops)}{_td(s.code.strip(), code=True)}</tr>"
        )
    return _table(["line", "count", "waited", "ops", "code"], rows, len(ordered))


def summary_html(report: Report) -> str:
    text = summary_line(report)
    counts = report.counts()
    colour = (
        SEVERITY_COLOURS["error"]
        if counts.get("error")
        else SEVERITY_COLOURS["warning"]
        if counts.get("warning")
        else "#555"
    )
    return f"{_STYLE}<div class='tmw'><b style='color:{colour}'>{escape(text)}</b></div>"


def _tabs(
    report: Report, limit: int | None, key: str = "size", descending: bool | None = None
) -> list[tuple[str, str]]:
    return [
        (f"Findings ({len(report.findings)})", findings_table(report.sorted_findings(), limit)),
        (f"Tensors ({len(report.tensors)})", tensors_table(report.tensors, key, descending, limit)),
        (f"Modules ({len(report.modules)})", modules_table(report.modules, limit)),
        (f"Shapes ({len(report.shape_trace)})", shapes_table(report.shape_trace, limit)),
        (f"Syncs ({report.sync_count()})", syncs_table(report.syncs, limit)),
    ]


# ---- the widget ----------------------------------------------------------------------------------


# Views that still answer "sort"/"show all". ipywidgets keeps every widget (and so its
# report) alive for the kernel's lifetime; with a report after every cell, older views are
# frozen: they keep showing what they show, and let go of their report.
INTERACTIVE_VIEWS = 30
_live_views: deque[ReportView] = deque()


class ReportView:
    """The displayed object: a widget where widgets render, static HTML and text elsewhere."""

    def __init__(self, report: Report, max_rows: int = DEFAULT_ROWS) -> None:
        self.report: Report | None = report
        self.max_rows = max_rows
        self.show_all = False
        self.sort_key = "size"
        self.descending: bool | None = None
        self._static: dict[str, Any] | None = None
        self.widget = self._build()
        _live_views.append(self)
        while len(_live_views) > INTERACTIVE_VIEWS:
            _live_views.popleft().freeze()

    def freeze(self) -> None:
        """Stop answering the controls and drop the report (the widgets keep their content)."""
        if self.report is None:
            return
        try:
            bundle = self._bundle_without_widget()
            # the static HTML and text only: the JSON copy of the report is what we let go of
            self._static = {k: bundle[k] for k in ("text/html", "text/plain") if k in bundle}
            for control, handler in (
                (self._sort, self._on_sort),
                (self._order, self._on_sort),
                (self._all, self._on_all),
            ):
                control.unobserve(handler, names="value")
                control.disabled = True
        except Exception:
            pass
        self.report = None

    def _limit(self) -> int | None:
        return None if self.show_all else self.max_rows

    def _build(self) -> Any:
        import ipywidgets as w

        self._summary = w.HTML(summary_html(self.report))
        self._panes = [w.HTML() for _ in range(5)]
        self._sort = w.Dropdown(
            options=list(TENSOR_SORTS),
            value=self.sort_key,
            description="sort by",
            layout=w.Layout(width="200px"),
        )
        self._order = w.ToggleButtons(
            options=["default", "asc", "desc"], value="default", layout=w.Layout(width="auto")
        )
        self._sort.observe(self._on_sort, names="value")
        self._order.observe(self._on_sort, names="value")
        tensors_box = w.VBox([w.HBox([self._sort, self._order]), self._panes[1]])
        children = [self._panes[0], tensors_box, *self._panes[2:]]
        self._tab = w.Tab(children=children)
        r = self.report
        self._rows = [len(r.findings), len(r.tensors), len(r.modules), len(r.shape_trace), len(r.syncs)]
        self._all = w.ToggleButton(value=False, description="show all")
        self._all.observe(self._on_all, names="value")
        self._tab.observe(self._on_tab, names="selected_index")
        self._on_tab(None)
        self._refresh()
        return w.VBox([self._summary, self._tab, self._all])

    def _refresh(self) -> None:
        tabs = _tabs(self.report, self._limit(), self.sort_key, self.descending)
        self._tab.titles = tuple(title for title, _ in tabs)
        for pane, (_, body) in zip(self._panes, tabs):
            pane.value = body

    def _on_sort(self, change: Any) -> None:
        if self.report is None:
            return
        self.sort_key = self._sort.value
        order = self._order.value
        self.descending = None if order == "default" else order == "desc"
        self._panes[1].value = tensors_table(
            self.report.tensors, self.sort_key, self.descending, self._limit()
        )

    def _on_tab(self, change: Any) -> None:
        """'show all' only on a tab that has rows hidden."""
        rows = self._rows[self._tab.selected_index or 0]
        self._all.layout.display = "" if rows > self.max_rows else "none"
        self._all.tooltip = f"show all {rows} rows"

    def _on_all(self, change: Any) -> None:
        if self.report is None:
            return
        self.show_all = bool(self._all.value)
        self._refresh()

    def _bundle_without_widget(self) -> dict[str, Any]:
        if self.report is None:
            return dict(self._static or {"text/plain": "torchcheck report"})
        return mimebundle(self.report)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        bundle = self._bundle_without_widget()
        try:
            view = self.widget._repr_mimebundle_(include=include, exclude=exclude) or {}
            key = "application/vnd.jupyter.widget-view+json"
            if key in view:
                bundle[key] = view[key]
        except Exception:
            pass
        return bundle

    def __repr__(self) -> str:
        return (
            summary_line(self.report)
            if self.report is not None
            else self._bundle_without_widget()["text/plain"]
        )


class StaticView:
    """Where ipywidgets is missing: the static HTML and the summary line."""

    def __init__(self, report: Report) -> None:
        self.report = report

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {"text/html": render_html(self.report), "text/plain": summary_line(self.report)}

    def __repr__(self) -> str:
        return summary_line(self.report)


def render_widget(report: Report, max_rows: int = DEFAULT_ROWS) -> ReportView | StaticView:
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return StaticView(report)
    try:
        return ReportView(report, max_rows=max_rows)
    except Exception:  # no comm layer, an incompatible ipywidgets: the static view still works
        return StaticView(report)
