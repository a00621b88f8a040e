"""End to end in a real InteractiveShell: `%load_ext torchmagic`, one `%%torchcheck` cell that
builds a model whose helper returns a plain list of layers, and what the report shows."""

from __future__ import annotations

import pytest
from IPython.utils.capture import capture_output

import torchmagic

CELL = """%%torchcheck
import torch
from torch import nn

def make_layers():
    return [nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)]

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = make_layers()

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x

net = Net()
batch = torch.randn(32, 8)
out = net(batch)
"""


@pytest.fixture
def ip(shell):
    before = set(shell.user_ns)
    yield shell
    for name in set(shell.user_ns) - before:
        shell.user_ns.pop(name, None)


def test_end_to_end_helper_list_model(ip):
    result = ip.run_cell(CELL)
    assert result.success
    report = torchmagic.last_report()
    assert report.errors == []

    tm105 = [f for f in report.findings if f.rule == "TM105"]
    assert len(tm105) == 1  # the helper hides the list from the static rule: live finds it
    assert tm105[0].object == "net.layers" and tm105[0].line == 11 and tm105[0].source == "live"

    tensors = {t.name: t for t in report.tensors}
    assert tensors["batch"].shape == (32, 8) and tensors["batch"].device == "cpu"
    assert tensors["out"].shape == (32, 4) and tensors["out"].changed
    assert tensors["out"].grad_fn == "AddmmBackward0"
    (net,) = [m for m in report.modules if m.name == "net"]
    assert net.params == 0  # the bug, as the user sees it

    trace = {s.module: s for s in report.shape_trace}
    assert [s.module for s in report.shape_trace] == [
        "net",
        "net.layers[0]",
        "net.layers[1]",
        "net.layers[2]",
    ]
    assert trace["net.layers[0]"].outputs == [[32, 16]]
    assert trace["net.layers[1]"].outputs == [[32, 16]]
    assert trace["net.layers[2]"].outputs == [[32, 4]]
    assert trace["net"].inputs == [[32, 8]] and trace["net"].outputs == [[32, 4]]

    as_dict = report.to_dict()
    assert as_dict["shape_trace"][1]["module"] == "net.layers[0]"
    assert as_dict["memory_by_device"]["cpu"] >= 32 * 8 * 4


def test_end_to_end_widget_display(ip):
    ip.run_cell("%config TorchCheck.display = 'widget'")
    try:
        with capture_output() as cap:
            ip.run_cell(CELL)
    finally:
        ip.run_cell("%config TorchCheck.display = 'none'")
    assert "internal error" not in cap.stderr
    report = torchmagic.last_report()
    assert report.errors == []
    bundles = [o.data for o in cap.outputs]
    assert any("application/vnd.jupyter.widget-view+json" in b and "text/html" in b for b in bundles)


def test_second_cell_marks_only_rebound_names_changed(ip):
    ip.run_cell(CELL)
    ip.run_cell("%%torchcheck\nout = net(batch[:4])\n")
    report = torchmagic.last_report()
    tensors = {t.name: t for t in report.tensors}
    assert tensors["out"].changed and tensors["out"].shape == (4, 4)
    assert not tensors["batch"].changed
    assert [f for f in report.findings if f.rule == "TM105"] == []  # already reported for this net
