"""%%torchcheck in a real InteractiveShell: the cell behaves exactly as without it."""

from __future__ import annotations

import re
import traceback

import pytest
from IPython.utils.capture import capture_output

import torchmagic

PROGRAMS = {
    "prints": "print('a')\nimport sys\nprint('b', file=sys.stderr)\n",
    "last_expression": "x = 21\nx * 2\n",
    "display": "from IPython.display import display, HTML\ndisplay(HTML('<b>hi</b>'))\n3\n",
    "semicolon": "y = 5\ny;\n",
    "no_value": "z = [1, 2, 3]\n",
    "torch": "import torch\nt = torch.arange(6).reshape(2, 3)\nt.sum(dim=0)\n",
    "error": "a = 1\nb = [0]\nb[3]\n",
    "error_in_function": "def f(n):\n    return 1 / n\n\nf(0)\n",
    "syntax_error": "x = (1,\n",
}


def run(shell, code: str):
    with capture_output() as cap:
        result = shell.run_cell(code, store_history=True)
    return result, cap


def normalise(text: str) -> str:
    """Cell numbers and the first line (`# plain` vs `# %%torchcheck`) differ by design."""
    return re.sub(r"(In|Out)\[\d+\]", r"\1[N]", text).replace("# %%torchcheck", "# plain")


def cell_frames(exc: BaseException | None) -> list[tuple[int, str]]:
    """(line, code) of traceback frames inside cells, as a user reads them."""
    if exc is None:
        return []
    return [
        (fs.lineno, fs.line or "")
        for fs in traceback.extract_tb(exc.__traceback__)
        if "ipython-input" in fs.filename or fs.filename.startswith("<")
    ]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_checked_cell_behaves_like_plain_cell(shell, name: str) -> None:
    body = PROGRAMS[name]
    # The same body under a comment line, so line numbers match the %%torchcheck cell.
    # IPython stops updating `_` once user code assigned it (`for _ in ...` in an earlier
    # test's cell): start each run with it unassigned, as in a fresh session
    shell.user_ns.pop("_", None)
    plain, plain_cap = run(shell, "# plain\n" + body)
    shell.user_ns.pop("_", None)
    checked, checked_cap = run(shell, "%%torchcheck\n" + body)
    assert normalise(checked_cap.stdout) == normalise(plain_cap.stdout)
    assert checked_cap.stderr == plain_cap.stderr
    assert [o.data for o in checked_cap.outputs] == [o.data for o in plain_cap.outputs]
    assert repr(checked.result) == repr(plain.result) or (checked.result is plain.result is None)
    assert type(checked.error_in_exec) is type(plain.error_in_exec)
    assert type(checked.error_before_exec) is type(plain.error_before_exec)
    assert str(checked.error_in_exec) == str(plain.error_in_exec)
    assert [ln for ln, _ in cell_frames(checked.error_in_exec)] == [
        ln for ln, _ in cell_frames(plain.error_in_exec)
    ]
    if plain.result is not None:
        assert repr(shell.user_ns["Out"][checked.execution_count]) == repr(plain.result)
        assert repr(shell.user_ns["_"]) == repr(plain.result)


def test_stacked_on_another_cell_magic(shell) -> None:
    result, cap = run(
        shell, "%%torchcheck\n%%capture captured\nprint('hidden')\nimport torch\nz = torch.ones(2)\n"
    )
    assert result.success and "hidden" not in cap.stdout
    assert shell.user_ns["captured"].stdout == "hidden\n"
    report = torchmagic.last_report()
    assert "z" in {t.name for t in report.tensors}


def test_top_level_await(shell) -> None:
    result, _ = run(shell, "%%torchcheck\nimport asyncio\nawait asyncio.sleep(0)\n'awaited'\n")
    assert result.result == "awaited"


def test_traceback_points_at_editor_line(shell) -> None:
    result, cap = run(shell, "%%torchcheck\nx = 1\ny = 2\nraise ValueError('boom')\n")
    assert isinstance(result.error_in_exec, ValueError)
    assert cell_frames(result.error_in_exec)[-1][0] == 4
    assert "----> 4 raise ValueError('boom')" in cap.stdout


def test_error_in_checked_cell_still_reported(shell) -> None:
    shell.run_cell("%config TorchCheck.display = 'none'")
    run(
        shell,
        "%%torchcheck\nimport torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return torch.zeros(3)\n1/0\n",
    )
    report = torchmagic.last_report()
    assert [(f.rule, f.line) for f in report.findings] == [("TM101", 5)]


TM101_CELL = """%%torchcheck
import torch
import torch.nn as nn

class Net(nn.Module):
    def forward(self, x):
        return x * torch.ones(x.shape[-1])

net = Net()
net(torch.randn(2, 3)).shape
"""


def test_TM101_shown_inline_with_fix(shell, monkeypatch) -> None:
    # A terminal shell computes only text/plain; a notebook frontend asks for HTML too.
    monkeypatch.setattr(shell.display_formatter, "active_types", ["text/plain", "text/html"])
    shell.run_cell("%config TorchCheck.display = 'html'")
    result, cap = run(shell, TM101_CELL)
    assert result.success
    html = "".join(o.data.get("text/html", "") for o in cap.outputs)
    assert "TM101" in html and "line 7" in html and "tensor-created-in-forward" in html
    assert "fix:" in html and "device=x.device" in html
    assert repr(result.result) == "torch.Size([2, 3])"
    f = torchmagic.last_report().findings[0]
    assert (f.rule, f.line, f.severity) == ("TM101", 7, "warning")


def test_clean_cell_shows_one_summary_line(shell) -> None:
    shell.run_cell("%config TorchCheck.display = 'text'")
    _, cap = run(shell, "%%torchcheck\nx = 1 + 1\n")
    lines = [ln for ln in cap.stdout.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("torchcheck: no issues ·")


def test_display_none_shows_nothing_but_keeps_report(shell) -> None:
    result, cap = run(shell, TM101_CELL)
    assert cap.stdout.strip() == f"Out[{result.execution_count}]: torch.Size([2, 3])"
    assert cap.outputs == [] and cap.stderr == ""
    assert torchmagic.last_report().findings[0].rule == "TM101"


def test_auto_mode_checks_every_cell_and_off_stops(shell) -> None:
    shell.run_cell("%torchcheck on")
    run(
        shell,
        "import torch\nw = torch.load('x.pt') if False else None\nv = torch.autograd.Variable\nclass A(torch.nn.Module):\n    def forward(self, x):\n        return torch.ones(2)\n",
    )
    first = torchmagic.last_report()
    # no magic line: the cell's own numbering
    assert [f.line for f in first.findings if f.rule == "TM101"] == [6]
    shell.run_cell("%torchcheck off")
    run(shell, "class B(torch.nn.Module):\n    def forward(self, x):\n        return torch.ones(2)\n")
    assert torchmagic.last_report() is first


def test_status_reports_mode(shell) -> None:
    _, cap = run(shell, "%torchcheck status")
    assert "automatic checking off" in cap.stdout
    shell.run_cell("%torchcheck on")
    _, cap = run(shell, "%torchcheck status")
    assert "automatic checking on" in cap.stdout


def test_config_select_and_ignore(shell) -> None:
    shell.run_cell("%config TorchCheck.ignore = ['TM101']")
    run(shell, TM101_CELL)
    assert torchmagic.last_report().findings == []
    shell.run_cell("%config TorchCheck.ignore = []")
    shell.run_cell("%config TorchCheck.select = ['TM2']")
    run(shell, TM101_CELL)
    assert torchmagic.last_report().findings == []
    shell.run_cell("%config TorchCheck.select = []")
    run(shell, TM101_CELL)
    assert [f.rule for f in torchmagic.last_report().findings] == ["TM101"]


def test_cell_options_override_config(shell) -> None:
    run(shell, TM101_CELL.replace("%%torchcheck", "%%torchcheck --ignore TM1"))
    assert torchmagic.last_report().findings == []


def test_suppression_comments(shell) -> None:
    run(
        shell,
        TM101_CELL.replace("torch.ones(x.shape[-1])", "torch.ones(x.shape[-1])  # torchcheck: ignore[TM101]"),
    )
    assert torchmagic.last_report().findings == []
    run(shell, "%%torchcheck\n# torchcheck: ignore-cell\n" + TM101_CELL.split("\n", 1)[1])
    assert torchmagic.last_report().findings == []


def test_unload_removes_every_hook(shell) -> None:
    from torchmagic.extension import comment_out_magic_line

    before_pre = len(shell.events.callbacks["pre_run_cell"])
    shell.run_cell("%unload_ext torchmagic")
    assert comment_out_magic_line not in shell.input_transformers_cleanup
    assert len(shell.events.callbacks["pre_run_cell"]) == before_pre - 1
    assert "torchcheck" not in shell.magics_manager.magics["cell"]
    assert not any(type(c).__name__ == "TorchCheck" for c in shell.configurables)
    assert "TorchCheckMagics" not in shell.magics_manager.registry
    result = shell.run_cell("%%torchcheck\n1\n")
    assert result.error_in_exec is not None or result.error_before_exec is not None
    shell.run_cell("%load_ext torchmagic")


def test_unload_lets_the_extension_and_its_last_report_go(shell) -> None:
    import gc
    import weakref

    import torchmagic.extension as ext

    run(shell, "%%torchcheck\nimport torch\nkept = torch.ones(3)\n")
    loaded = ext._loaded[id(shell)]
    refs = [weakref.ref(loaded), weakref.ref(loaded.check), weakref.ref(torchmagic.last_report())]
    del loaded
    shell.run_cell("%unload_ext torchmagic")
    gc.collect()
    assert [r() for r in refs] == [None, None, None]
    shell.run_cell("%load_ext torchmagic")


def test_help_shows_the_options(shell) -> None:
    with capture_output() as cap:
        shell.run_cell("%torchcheck?")
    out = cap.stdout
    for option in ("--select", "--ignore", "--no-scan", "--no-trace", "--display", "on,off,status"):
        assert option in out, option


def test_blank_line_before_the_magic_line_still_checks(shell) -> None:
    run(shell, "\n   \n" + TM101_CELL)
    report = torchmagic.last_report()
    assert report is not None and [f.rule for f in report.findings] == ["TM101"]


def test_load_ext_inside_a_string_is_not_a_control_cell(shell) -> None:
    shell.run_cell("%torchcheck on")
    try:
        run(shell, "import torch\nnote = 'run %load_ext torchmagic first'\nz = torch.zeros(2).cuda()\n")
        report = torchmagic.last_report()
        assert report is not None and [f.rule for f in report.findings] == ["TM201"]
    finally:
        shell.run_cell("%torchcheck off")


def test_bad_cell_options_are_reported_and_the_cell_still_checked(shell) -> None:
    run(shell, TM101_CELL.replace("%%torchcheck", "%%torchcheck --colour red"))
    report = torchmagic.last_report()
    assert [f.rule for f in report.findings] == ["TM101"]
    assert any("--colour" in e for e in report.errors)


def test_loading_twice_is_harmless(shell) -> None:
    shell.run_cell("%reload_ext torchmagic")
    import torchmagic.extension as ext

    ext.load(shell)
    ext.load(shell)
    assert shell.input_transformers_cleanup.count(ext.comment_out_magic_line) == 1
    assert (
        sum(
            1
            for cb in shell.events.callbacks["post_run_cell"]
            if getattr(cb, "__name__", "") == "post_run_cell"
        )
        == 1
    )
    shell.run_cell("%config TorchCheck.display = 'none'")
    run(shell, TM101_CELL)
    assert len(torchmagic.last_report().findings) == 1


def test_internal_error_is_one_warning_line_and_cell_result_kept(shell, monkeypatch) -> None:
    import torchmagic.pipeline as pipeline

    def broken(*args, **kwargs):
        raise RuntimeError("simulated lint failure")

    monkeypatch.setattr(pipeline, "lint", broken)
    result, cap = run(shell, "%%torchcheck\n40 + 2\n")
    assert result.result == 42 and result.success
    assert "simulated lint failure" in " ".join(torchmagic.last_report().errors)

    monkeypatch.setattr(pipeline.CellCheck, "_finish", broken)
    result, cap = run(shell, "%%torchcheck\n40 + 2\n")
    assert result.result == 42 and result.success
    warnings = [ln for ln in cap.stderr.splitlines() if ln.startswith("torchmagic:")]
    assert len(warnings) == 1 and "simulated lint failure" in warnings[0]
    # even then, no runtime hook outlives the cell
    import torch
    from torch.nn.modules import module as nn_module

    assert not nn_module._global_forward_hooks
    assert not torch._C._is_torch_function_mode_enabled()


def test_run_cell_magic_called_programmatically(shell) -> None:
    result, cap = run(shell, "get_ipython().run_cell_magic('torchcheck', '', 'q = 6\\nq * 7')")
    assert result.result == 42
    result, cap = run(shell, "get_ipython().run_cell_magic('torchcheck', '', 'x = 1\\n1/0')")
    assert isinstance(result.error_in_exec, ZeroDivisionError)


def test_check_source_handles_ipython_syntax_and_keeps_lines() -> None:
    code = "%%torchcheck\n%matplotlib inline\n!ls\nfiles = !ls\nx = %time 1\ntorch?\nimport torch\nfor b in range(3):\n    x = torch.randn(3)\n    print(x.item())\n"
    found = [(f.rule, f.line) for f in torchmagic.check_source(code)]
    assert ("TM000", None) not in found and all(r != "TM000" for r, _ in found)


def test_check_source_never_raises_on_bad_input() -> None:
    assert [f.rule for f in torchmagic.check_source("def f(:\n")] == ["TM000"]
    assert torchmagic.check_source("%%bash\nls -la\n") == []
    deep = "x = " + "(" * 5000 + "1" + ")" * 5000
    assert [f.rule for f in torchmagic.check_source(deep)] == ["TM000"]
    assert torchmagic.check_source("") == []


def test_no_scan_and_no_trace_options(shell) -> None:
    run(
        shell,
        "%%torchcheck --no-scan --no-trace\nimport torch\nlin = torch.nn.Linear(2, 2)\nout = lin(torch.ones(2))\n",
    )
    report = torchmagic.last_report()
    assert report.tensors == [] and report.shape_trace == []
    run(shell, "%%torchcheck\nout = lin(torch.ones(2))\n")
    report = torchmagic.last_report()
    assert "out" in {t.name for t in report.tensors}
    assert [s.module for s in report.shape_trace] == ["lin"]
