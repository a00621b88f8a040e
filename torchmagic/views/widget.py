"""ipywidgets view of a Report: summary line and tabs (Findings, Tensors, Modules, Shapes, Syncs,
and Compile when the cell compiled something).

`render_widget(report)` returns a `ReportView`. Displayed in a live notebook it is an
interactive widget (sortable tensor table, "show all" per tab); wherever widgets cannot
render (an exported HTML file, nbviewer, a terminal) the same display carries the static
HTML view and a plain-text summary, because `_repr_mimebundle_` returns all three.

The tables, colours and styles are the static view's (`views/html.py`): one set of pure
functions returning escaped HTML, so the widget and an exported notebook show the same thing.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from html import escape
from typing import Any

from ..report import Finding, Report
from .html import (
    TENSOR_SORTS,
    compile_table,
    findings_table,
    inline_code,
    mimebundle,
    modules_table,
    render_html,
    shapes_table,
    summary_colour,
    syncs_table,
    tensors_table,
    wrap,
)
from .summary import summary_line

DEFAULT_ROWS = 30


def summary_html(report: Report) -> str:
    return wrap(f"<b style='color:{summary_colour(report)}'>{escape(summary_line(report))}</b>")


COMPILE_TAB = 5  # shown only for a cell that compiled something


def _titles(report: Report) -> tuple[str, ...]:
    titles = (
        f"Findings ({len(report.findings)})",
        f"Tensors ({len(report.tensors)})",
        f"Modules ({len(report.modules)})",
        f"Shapes ({len(report.shape_trace)})",
        f"Syncs ({report.sync_count()})",
    )
    return (*titles, f"Compile ({len(report.compile)})") if report.compile else titles


def _tab_body(
    report: Report, index: int, limit: int | None, key: str = "size", descending: bool | None = None
) -> str:
    if index == 0:
        return wrap(findings_table(report.sorted_findings(), limit, code=report.code))
    if index == 1:
        return wrap(tensors_table(report.tensors, key, descending, limit))
    if index == 2:
        return wrap(modules_table(report.modules, limit))
    if index == 3:
        return wrap(shapes_table(report.shape_trace, limit))
    if index == COMPILE_TAB:
        return wrap(compile_table(report.compile, limit))
    return wrap(syncs_table(report.syncs, limit))


# ---- the widget ----------------------------------------------------------------------------------


# Views that still answer "sort"/"show all". ipywidgets keeps every widget (and so its
# report) alive for the kernel's lifetime; with a report after every cell, older views are
# frozen: they keep showing what they show, and let go of their report.
INTERACTIVE_VIEWS = 30
_live_views: deque[ReportView] = deque()


# Sends a finding's fix to a panel that can edit the cell; calls back with (applied, reason).
ApplyFix = Callable[[Finding, Callable[[bool, str], None]], bool]


class ReportView:
    """The displayed object: a widget where widgets render, static HTML and text elsewhere."""

    def __init__(
        self, report: Report, max_rows: int = DEFAULT_ROWS, apply_fix: ApplyFix | None = None
    ) -> None:
        self.report: Report | None = report
        self.apply_fix = apply_fix
        self._fix_buttons: list[Any] = []
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
            for button in self._fix_buttons:
                button.disabled = True
        except Exception:
            pass
        self.report = None

    def _limit(self) -> int | None:
        return None if self.show_all else self.max_rows

    def _build(self) -> Any:
        import ipywidgets as w

        r = self.report
        self._summary = w.HTML(summary_html(r))
        self._panes = [w.HTML() for _ in range(6 if r.compile else 5)]
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
        findings_box = w.VBox([self._panes[0], *self._fix_rows(w)])
        children = [findings_box, tensors_box, *self._panes[2:]]
        self._tab = w.Tab(children=children)
        self._rows = [len(r.findings), len(r.tensors), len(r.modules), len(r.shape_trace), len(r.syncs)]
        if r.compile:
            self._rows.append(len(r.compile))
        self._all = w.ToggleButton(value=False, description="show all")
        self._all.observe(self._on_all, names="value")
        self._tab.observe(self._on_tab, names="selected_index")
        self._refresh()
        return w.VBox([self._summary, self._tab, self._all])

    def _fix_rows(self, w: Any) -> list[Any]:
        """An Apply fix button per finding with an edit, where a panel can edit the cell
        (elsewhere the findings table shows each edit as a diff and there is no button)."""
        if self.apply_fix is None or self.report is None or not self.report.cell_id:
            return []
        rows = []
        for f in self.report.sorted_findings():
            if f.fix is None or f.line is None:
                continue
            risky = f.fix.applicability != "safe"
            button = w.Button(
                description="Apply fix",
                tooltip=f"{f.fix.title} (edits the cell; it is not run)"
                + (" — this edit may change behaviour" if risky else ""),
                button_style="warning" if risky else "",
                layout=w.Layout(width="auto"),
            )
            label = w.HTML(
                f"<span class='tm-muted'>line {f.line} · {escape(f.rule)} · {inline_code(f.fix.title)}"
                f"{' (may change behaviour)' if risky else ''}</span>"
            )
            button.on_click(lambda _b, f=f, button=button, label=label: self._apply(f, button, label))
            self._fix_buttons.append(button)
            rows.append(w.HBox([button, label]))
        return rows

    def _apply(self, finding: Finding, button: Any, label: Any) -> None:
        if self.apply_fix is None:
            return
        button.disabled = True
        button.description = "Applying…"

        def done(ok: bool, reason: str) -> None:
            button.description = "Applied" if ok else "Not applied"
            button.button_style = "success" if ok else "danger"
            note = "the cell is edited: run it to check it again" if ok else reason
            label.value += f"<span class='tm-muted'> — {escape(note)}</span>"

        try:
            sent = self.apply_fix(finding, done)
        except Exception:
            sent = False
        if not sent:
            done(False, "no notebook editor is attached to this kernel any more")

    def _refresh(self) -> None:
        """Titles now; a tab's table when it is first shown (most reports are read on their
        first tab, and 10,000 tensor rows are not built for nothing)."""
        self._tab.titles = _titles(self.report)
        self._stale = [True] * len(self._panes)
        self._on_tab(None)

    def _fill(self, index: int) -> None:
        if self.report is None or not self._stale[index]:
            return
        self._panes[index].value = _tab_body(
            self.report, index, self._limit(), self.sort_key, self.descending
        )
        self._stale[index] = False

    def _on_sort(self, change: Any) -> None:
        if self.report is None:
            return
        self.sort_key = self._sort.value
        order = self._order.value
        self.descending = None if order == "default" else order == "desc"
        self._panes[1].value = wrap(
            tensors_table(self.report.tensors, self.sort_key, self.descending, self._limit())
        )

    def _on_tab(self, change: Any) -> None:
        """Fill the shown tab; 'show all' only on a tab that has rows hidden."""
        self._fill(self._tab.selected_index or 0)
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


def render_widget(
    report: Report, max_rows: int = DEFAULT_ROWS, apply_fix: ApplyFix | None = None
) -> ReportView | StaticView:
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return StaticView(report)
    try:
        return ReportView(report, max_rows=max_rows, apply_fix=apply_fix)
    except Exception:  # no comm layer, an incompatible ipywidgets: the static view still works
        return StaticView(report)
