"""The Compile section in every renderer: static HTML, the widget's tab, rich text, the comm."""

from __future__ import annotations

import io
import json

from torchmagic.report import CompileRecord, Finding, Report
from torchmagic.views.comm import report_message
from torchmagic.views.html import compile_table, has_news, render_html
from torchmagic.views.summary import summary_line
from torchmagic.views.terminal import print_rich
from torchmagic.views.widget import COMPILE_TAB, ReportView

EVIL = "<script>alert(1)</script>"


def compiled() -> Report:
    return Report(
        findings=[Finding("TM951", "recompile", "warning", 9, None, "`step` was recompiled once", "fix")],
        compile=[
            CompileRecord(
                "step",
                "line 2",
                9,
                graphs=3,
                breaks=2,
                recompiles=1,
                compile_s=1.25,
                reasons=["`x.shape[0]` changed 8 → 9"],
            ),
            CompileRecord(
                EVIL,
                f"cell [3], {EVIL}",
                None,
                graphs=1,
                recompiles=8,
                compile_s=0.5,
                limit_hit=True,
                reasons=[EVIL],
            ),
        ],
    )


def test_compile_table_lists_functions_and_escapes():
    html = compile_table(compiled().compile)
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<code>x.shape[0]</code> changed 8 → 9" in html
    assert "recompile limit reached" in html and "(called at line 9)" in html
    assert "1.25 s" in html
    assert "Nothing was compiled" in compile_table([])


def test_static_view_has_a_compile_section_only_when_something_compiled():
    assert "Compile (2)" in render_html(compiled())
    assert "Compile (" not in render_html(Report())
    assert has_news(Report(compile=compiled().compile))


def test_summary_line_says_how_long_compiling_took():
    assert "compiled 2 functions in 1.75 s" in summary_line(compiled())
    assert "compiled" not in summary_line(Report())


def test_widget_has_a_compile_tab_built_when_shown():
    view = ReportView(compiled())
    assert view._tab.titles[COMPILE_TAB] == "Compile (2)"
    assert view._panes[COMPILE_TAB].value == ""  # built when first shown
    view._tab.selected_index = COMPILE_TAB
    assert "step" in view._panes[COMPILE_TAB].value and "<script>" not in view._panes[COMPILE_TAB].value
    assert len(ReportView(Report())._tab.titles) == 5  # no Compile tab for a cell that compiled nothing


def test_rich_view_has_a_compile_table():
    out = io.StringIO()
    print_rich(compiled(), file=out)
    text = out.getvalue()
    assert "compile" in text and "step" in text and "recompile limit" in text


def test_sidebar_message_carries_the_compile_records():
    msg = report_message(compiled())
    json.dumps(msg)
    rows = msg["report"]["compile"]
    assert rows[0] == {
        "name": "step",
        "location": "line 2",
        "line": 9,
        "graphs": 3,
        "breaks": 2,
        "recompiles": 1,
        "compile_s": 1.25,
        "limit_hit": False,
        "reasons": ["`x.shape[0]` changed 8 → 9"],
    }
    assert rows[1]["limit_hit"] is True
