"""CellCheck without IPython: a namespace dict, the cell's source, `exec`, and the Report."""

from __future__ import annotations

import sys

import pytest
import torch
from torch.nn.modules import module as nn_module

from torchmagic.live import namespace as namespace_mod
from torchmagic.pipeline import CellCheck
from torchmagic.run import CheckOptions

MODEL = """\
import torch
from torch import nn


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = [nn.Linear(4, 4), nn.Linear(4, 2)]

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


net = Stack()
out = net(torch.randn(3, 4))
"""


def run_cell(check: CellCheck, ns: dict, source: str, name: str = "<cell-1>", **options):
    """What IPython does around a cell: compile under the cell's own file name, run it in the
    namespace (a `__main__` one, as IPython's is), leave an uncaught exception in `sys.last_exc`."""
    ns.setdefault("__name__", "__main__")
    files = {name: 1}
    check.begin(ns, source, options=CheckOptions(**options), execution_count=1, known_files=lambda: files)
    try:
        exec(compile(source, name, "exec"), ns)
    except Exception as e:
        sys.last_exc = sys.last_value = e
    return check.end()


@pytest.fixture(autouse=True)
def _no_last_exception():
    saved = getattr(sys, "last_exc", None), getattr(sys, "last_value", None)
    sys.last_exc = sys.last_value = None
    yield
    sys.last_exc, sys.last_value = saved


def test_report_joins_static_live_and_runtime_evidence():
    report = run_cell(CellCheck(), {}, MODEL)
    assert report is not None and report.errors == []
    (tm105,) = [f for f in report.findings if f.rule == "TM105"]
    # the static finding on the `self.layers = [...]` line and the live one about `net.layers`
    assert tm105.line == 8 and tm105.evidence == ("static", "live") and tm105.object == "net.layers"
    assert tm105.notes and "`net.layers`" in tm105.notes[0]
    assert [(s.module, s.inputs) for s in report.shape_trace] == [
        ("net", [[3, 4]]),
        ("net.layers[0]", [[3, 4]]),
        ("net.layers[1]", [[3, 4]]),
    ]
    assert {t.name for t in report.tensors} >= {"out"}
    assert {m.name for m in report.modules} == {"net"}


def test_static_and_error_evidence_of_TM405_give_one_finding_without_the_scan():
    ns: dict = {}
    run_cell(CellCheck(), ns, "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\n")
    cell = "preds = model(torch.ones(1, 2)).numpy()\n"
    report = run_cell(CellCheck(), ns, cell, name="<cell-2>", scan=False)
    (f,) = [f for f in report.findings if f.rule == "TM405"]
    assert f.line == 1 and f.evidence == ("static", "runtime")


def test_the_namespace_is_walked_once_per_cell(monkeypatch):
    calls = []
    real = namespace_mod.collect

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(namespace_mod, "collect", counting)
    ns: dict = {}
    # a forward pass (shape names), a dropout layer in train mode under no_grad (TM505 names its
    # root), tensors and modules (the scan and the live checks)
    source = MODEL + "drop = nn.Sequential(nn.Dropout(0.5))\nwith torch.no_grad():\n    drop(out)\n"
    report = run_cell(CellCheck(), ns, source)
    assert any(f.rule == "TM505" and f.object == "drop" for f in report.findings)
    assert report.shape_trace and report.tensors
    assert calls == [1]


def test_hooks_are_gone_even_when_building_the_report_fails(monkeypatch):
    check = CellCheck()

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    for c in check.collectors:
        monkeypatch.setattr(c, "collect", broken)
    report = run_cell(check, {}, MODEL)
    assert len([e for e in report.errors if "boom" in e]) == len(check.collectors)
    assert not nn_module._global_forward_hooks and not nn_module._global_forward_pre_hooks
    assert "item" not in torch.Tensor.__dict__ and not torch._C._is_torch_function_mode_enabled()


def test_abort_stops_the_running_cell_without_a_report():
    check = CellCheck()
    check.begin({}, "x = 1\n", options=CheckOptions(sync_devices=("cpu",)))
    try:
        assert nn_module._global_forward_pre_hooks and hasattr(torch.Tensor.item, "__wrapped__")
    finally:
        check.abort()
    assert not nn_module._global_forward_pre_hooks and "item" not in torch.Tensor.__dict__
    assert check.end() is None


def test_suppression_and_select_apply_to_every_source():
    source = MODEL.replace("net = Stack()", "net = Stack()  # torchcheck: ignore[TM105]").replace(
        "self.layers = [nn.Linear(4, 4), nn.Linear(4, 2)]",
        "self.layers = [nn.Linear(4, 4), nn.Linear(4, 2)]  # torchcheck: ignore",
    )
    report = run_cell(CellCheck(), {}, source)
    assert not [f for f in report.findings if f.rule == "TM105"]
    report = run_cell(CellCheck(), {}, MODEL, select=("TM2",))
    assert report.findings == []


GPU_LOOP = """\
import torch
from torch import nn
device = "cuda" if torch.cuda.is_available() else "cpu"


def accuracy(model, batches):
    correct = 0
    for x, y in batches:
        x, y = x.to(device), y.to(device)
        correct += (model(x).argmax(1) == y).sum().item()
    return correct
"""


@pytest.mark.skipif(torch.cuda.is_available(), reason="this process has a GPU")
def test_a_kernel_without_an_accelerator_gets_no_gpu_wait_findings():
    from torchmagic.lint.engine import lint

    # the same source read as a file keeps the finding: it may run on a GPU elsewhere
    assert any(f.rule == "TM301" for f in lint(GPU_LOOP).resolved())
    report = run_cell(CellCheck(), {}, GPU_LOOP)
    assert report is not None and report.errors == []
    assert not any(f.rule == "TM301" for f in report.findings)


def test_a_kernel_with_an_accelerator_keeps_the_gpu_wait_findings(monkeypatch):
    from torchmagic import pipeline

    monkeypatch.setattr(pipeline, "accelerator_available", lambda: True)
    report = run_cell(CellCheck(), {}, GPU_LOOP)
    assert [f.line for f in report.findings if f.rule == "TM301"] == [10]
