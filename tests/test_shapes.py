"""ShapeTracer: per-submodule shapes during a checked cell; hooks never outlive the cell."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn.modules import module as module_mod

import torchmagic
from torchmagic.run import CellRun
from torchmagic.runtime.shapes import ShapeTracer, tensor_shapes


@pytest.fixture
def ip(shell):
    before = set(shell.user_ns)
    shell.run_cell("import torch\nfrom torch import nn\n")
    yield shell
    for name in set(shell.user_ns) - before:
        shell.user_ns.pop(name, None)


def _hooks_installed() -> int:
    return len(module_mod._global_forward_hooks) + len(module_mod._global_forward_pre_hooks)


def trace(ip, body):
    ip.run_cell("%%torchcheck\n" + body)
    return {s.module: s for s in torchmagic.last_report().shape_trace}, torchmagic.last_report()


def test_trace_names_shapes_and_order(ip):
    body = (
        "net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Sequential(nn.Linear(16, 4)))\n"
        "out = net(torch.randn(5, 8))\n"
        "out = net(torch.randn(7, 8))\n"
    )
    shapes, report = trace(ip, body)
    assert [s.module for s in report.shape_trace] == ["net", "net.0", "net.1", "net.2", "net.2.0"]
    assert shapes["net.0"].inputs == [[5, 8]] and shapes["net.0"].outputs == [[5, 16]]
    assert shapes["net.2.0"].outputs == [[5, 4]] and shapes["net.2.0"].depth == 2
    assert shapes["net"].calls == 2 and shapes["net"].depth == 0
    assert shapes["net.0"].type == "Linear" and shapes["net.0"].dtype == "float32"
    assert shapes["net.0"].device == "cpu"


def test_trace_flattens_nested_outputs(ip):
    shapes, _ = trace(ip, "lstm = nn.LSTM(4, 6, batch_first=True)\ny, (h, c) = lstm(torch.randn(2, 3, 4))\n")
    assert shapes["lstm"].outputs == [[2, 3, 6], [1, 2, 6], [1, 2, 6]]


def test_trace_names_anonymous_modules_by_type(ip):
    shapes, _ = trace(ip, "y = nn.Linear(3, 2)(torch.randn(4, 3))\n")
    assert shapes["<Linear>"].outputs == [[4, 2]]


def test_trace_disabled_by_option(ip):
    ip.run_cell("%%torchcheck --no-trace\nnet2 = nn.Linear(2, 2)\nnet2(torch.randn(1, 2))\n")
    assert torchmagic.last_report().shape_trace == []


def test_hooks_removed_after_cell_even_on_error(ip):
    assert _hooks_installed() == 0
    ip.run_cell("%%torchcheck\nbad = nn.Linear(2, 2)\nbad(torch.randn(3, 5))\n")
    assert _hooks_installed() == 0
    report = torchmagic.last_report()
    assert any(s.module == "bad" for s in report.shape_trace)


def test_hooks_do_not_change_results_or_exceptions(ip):
    ip.run_cell("torch.manual_seed(0)\nref = nn.Linear(3, 3)(torch.ones(1, 3))\n")
    ip.run_cell("%%torchcheck\ntorch.manual_seed(0)\nres = nn.Linear(3, 3)(torch.ones(1, 3))\n")
    assert torch.equal(ip.user_ns["ref"], ip.user_ns["res"])


def test_tensor_shapes_helper():
    shapes, first = tensor_shapes(({"a": torch.ones(2), "b": [torch.ones(3, 1), 5]}, None))
    assert sorted(shapes) == [[2], [3, 1]] and first is not None


def test_tracer_standalone_counts_every_call():
    model = nn.Sequential(*[nn.Identity() for _ in range(200)])
    x = torch.ones(1)
    run = CellRun({"model": model}, "")

    tracer = ShapeTracer()
    tracer.start(run)
    try:
        for _ in range(61):
            model(x)
    finally:
        tracer.stop(run)
    assert _hooks_installed() == 0
    tracer.collect(run)
    assert len(run.report.shape_trace) == 201 and run.report.shape_trace[1].module == "model.0"
    assert run.report.shape_trace[0].calls == 1 + 3 * 20


def test_hooks_removed_when_the_extension_is_unloaded_inside_a_checked_cell(ip):
    ip.run_cell(
        "%%torchcheck\nseen = len(torch.nn.modules.module._global_forward_hooks)\n%unload_ext torchmagic\n"
    )
    assert ip.user_ns["seen"] == 1
    assert _hooks_installed() == 0
    ip.run_cell("%load_ext torchmagic")


def test_compiled_module_no_graph_break_no_warning(ip):
    import warnings

    ip.run_cell("import torch._dynamo\ntorch._dynamo.reset()\n")
    body = (
        "import warnings\n"
        "cm = torch.compile(nn.Sequential(nn.Linear(4, 4), nn.ReLU()), backend='eager')\n"
        "with warnings.catch_warnings(record=True) as caught:\n"  # keeps the active filters
        "    y = cm(torch.randn(2, 4))\n"
        "explained = torch._dynamo.explain(nn.Sequential(nn.Linear(4, 4)))(torch.randn(2, 4))\n"
    )
    ip.run_cell("%%torchcheck\n" + body)
    assert not [w for w in ip.user_ns["caught"] if "global hooks" in str(w.message)]
    assert ip.user_ns["explained"].graph_break_count == 0
    assert not [f for f in warnings.filters if f[1] is not None and "global hooks" in f[1].pattern]
    assert any(s.module == "cm" for s in torchmagic.last_report().shape_trace)


def test_trace_records_keyword_inputs(ip):
    body = (
        "class KW(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.lin = nn.Linear(3, 2)\n"
        "    def forward(self, *, features):\n"
        "        return self.lin(features)\n"
        "kw = KW()\n"
        "y = kw(features=torch.randn(6, 3))\n"
    )
    shapes, _ = trace(ip, body)
    assert shapes["kw"].inputs == [[6, 3]] and shapes["kw"].outputs == [[6, 2]]


def test_failing_forward_emits_no_hook_warning(ip):
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ip.run_cell("%%torchcheck\nbad2 = nn.Linear(2, 2)\nbad2(torch.randn(3, 5))\n")
    assert not [w for w in caught if "forward hook" in str(w.message)]
    assert _hooks_installed() == 0
