"""Live rules in a real IPython shell: TM105, TM106, TM205, TM401 after a `%%torchcheck` cell."""

from __future__ import annotations

import pytest

import torchmagic

SETUP = "import torch\nfrom torch import nn\n"


@pytest.fixture
def ip(shell):
    before = set(shell.user_ns)
    shell.run_cell(SETUP)
    yield shell
    for name in set(shell.user_ns) - before:  # the next test starts from a clean namespace
        shell.user_ns.pop(name, None)


def check(ip, body: str):
    ip.run_cell("%%torchcheck\n" + body)
    report = torchmagic.last_report()
    assert report is not None
    assert not [e for e in report.errors if "live_scan" in e], report.errors
    return report


def live(report, rule):
    return [f for f in report.findings if f.rule == rule and f.source in ("live", "runtime")]


HELPER_CLASS = """
def make_layers(n):
    return [nn.Linear(8, 8) for _ in range(n)]

class Tower(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = make_layers(3)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x
"""


def test_TM105_live_flags_helper_returned_list(ip):
    ip.run_cell(SETUP + HELPER_CLASS)  # class defined in an earlier cell: no static evidence here
    report = check(ip, "tower = Tower()\n")
    (f,) = live(report, "TM105")
    assert f.object == "tower.blocks" and f.line == 2 and f.severity == "error"
    assert "nn.ModuleList" in f.hint


def test_TM105_live_reports_once_per_object(ip):
    ip.run_cell(SETUP + HELPER_CLASS)
    check(ip, "tower = Tower()\n")
    assert live(check(ip, "y = 1\n"), "TM105") == []
    # rebinding the name to a new object reports again
    assert len(live(check(ip, "tower = Tower()\n"), "TM105")) == 1


def test_TM105_live_groups_instances_of_one_class(ip):
    ip.run_cell(SETUP + HELPER_CLASS)
    report = check(ip, "model = nn.Sequential(Tower(), Tower(), Tower())\n")
    (f,) = live(report, "TM105")
    assert f.object == "model.0.blocks" and "2 more `Tower` instances" in f.message


def test_TM105_live_ignores_registered_containers_and_plain_data(ip):
    body = (
        "class Ok(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.layers = nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2)])\n"
        "        self.alias = list(self.layers)\n"  # registered elsewhere in the model
        "        self.sizes = [2, 2]\n"
        "        self.cfg = {'act': 'relu', 'dims': (2, 2)}\n"
        "ok = Ok()\n"
    )
    assert live(check(ip, body), "TM105") == []


def test_TM105_live_defers_to_static_finding_in_same_cell(ip):
    body = (
        "class Bad(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.layers = [nn.Linear(2, 2)]\n"
        "bad = Bad()\n"
    )
    report = check(ip, body)
    tm105 = [f for f in report.findings if f.rule == "TM105"]
    assert len(tm105) == 1 and tm105[0].source == "static"


def test_TM105_live_flags_plain_dict_of_parameters(ip):
    ip.run_cell(
        SETUP + "class P(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.ws = {'a': nn.Parameter(torch.ones(2))}\n"
    )
    (f,) = live(check(ip, "p = P()\n"), "TM105")
    assert f.object == "p.ws" and "plain dict" in f.message


def test_TM106_live_flags_plain_tensor_attribute(ip):
    ip.run_cell(
        SETUP + "class Scaled(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.lin = nn.Linear(2, 2)\n"
        "        self.scale = torch.ones(2)\n"
        "        self.register_buffer('ok', torch.ones(2))\n"
    )
    report = check(ip, "x = 1\nmodel = nn.Sequential(Scaled())\n")
    (f,) = live(report, "TM106")
    assert f.object == "model.0.scale" and f.line == 3 and f.severity == "warning"
    assert 'register_buffer("scale"' in f.hint


def test_TM106_and_TM205_live_ignore_a_scalar_constant_but_not_a_learnable_one(ip):
    ip.run_cell(
        SETUP + "class Head(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.lin = nn.Linear(2, 2)\n"
        "        self.scale = torch.tensor(0.0625)\n"
        "        self.temperature = torch.tensor(1.0, requires_grad=True)\n"
    )
    report = check(ip, "head = Head().to('meta')\n")
    (f,) = live(report, "TM106")
    assert f.object == "head.temperature"
    (g,) = live(report, "TM205")
    assert "head.temperature" in g.message and "head.scale" not in g.message


def test_TM205_flags_model_on_two_devices(ip):
    report = check(
        ip,
        "net = nn.Sequential(nn.Linear(2, 2))\nnet[0].weight = nn.Parameter(torch.empty(2, 2, device='meta'))\n",
    )
    (f,) = live(report, "TM205")
    assert f.object == "net" and f.severity == "error" and "cpu and meta" in f.message


def test_TM205_pipeline_split_is_info(ip):
    report = check(ip, "pipe = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2).to('meta'))\n")
    (f,) = live(report, "TM205")
    assert f.severity == "info" and "pipeline" in f.message


def test_TM205_flags_plain_tensor_left_behind(ip):
    ip.run_cell(
        SETUP + "class Stay(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.lin = nn.Linear(2, 2)\n"
        "        self.mask = torch.ones(2)\n"
    )
    report = check(ip, "st = Stay().to('meta')\n")
    (f,) = live(report, "TM205")
    assert "`st.mask` (cpu)" in f.message
    assert live(report, "TM106")


def test_TM205_ignores_single_device_model(ip):
    assert live(check(ip, "one = nn.Sequential(nn.Linear(2, 2)).to('meta')\n"), "TM205") == []


def test_TM401_live_flags_a_list_of_graphs_that_still_hold_activations(ip):
    body = (
        "w = torch.randn(512, 512, requires_grad=True)\n"
        "losses = []\n"
        "for i in range(4):\n"
        "    loss = torch.relu(torch.randn(256, 512) @ w).sum()\n"
        "    losses.append(loss)\n"
    )
    ip.run_cell(body)  # unchecked: the static rule has nothing to say about this cell
    report = check(ip, "history = {'train': losses}\nhist = list(losses)\n")
    by_object = {f.object: f for f in live(report, "TM401")}
    # `history['train']` is two levels down: not entered
    assert set(by_object) == {"losses", "hist"}
    assert by_object["losses"].line is None  # not bound by this cell
    hist = by_object["hist"]
    assert hist.line == 3 and hist.severity == "warning"
    # four graphs, each keeping the matmul's input and the relu's output (256x512 floats,
    # 512 KiB each; w is a parameter and not counted): 4 MiB
    assert "4 tensors from 4 separate autograd graphs" in hist.message and "4.0 MiB" in hist.message
    assert "loss.item()" in hist.hint


def test_TM401_live_ignores_graphs_that_backward_already_released(ip):
    body = (
        "w = torch.randn(512, 512, requires_grad=True)\n"
        "losses = []\n"
        "for i in range(4):\n"
        "    loss = torch.relu(torch.randn(256, 512) @ w).sum()\n"
        "    loss.backward()\n"
        "    losses.append(loss)\n"
    )
    ip.run_cell(body)
    assert live(check(ip, "kept = list(losses)\n"), "TM401") == []


def test_TM401_live_ignores_a_single_output_and_hidden_states(ip):
    body = (
        "w = torch.randn(512, 512, requires_grad=True)\n"
        "out = torch.relu(torch.randn(256, 512) @ w)\n"  # the next cell may back-propagate through it
        "hidden = (torch.relu(torch.randn(256, 512) @ w), torch.relu(torch.randn(256, 512) @ w))\n"
    )
    assert live(check(ip, body), "TM401") == []


def test_TM401_live_never_unpacks_saved_tensors_with_hooks(ip):
    body = (
        "from torch.utils.checkpoint import checkpoint\n"
        "calls = []\n"
        "class Block(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc = nn.Linear(512, 512)\n"
        "    def forward(self, x):\n"
        "        calls.append(1)\n"
        "        return torch.relu(self.fc(x))\n"
        "block = Block()\n"
        "outs = [checkpoint(block, torch.randn(256, 512), use_reentrant=False) * 2 for _ in range(3)]\n"
    )
    check(ip, body)
    assert len(ip.user_ns["calls"]) == 3  # one forward each: a saved-tensor unpack would re-run it


def test_TM405_live_flags_numpy_error_at_its_line(ip):
    body = "w = torch.randn(3, requires_grad=True)\ny = w * 2\narr = y.numpy()\n"
    report = check(ip, body)
    found = [f for f in report.findings if f.rule == "TM405"]
    assert len(found) == 1 and found[0].line == 4 and "detach()" in found[0].hint


def test_TM405_live_ignores_an_older_error(ip):
    ip.run_cell("w = torch.randn(3, requires_grad=True)\nw.numpy()\n")  # unchecked cell fails
    assert [f for f in check(ip, "z = 1\n").findings if f.rule == "TM405"] == []


def test_TM405_live_ignores_other_errors(ip):
    assert [f for f in check(ip, "x = torch.ones(2)\nx.view(3)\n").findings if f.rule == "TM405"] == []


def test_TM405_one_finding_when_static_also_flags(ip):
    body = "model = nn.Linear(2, 2)\npreds = model(torch.randn(1, 2)).numpy()\n"
    found = [f for f in check(ip, body).findings if f.rule == "TM405"]
    assert len(found) == 1 and found[0].line == 3


def test_TM106_live_ignores_weight_norm_and_computed_tensors(ip):
    body = (
        "import warnings\n"
        "with warnings.catch_warnings():\n"
        "    warnings.simplefilter('ignore')\n"  # weight_norm's deprecation warning
        "    wn = torch.nn.utils.weight_norm(nn.Linear(3, 3))\n"
        "sn = torch.nn.utils.spectral_norm(nn.Linear(3, 3))\n"
        "with torch.no_grad():\n"
        "    wn(torch.randn(1, 3)); sn(torch.randn(1, 3))\n"
        "cache = nn.Linear(3, 3)\n"
        "cache.last = cache(torch.randn(1, 3))\n"  # a computed activation, not a constant
    )
    assert live(check(ip, body), "TM106") == []


def test_TM105_live_not_repeated_after_the_static_finding(ip):
    body = (
        "class Bad2(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.layers = [nn.Linear(2, 2)]\n"
        "bad2 = Bad2()\n"
    )
    assert [f.source for f in check(ip, body).findings if f.rule == "TM105"] == ["static"]
    assert [f for f in check(ip, "y = 2\n").findings if f.rule == "TM105"] == []


def test_TM401_live_confirms_the_static_finding_in_the_loop_cell_and_stays_quiet_later(ip):
    body = (
        "w = torch.randn(512, 512, requires_grad=True)\n"
        "losses = []\n"
        "for i in range(3):\n"
        "    loss = torch.relu(torch.randn(256, 512) @ w).sum()\n"
        "    losses.append(loss)\n"
    )
    found = [f for f in check(ip, body).findings if f.rule == "TM401"]
    assert [(f.evidence, f.line) for f in found] == [(("static", "live"), 6)]
    assert "saved activations" in found[0].notes[0]
    assert [f for f in check(ip, "z = 3\n").findings if f.rule == "TM401"] == []
