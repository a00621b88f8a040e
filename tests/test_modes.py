"""Mode records and their rules in a real shell: TM505 (train mode under no_grad), TM506
(backward through eval mode), TM901 (cudnn.benchmark with many conv shapes)."""

from __future__ import annotations

import pytest
import torch
from torch.nn.modules import module as module_mod

import torchmagic
from torchmagic.pipeline import CellCheck
from torchmagic.run import CheckOptions
from torchmagic.runtime.modes import ModeRecorder
from torchmagic.runtime.shapes import ShapeTracer

MODEL = (
    "import torch\nfrom torch import nn\n"
    "net = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Dropout(0.2), nn.Linear(8, 1))\n"
    "x = torch.randn(16, 4)\n"
)


@pytest.fixture
def ip(shell):
    before = set(shell.user_ns)
    shell.run_cell(MODEL)
    yield shell
    for name in set(shell.user_ns) - before:
        shell.user_ns.pop(name, None)


def findings(ip, body, rule):
    ip.run_cell("%%torchcheck\n" + body)
    report = torchmagic.last_report()
    return [f for f in report.findings if f.rule == rule]


def test_TM505_flags_train_mode_under_no_grad(ip):
    (f,) = findings(ip, "with torch.no_grad():\n    pred = net(x)\n", "TM505")
    assert f.object == "net" and f.line == 3 and f.source == "runtime"
    assert "net.1" in f.message and "net.eval()" in f.hint


def test_TM505_flags_inference_mode(ip):
    assert len(findings(ip, "with torch.inference_mode():\n    pred = net(x)\n", "TM505")) == 1


def test_TM505_ignores_eval_mode(ip):
    assert findings(ip, "net.eval()\nwith torch.no_grad():\n    pred = net(x)\n", "TM505") == []


def test_TM505_ignores_mc_dropout(ip):
    body = "net.eval()\nnet[2].train()\nwith torch.no_grad():\n    preds = [net(x) for _ in range(3)]\n"
    assert findings(ip, body, "TM505") == []


def test_TM505_ignores_batchnorm_recalibration(ip):
    body = (
        "from torch.optim.swa_utils import update_bn\n"
        "bn_net = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8))\n"
        "update_bn([x, x], bn_net)\n"
    )
    assert findings(ip, body, "TM505") == []


def test_TM505_ignores_training_with_grad(ip):
    assert findings(ip, "loss = net(x).sum()\nloss.backward()\n", "TM505") == []


def test_TM506_flags_training_step_in_eval_mode(ip):
    body = (
        "opt = torch.optim.SGD(net.parameters(), lr=0.1)\n"
        "net.eval()\n"
        "for _ in range(3):\n"
        "    opt.zero_grad()\n"
        "    loss = net(x).pow(2).mean()\n"
        "    loss.backward()\n"
        "    opt.step()\n"
    )
    (f,) = findings(ip, body, "TM506")
    assert f.object == "net" and f.line == 7 and "net.train()" in f.hint


def test_TM506_ignores_input_gradients_without_an_optimizer_step(ip):
    body = "net.eval()\nxg = x.clone().requires_grad_()\nnet(xg).sum().backward()\nsaliency = xg.grad.abs()\n"
    assert findings(ip, body, "TM506") == []


def test_TM506_ignores_adversarial_step_then_train(ip):
    body = (
        "opt = torch.optim.SGD(net.parameters(), lr=0.1)\n"
        "net.eval()\n"
        "xa = x.clone().requires_grad_()\n"
        "net(xa).sum().backward()\n"
        "x_adv = (xa + 0.1 * xa.grad.sign()).detach()\n"
        "net.train()\n"
        "opt.zero_grad()\n"
        "net(x_adv).sum().backward()\n"
        "opt.step()\n"
    )
    assert findings(ip, body, "TM506") == []


def test_TM506_ignores_eval_forward_without_backward(ip):
    assert findings(ip, "net.eval()\nval = net(x).mean()\n", "TM506") == []


def test_TM506_ignores_frozen_batchnorm_in_training_model(ip):
    body = (
        "opt = torch.optim.SGD(net.parameters(), lr=0.1)\n"
        "net.train()\nnet[1].eval()\nnet[2].p = 0.0\nloss = net(x).sum()\nloss.backward()\nopt.step()\n"
    )
    assert findings(ip, body, "TM506") == []


def test_mode_hooks_removed_after_cell(ip):
    findings(ip, "net.eval()\nloss = net(x).sum()\n", "TM506")
    assert not module_mod._global_forward_hooks and not module_mod._global_forward_pre_hooks
    from torch.optim import optimizer

    assert not optimizer._global_optimizer_pre_hooks
    # the tensor hook left on `loss`'s graph is removed: a later backward records nothing
    ip.run_cell("loss.backward()\n")


def _run_tm901(ip, body, limit=8, benchmark=True, devices=("cpu",)):
    """The mode recorder alone around `body`; by default the CPU takes cuDNN's place."""
    modes = ModeRecorder(cudnn_devices=devices)
    check = CellCheck(collectors=[modes, ShapeTracer(modes)])  # the tracer's hooks feed the recorder
    old = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = benchmark
    try:
        check.begin(
            ip.user_ns,
            body,
            options=CheckOptions(cudnn_shape_limit=limit, scan=False),
            known_files=lambda: ip.compile._filename_map,
        )
        try:
            ip.run_cell(body)
        finally:
            report = check.end()
    finally:
        torch.backends.cudnn.benchmark = old
    return [f for f in report.findings if f.rule == "TM901"]


CONV = "conv = nn.Sequential(nn.Conv2d(1, 2, 3))\n"


def test_TM901_flags_many_conv_shapes_with_benchmark(ip):
    body = CONV + "for n in range(12):\n    conv(torch.randn(1, 1, 8 + n, 8))\n"
    (f,) = _run_tm901(ip, body)
    assert f.object == "conv.0" and "12 distinct" in f.message
    assert f.line == 3


def test_TM901_ignores_fixed_shapes(ip):
    assert _run_tm901(ip, CONV + "for n in range(12):\n    conv(torch.randn(1, 1, 8, 8))\n") == []


def test_TM901_ignores_without_benchmark(ip):
    body = CONV + "for n in range(12):\n    conv(torch.randn(1, 1, 8 + n, 8))\n"
    assert _run_tm901(ip, body, benchmark=False) == []


def test_TM901_ignores_non_cudnn_devices_by_default(ip):
    body = CONV + "for n in range(5):\n    conv(torch.randn(1, 1, 8 + n, 8))\n"
    assert _run_tm901(ip, body, limit=2, devices=("cuda",)) == []


def test_TM901_limit_zero_is_a_real_limit(ip):
    body = CONV + "conv(torch.randn(1, 1, 8, 8))\n"
    (f,) = _run_tm901(ip, body, limit=0)
    assert "1 distinct" in f.message and "limit 0" in f.message


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_TM901_on_cuda_with_default_devices(ip):
    body = "conv = nn.Conv2d(1, 2, 3).cuda()\nfor n in range(10):\n    conv(torch.randn(1, 1, 8 + n, 8, device='cuda'))\n"
    (f,) = _run_tm901(ip, body, devices=("cuda",))
    assert f.object == "conv" and "10 distinct" in f.message
