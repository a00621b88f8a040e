"""The ipywidgets view: tabs, sorting, show-all, escaping, and its static fallback."""

from __future__ import annotations

import ipywidgets

from torchmagic.report import Finding, ModuleRecord, Report, ShapeRecord, SyncRecord, TensorRecord
from torchmagic.views.html import findings_table, shapes_table, sort_tensors, syncs_table, tensors_table
from torchmagic.views.widget import ReportView, render_widget

EVIL = "<script>alert(1)</script>"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def tensor(name, nbytes=16, changed=False, **kw):
    return TensorRecord(name, [2, 2], "float32", "cpu", nbytes, False, None, False, changed, **kw)


def report() -> Report:
    return Report(
        findings=[
            Finding(
                "TM105",
                "unregistered-submodules",
                "error",
                3,
                None,
                f"`{EVIL}` msg",
                f"fix {EVIL}",
                EVIL,
                "live",
            ),
            Finding("TM402", "prefer-inference-mode", "info", 1, 0, "m", "h"),
        ],
        tensors=[tensor("small", 8), tensor(EVIL, 64, changed=True), tensor("mid", 32)],
        modules=[ModuleRecord(EVIL, "Net", 10, 10, ["cpu"], ["float32"], True, 40)],
        shape_trace=[
            ShapeRecord("net", "Net", 1, [[5, 8]], [[5, 4]], "cpu", "float32", 0),
            ShapeRecord(f"net.{EVIL}", "Linear", 2, [[5, 8]], [[5, 16]], "cpu", "float32", 1),
        ],
        syncs=[
            SyncRecord(4, 10, 0.5, {"aten::_local_scalar_dense": 10}, f"x.item() {EVIL}"),
            SyncRecord(2, 1, 0.01, {"aten::nonzero": 1}, "y.nonzero()"),
        ],
    )


def test_everything_escaped():
    r = report()
    view = render_widget(r)
    bundle = view._repr_mimebundle_()
    panes = [p.value for p in view._panes] + [view._summary.value]
    for text in [bundle["text/html"], *panes]:
        assert "<script>" not in text
    assert "&lt;script&gt;" in "".join(panes)


def test_mimebundle_has_widget_html_and_text():
    bundle = render_widget(report())._repr_mimebundle_()
    assert WIDGET_MIME in bundle and bundle[WIDGET_MIME]["model_id"]
    assert bundle["text/html"].strip() and bundle["text/plain"].startswith("torchcheck:")


def test_view_structure_and_titles():
    view = render_widget(report())
    assert isinstance(view, ReportView) and isinstance(view.widget, ipywidgets.VBox)
    assert view._tab.titles == ("Findings (2)", "Tensors (3)", "Modules (1)", "Shapes (2)", "Syncs (11)")


def test_findings_table_columns():
    html = findings_table(report().sorted_findings())
    assert html.index("TM402") < html.index("TM105")  # line 1 before line 3
    assert "<th>severity</th><th>where</th><th>rule</th><th>message and fix</th>" in html


def test_tensor_sorting_and_changed_highlight():
    r = report()
    assert [t.name for t in sort_tensors(r.tensors, "size")] == [EVIL, "mid", "small"]
    assert [t.name for t in sort_tensors(r.tensors, "name", descending=False)] == [EVIL, "mid", "small"]
    assert [t.name for t in sort_tensors(r.tensors, "size", descending=False)][0] == "small"
    html = tensors_table(r.tensors)
    assert html.count("tm-changed") == 1  # the one changed row (the css lives in the wrapper)


def test_sort_control_updates_tensor_pane():
    view = render_widget(report())
    view._sort.value = "name"
    view._order.value = "desc"
    pane = view._panes[1].value
    assert pane.index("small") < pane.index("mid")


def test_rows_capped_with_show_all():
    r = Report(tensors=[tensor(f"t{i}") for i in range(50)])
    view = ReportView(r, max_rows=10)
    assert view._panes[1].value == ""  # built when first shown
    assert view._all.layout.display == "none"  # Findings tab: nothing hidden there
    view._tab.selected_index = 1
    assert view._panes[1].value.count("<tr>") == 10 + 1 and "showing 10 of 50" in view._panes[1].value
    assert view._all.layout.display == "" and view._all.tooltip == "show all 50 rows"
    view._all.value = True
    assert view._panes[1].value.count("<tr>") == 50 + 1


def test_show_all_hidden_when_everything_fits():
    assert render_widget(report())._all.layout.display == "none"


def test_shapes_tree_indented():
    html = shapes_table(report().shape_trace)
    assert "5×8 → 5×16" in html and "&nbsp;&nbsp;<code>net.&lt;script&gt;" in html


def test_syncs_sorted_by_time():
    html = syncs_table(report().syncs)
    assert html.index("x.item()") < html.index("y.nonzero()")
    assert "aten::_local_scalar_dense×10" in html


def test_empty_report_renders():
    view = render_widget(Report())
    assert "No findings." in view._panes[0].value
    assert view._repr_mimebundle_()["text/plain"]


def test_widget_in_a_real_kernel():
    """In ipykernel the default display is the widget: comms open, and the same display
    message carries the static HTML that an exported notebook keeps."""
    import queue

    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3")
    try:

        def execute(code):
            msg_id = kc.execute(code)
            reply = kc.get_shell_msg(timeout=60)
            while reply["parent_header"].get("msg_id") != msg_id:
                reply = kc.get_shell_msg(timeout=60)
            msgs = []
            while True:
                try:
                    msg = kc.get_iopub_msg(timeout=60)
                except queue.Empty:
                    break
                if msg["parent_header"].get("msg_id") != msg_id:
                    continue
                if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                    break
                msgs.append(msg)
            return reply["content"], msgs

        reply, _ = execute("%load_ext torchmagic")
        assert reply["status"] == "ok"
        reply, msgs = execute(
            "%%torchcheck\nimport torch\nfrom torch import nn\nnet = nn.Sequential(nn.Linear(3, 2))\nout = net(torch.randn(4, 3))\n"
        )
        assert reply["status"] == "ok"
        stderr = "".join(
            m["content"]["text"]
            for m in msgs
            if m["msg_type"] == "stream" and m["content"]["name"] == "stderr"
        )
        assert "torchmagic:" not in stderr
        displays = [m["content"]["data"] for m in msgs if m["msg_type"] == "display_data"]
        (data,) = [d for d in displays if WIDGET_MIME in d]
        assert "text/html" in data and "text/plain" in data
        assert any(m["msg_type"] == "comm_open" for m in msgs)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_older_views_are_frozen_and_release_their_report():
    import gc
    import weakref

    from torchmagic.views import widget as widget_mod

    first_report = report()
    ref = weakref.ref(first_report)
    first = ReportView(first_report)
    first._tab.selected_index = 1
    html_before = first._panes[1].value
    del first_report
    for _ in range(widget_mod.INTERACTIVE_VIEWS):
        ReportView(Report())
    gc.collect()
    assert first.report is None and ref() is None
    assert first._sort.disabled and first._all.disabled
    assert first._panes[1].value == html_before  # still shows what it showed
    bundle = first._repr_mimebundle_()
    assert "&lt;script&gt;" in bundle["text/html"] and WIDGET_MIME in bundle
    first._sort.value = "name"  # ignored, no error


def test_every_view_shows_symbolic_sizes_evidence_and_notes_the_same_way() -> None:
    import io

    from rich.console import Console

    from torchmagic.report import Finding, ShapeRecord, TensorRecord
    from torchmagic.views.html import render_html
    from torchmagic.views.terminal import TerminalReport, render_text

    report = Report(
        findings=[
            Finding(
                "TM401",
                "graph-kept-alive",
                "warning",
                7,
                4,
                "`losses.append(loss)` keeps the autograd graph of every iteration alive.",
                "Store `loss.item()`.",
                object="losses",
                evidence=("static", "live"),
                notes=("`losses` holds 3 tensors with `grad_fn`.",),
            )
        ],
        tensors=[TensorRecord("nested", [2, -1], "float32", "cpu", 64, False, None, False, True)],
        shape_trace=[ShapeRecord("net.0", "Linear", 1, [[-1, 4]], [[-1, 2]], "cpu")],
    )
    view = ReportView(report)
    for i in range(len(view._panes)):
        view._tab.selected_index = i
    widget = " ".join(p.value for p in view._panes)
    static = render_html(report)
    buf = io.StringIO()
    Console(file=buf, width=200).print(TerminalReport(report))
    for text in (widget, static, buf.getvalue()):
        assert "static + live" in text
        assert "3 tensors with" in text
        assert "?×4 → ?×2" in text.replace("<code>", "").replace("</code>", "")
    assert "2×?" in widget and "2×?" in static
    assert "also: `losses` holds 3 tensors" in render_text(report)


def test_a_cell_with_nothing_to_show_builds_no_widget(shell) -> None:
    from IPython.utils.capture import capture_output

    shell.run_cell("%config TorchCheck.display = 'widget'")
    shell.run_cell("import torch\nkept = torch.ones(3)\n")
    with capture_output() as cap:
        shell.run_cell("%%torchcheck\ny = 1 + 1\n")
    (shown,) = cap.outputs
    assert "application/vnd.jupyter.widget-view+json" not in shown.data
    assert shown.data["text/plain"].startswith("torchcheck: no issues")
    with capture_output() as cap:
        shell.run_cell(
            "%%torchcheck\nz = torch.zeros(3).cuda() if False else 0\nfor i in range(3):\n    w = torch.nn.Linear(2, 2)(torch.ones(1, 2))\n"
        )
    (shown,) = cap.outputs  # a forward pass ran: the full report
    assert "application/vnd.jupyter.widget-view+json" in shown.data or "Shapes (" in shown.data["text/html"]


def fixable_report() -> Report:
    from torchmagic.pipeline import CellCheck

    code = "%%torchcheck\nimport torch\nimport torch.nn as nn\nw = nn.Linear(2, 2).weight\nnn.init.normal(w)\nfor _ in range(3):\n    with torch.no_grad():\n        y = nn.Linear(2, 2)(w)\n"
    check = CellCheck()
    ns: dict = {}
    check.begin(ns, code, cell_id="cell-7")
    exec(compile(code.split("\n", 1)[1], "<cell>", "exec"), ns)
    report = check.end(1)
    assert report is not None
    return report


def test_findings_with_an_edit_show_it_as_a_diff_of_the_cells_lines():
    r = fixable_report()
    assert r.code.startswith("%%torchcheck\n")
    html = findings_table(r.sorted_findings(), code=r.code)
    assert "<span class='tm-del'>-nn.init.normal(w)</span>" in html
    assert "<span class='tm-add'>+nn.init.normal_(w)</span>" in html
    assert "edit that may change behaviour" in html  # TM402's edit is unsafe
    # without the cell's source (an older saved report) there is no diff, only the hint
    assert "tm-diff" not in findings_table(r.sorted_findings())
    # the terminal and text/plain views show the same edit
    from torchmagic.views.terminal import render_text

    text = render_text(r)
    assert (
        "edit: Call `normal_`\n" in text
        and "-nn.init.normal(w)\n" in text
        and "+nn.init.normal_(w)\n" in text
    )
    assert "edit (may change behaviour): Use `torch.inference_mode()`" in text


def test_apply_fix_buttons_only_where_a_panel_can_edit():
    r = fixable_report()
    plain = ReportView(r)
    assert not plain._fix_buttons
    calls = []

    def apply_fix(finding, done):
        calls.append(finding.rule)
        done(finding.rule == "TM902", "" if finding.rule == "TM902" else "The cell changed")
        return True

    view = ReportView(r, apply_fix=apply_fix)
    rules = sorted({f.rule for f in r.findings if f.fix is not None})
    assert len(view._fix_buttons) == len(rules) >= 2
    by_rule = dict(zip([f.rule for f in r.sorted_findings() if f.fix is not None], view._fix_buttons))
    by_rule["TM902"].click()
    assert by_rule["TM902"].description == "Applied" and by_rule["TM902"].disabled
    by_rule["TM402"].click()
    assert by_rule["TM402"].description == "Not applied"
    assert calls == ["TM902", "TM402"]


def test_a_report_saved_in_the_notebook_does_not_repeat_the_cells_source():
    from torchmagic.views.html import REPORT_MIMETYPE, mimebundle

    r = fixable_report()
    assert "code" not in mimebundle(r)[REPORT_MIMETYPE]
    assert r.to_dict()["code"] == r.code  # the sidebar gets it
