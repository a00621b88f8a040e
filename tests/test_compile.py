"""TM950 graph breaks and TM951 recompilations from real `torch.compile` runs in a real shell,
and what the capture leaves behind: nothing (loggers, handlers, callbacks, Dynamo's own state).
"""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap

import pytest

import torchmagic

# Dynamo puts `__builtins_dict___N` globals in the namespace and deletes them when the compiled
# code dies; in IPython one is sometimes deleted twice (also without torchmagic).
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")

SETUP = """
import torch
import torch._dynamo
from torch import nn
"""


@pytest.fixture
def ip(shell):
    before = set(shell.user_ns)
    shell.run_cell(SETUP, store_history=True)
    yield shell
    for name in set(shell.user_ns) - before:
        if not name.startswith("__"):  # Dynamo's own globals: it deletes them itself
            shell.user_ns.pop(name, None)


def check(ip, body: str):
    result = ip.run_cell("%%torchcheck\n" + body, store_history=True)
    report = torchmagic.last_report()
    assert not report.errors, report.errors
    return result, report


def found(report, rule: str):
    return [f for f in report.findings if f.rule == rule]


# ---- TM950 graph breaks ------------------------------------------------------------------------


def test_TM950_flags_item_print_and_data_dependent_if_at_their_lines(ip):
    _, report = check(
        ip,
        "@torch.compile(backend='eager')\n"  # 2
        "def step(x):\n"
        "    y = x * 2\n"
        "    s = y.sum().item()\n"  # 5
        "    print('step')\n"  # 6
        "    if y.sum() > 0:\n"  # 7
        "        y = y + 1\n"
        "    return y * s\n"
        "out = step(torch.randn(8, 4))\n",
    )
    by_line = {f.line: f for f in found(report, "TM950")}
    assert set(by_line) == {5, 6, 7}
    item, printed, branch = by_line[5], by_line[6], by_line[7]
    # the static check saw `.item()` and `print` too: one finding each, with both kinds of evidence
    assert item.evidence == printed.evidence == ("static", "runtime") and item.severity == "warning"
    item_text = " ".join((item.message, *item.notes))
    assert "`s = y.sum().item()`" in item_text and "`step`" in item_text
    assert "Tensor.item()" in item_text and "1 break there in this cell" in item_text
    assert "capture_scalar_outputs" in item.hint
    assert "print" in printed.message and "Move the `print` out" in printed.hint
    assert branch.evidence == ("runtime",)
    assert "data-dependent" in branch.message and "torch.where" in branch.hint and "torch.cond" in branch.hint
    assert not found(report, "TM302")  # the break is the news on that line
    (rec,) = report.compile
    assert (rec.name, rec.location, rec.line, rec.breaks) == ("step", "line 2", 10, 3)
    assert rec.graphs >= 2 and rec.recompiles == 0 and rec.compile_s > 0


def test_TM950_counts_each_break_once_per_compilation(ip):
    _, report = check(
        ip,
        "@torch.compile(backend='eager', dynamic=False)\n"
        "def step(x):\n"
        "    return x * x.sum().item()\n"  # 4
        "for n in (2, 3, 4):\n"
        "    out = step(torch.randn(n))\n",
    )
    (f,) = found(report, "TM950")
    assert f.line == 4 and "3 breaks there in this cell" in " ".join(f.notes)


def test_TM950_in_a_function_from_an_earlier_cell_is_reported_where_this_cell_calls_it(ip):
    ip.run_cell(
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.lin = nn.Linear(4, 4)\n"
        "    def forward(self, x):\n"
        "        h = self.lin(x)\n"
        "        print('hidden', tuple(h.shape))\n"  # line 7 of that cell
        "        return h\n"
        "net = Net()\n",
        store_history=True,
    )
    definer = ip.execution_count - 1
    _, report = check(ip, "fast = torch.compile(net, backend='eager')\nout = fast(torch.randn(2, 4))\n")
    (f,) = found(report, "TM950")
    assert f.line == 3
    assert f"(cell [{definer}], line 7, in `forward`)" in f.message
    assert "`print('hidden', tuple(h.shape))`" in f.message and "compiled `fast`" in f.message
    (rec,) = report.compile
    assert rec.name == "fast" and rec.location.startswith(f"cell [{definer}]")


def test_TM950_break_inside_library_code_is_info_once_at_the_users_call(ip, tmp_path, monkeypatch):
    lib = tmp_path / "site-packages" / "chattylib"
    lib.mkdir(parents=True)
    (lib / "__init__.py").write_text("def normalise(x):\n    print('normalising')\n    return x / x.norm()\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site-packages"))
    _, report = check(
        ip,
        "import chattylib\n"
        "@torch.compile(backend='eager')\n"
        "def embed(x):\n"
        "    return chattylib.normalise(x * 2)\n"  # 5
        "for _ in range(3):\n"
        "    out = embed(torch.randn(4))\n",
    )
    (f,) = found(report, "TM950")
    assert f.severity == "info" and f.line == 5
    assert "chattylib/__init__.py`, line 2" in f.message and "library code" in f.message


def test_TM950_ignores_fullgraph_and_breaks_asked_for(ip):
    result, report = check(
        ip,
        "@torch.compiler.disable\n"
        "def report_stats(y):\n"
        "    return float(y.mean())\n"
        "@torch.compile(backend='eager')\n"
        "def step(x):\n"
        "    y = x * 2\n"
        "    report_stats(y)\n"
        "    torch._dynamo.graph_break()\n"
        "    if not torch.compiler.is_compiling():\n"
        "        print('eager only')\n"
        "    return y\n"
        "out = step(torch.randn(4))\n"
        "@torch.compile(backend='eager', fullgraph=True)\n"
        "def strict(x):\n"
        "    print('strict')\n"
        "    return x * 2\n"
        "out = strict(torch.randn(4))\n",
    )
    assert result.error_in_exec is not None  # fullgraph=True raises at the break
    assert found(report, "TM950") == []
    step = next(c for c in report.compile if c.name == "step")
    assert step.breaks == 2  # still counted in the Compile section


# ---- TM951 recompilations ----------------------------------------------------------------------


def test_TM951_flags_a_changing_batch_size_with_the_sizes(ip):
    _, report = check(
        ip,
        "@torch.compile(backend='eager')\n"
        "def scale(x):\n"
        "    return x * 2\n"
        "for n in (8, 9, 10):\n"
        "    out = scale(torch.randn(n, 4))\n",  # 6
    )
    (f,) = found(report, "TM951")
    assert f.line == 6 and f.severity == "warning" and f.source == "runtime"
    assert "`scale` was recompiled once in this cell" in f.message
    assert "`x.shape[0]` changed 8 → 9" in f.message
    assert "mark_dynamic(x, 0)" in f.hint and "dynamic=True" in f.hint
    (rec,) = report.compile
    assert rec.recompiles == 1 and rec.reasons == ["`x.shape[0]` changed 8 → 9"]


def test_TM951_flags_a_python_attribute_that_changes(ip):
    ip.run_cell(
        "class Gate(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.lin = nn.Linear(4, 4)\n"
        "        self.double = True\n"
        "    def forward(self, x):\n"
        "        y = self.lin(x)\n"
        "        return y * 2 if self.double else y\n"
        "gate = Gate()\n"
        "fast = torch.compile(gate, backend='eager')\n"
        "out = fast(torch.randn(2, 4))\n",
        store_history=True,
    )
    _, report = check(ip, "gate.double = False\nout = fast(torch.randn(2, 4))\n")
    (f,) = found(report, "TM951")
    assert f.line == 3 and "`fast` was recompiled once" in f.message
    assert "`self.double` changed (was True)" in f.message


def test_TM951_ignores_a_train_eval_switch_that_stays_stable(ip):
    ip.run_cell(
        "net = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.1), nn.Linear(8, 2))\n"
        "fast = torch.compile(net, backend='eager')\n"
        "out = fast(torch.randn(4, 4))\n",
        store_history=True,
    )
    body = (
        "for epoch in range(2):\n"
        "    net.train()\n"
        "    out = fast(torch.randn(4, 4))\n"
        "    net.eval()\n"
        "    with torch.inference_mode():\n"
        "        preds = fast(torch.randn(4, 4))\n"
    )
    _, report = check(ip, body)
    assert found(report, "TM951") == []
    (rec,) = report.compile
    assert rec.recompiles >= 1  # the eval version: shown in the table, not a finding
    _, report = check(ip, body)
    assert report.compile == [] and found(report, "TM951") == []  # stable from then on


def test_TM951_is_an_error_when_the_recompile_limit_turned_compilation_off(ip):
    _, report = check(
        ip,
        "@torch.compile(backend='eager', dynamic=False)\n"
        "def shift(x):\n"
        "    return x + 1\n"
        "with torch._dynamo.config.patch(recompile_limit=3):\n"
        "    for n in range(1, 7):\n"
        "        out = shift(torch.randn(n))\n",  # 7
    )
    (f,) = found(report, "TM951")
    assert f.severity == "error" and f.line == 7
    assert "recompile limit (3)" in f.message and "plain Python" in f.message
    assert "`x.shape[0]` changed 1 → 2" in f.message
    (rec,) = report.compile
    assert rec.limit_hit and rec.recompiles == 2


def test_TM951_keeps_two_compiled_torch_nn_models_apart(ip):
    _, report = check(
        ip,
        "models = [nn.Linear(4, 2), nn.Linear(4, 3)]\n"
        "outs = [torch.compile(m, backend='eager')(torch.randn(2, 4)) for m in models]\n",
    )
    assert found(report, "TM951") == []
    assert sorted(c.name for c in report.compile) == ["models[0]", "models[1]"]
    assert {c.location for c in report.compile} == {"torch.nn.Linear"}


def test_TM951_static_flags_torch_compile_in_the_loop(ip):
    _, report = check(
        ip,
        "def step(x):\n"
        "    return x * 2\n"
        "for i in range(3):\n"
        "    fast = torch.compile(step, backend='eager')\n"  # 5
        "    out = fast(torch.randn(4))\n",
    )
    (f,) = found(report, "TM951")
    assert f.line == 5 and f.source == "static" and "every iteration" in f.message
    assert report.compile[0].recompiles == 0  # Dynamo reuses the cache: the cost is the wrapper


# ---- the inductor backend ------------------------------------------------------------------------


def test_inductor_break_and_compile_time(ip):
    _, report = check(
        ip,
        "@torch.compile\n"
        "def norm(x):\n"
        "    m = x.abs().max().item()\n"  # 4
        "    return x / m\n"
        "out = norm(torch.randn(16))\n"
        "out.sum().backward() if out.requires_grad else None\n",
    )
    (f,) = found(report, "TM950")
    assert f.line == 4
    (rec,) = report.compile
    assert rec.name == "norm" and rec.graphs >= 1 and rec.compile_s > 0.01


# ---- nothing compiled, nothing left behind -------------------------------------------------------


def _logging_state() -> dict[str, object]:
    import torch._dynamo
    import torch._dynamo.utils
    from torch._logging._internal import log_registry, log_state

    names = sorted(
        q
        for q in log_registry.get_artifact_log_qnames()
        if q.endswith(("__graph_breaks", "__recompiles", "__recompiles_verbose"))
    )
    names += ["torch._dynamo.convert_frame", "torch._dynamo", "torch"]
    loggers = {
        n: (logging.getLogger(n).level, logging.getLogger(n).propagate, tuple(logging.getLogger(n).handlers))
        for n in names
    }
    checker = torch._dynamo.utils.graph_break_dup_warning_checker
    return {
        "loggers": loggers,
        "artifacts": frozenset(log_state.artifact_names),
        "levels": dict(log_state.log_qname_to_level),
        "start": list(torch._dynamo.callback_handler.start_callbacks),
        "end": list(torch._dynamo.callback_handler.end_callbacks),
        "dup": list(checker.set),
    }


BREAKING = (
    "@torch.compile(backend='eager')\n"
    "def f(x):\n"
    "    print('x')\n"
    "    return x * x.sum().item()\n"
    "for n in (2, 3):\n"
    "    out = f(torch.randn(n))\n"
)


def test_capture_restores_every_logger_handler_callback_and_dynamo_state(ip):
    before = _logging_state()
    _, report = check(ip, BREAKING)
    assert found(report, "TM950") and found(report, "TM951")
    assert _logging_state() == before
    assert before["dup"] == []  # what Dynamo logged for us does not shorten later TORCH_LOGS output


def test_user_logging_settings_are_kept_and_still_print(ip):
    import torch

    seen: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    torch._logging.set_logs(graph_breaks=True, recompiles=True)
    user = Collect(logging.DEBUG)
    logging.getLogger("torch._dynamo").addHandler(user)  # beside torch's own handler
    try:
        before = _logging_state()
        _, report = check(ip, BREAKING)
        assert found(report, "TM950") and found(report, "TM951")
        assert any("in user code at" in m for m in seen), seen  # the user output, as without us
        assert any("Recompiling function" in m for m in seen)
        after = _logging_state()
        # Dynamo's duplicate-break memory is the user's own here: their logging filled it
        assert {k: v for k, v in after.items() if k != "dup"} == {
            k: v for k, v in before.items() if k != "dup"
        }
    finally:
        logging.getLogger("torch._dynamo").removeHandler(user)
        torch._logging.set_logs()
    assert _logging_state()["artifacts"] == frozenset()


def test_set_logs_inside_the_checked_cell_stands(ip):
    import torch

    try:
        _, report = check(ip, "torch._logging.set_logs(graph_breaks=True)\n" + BREAKING)
        assert found(report, "TM950")
        from torch._logging._internal import log_registry

        for q in log_registry.get_artifact_log_qnames():
            if q.endswith("__graph_breaks"):
                assert logging.getLogger(q).isEnabledFor(logging.DEBUG) and logging.getLogger(q).propagate
    finally:
        torch._logging.set_logs()


def test_a_cell_that_compiles_nothing_has_no_compile_section(ip):
    _, report = check(ip, "x = torch.randn(3)\ny = (x * 2).sum()\n")
    assert report.compile == [] and found(report, "TM950") == found(report, "TM951") == []


def test_a_checked_cell_without_compile_never_imports_dynamo():
    """Importing Dynamo takes over a second: a cell that cannot compile must not pay for it."""
    script = textwrap.dedent(
        """
        import sys
        from IPython.testing.globalipapp import start_ipython
        start_ipython()
        from IPython import get_ipython
        import torchmagic
        ip = get_ipython()
        ip.run_cell("%load_ext torchmagic")
        ip.run_cell("%config TorchCheck.display = 'none'")
        ip.run_cell("%%torchcheck\\nimport torch, re\\nx = torch.randn(3)\\npat = re.compile('a+')\\n")
        assert torchmagic.last_report() is not None
        print("dynamo" if "torch._dynamo" in sys.modules else "no dynamo")
        ip.run_cell("%%torchcheck\\nf = torch.compile(lambda t: t * 2, backend='eager')\\nout = f(x)\\n")
        print(len(torchmagic.last_report().compile))
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["no", "dynamo", "1"]
