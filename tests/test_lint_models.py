"""Model, device and data-loading rules (TM1xx, TM2xx, TM801): what the fixture markers do not
show — messages and hints, notebooks read cell after cell, findings decided at the end."""

from __future__ import annotations

import json
from pathlib import Path

from torchmagic import check_source
from torchmagic.cli import lint_file


def notebook(tmp_path: Path, *cells: str) -> list[tuple[str, int, str, str]]:
    nb = {
        "cells": [
            {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": src}
            for src in cells
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(nb))
    _, found, errors = lint_file(str(path))
    assert errors == []
    return [(f["path"].split("#")[1], f["line"], f["rule"], f["message"]) for f in found]


LOADER_CELL = (
    "import torch\n"
    "from torch.utils.data import DataLoader, TensorDataset\n"
    "ds = TensorDataset(torch.randn(8, 2), torch.randn(8))\n"
    "train_loader = DataLoader(ds, batch_size=4{pin})\n"
)
DEVICE_CELL = "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
TRAIN_CELL = "def train(model):\n    for x, y in train_loader:\n        x, y = x.to(device), y.to(device)\n        model(x)\n"


def test_TM801_loader_of_an_earlier_cell_moved_in_a_later_one(tmp_path: Path) -> None:
    found = notebook(tmp_path, LOADER_CELL.format(pin=""), DEVICE_CELL, TRAIN_CELL, TRAIN_CELL)
    tm801 = [f for f in found if f[2] == "TM801"]
    assert [(cell, line) for cell, line, _, _ in tm801] == [("cell3", 2)]  # once per loader
    assert "`train_loader`" in tm801[0][3] and "pin_memory=True" in tm801[0][3]
    pinned = notebook(tmp_path, LOADER_CELL.format(pin=", pin_memory=True"), DEVICE_CELL, TRAIN_CELL)
    assert [f for f in pinned if f[2] == "TM801"] == []
    rebuilt = notebook(
        tmp_path,
        LOADER_CELL.format(pin=""),
        "train_loader = DataLoader(ds, batch_size=4, pin_memory=True)\n",
        DEVICE_CELL,
        TRAIN_CELL,
    )
    assert [f for f in rebuilt if f[2] == "TM801"] == []


FIT_CELL = (
    "def fit(model, dev, loader, epochs=1):\n"
    "    for _ in range(epochs):\n"
    "        for step, (x, y) in enumerate(loader):\n"
    "            model(x.to(dev)).sub(y.to(dev)).pow(2).mean().backward()\n"
)


def test_TM801_loader_handed_to_a_function_of_an_earlier_cell(tmp_path: Path) -> None:
    net = "net = torch.nn.Linear(2, 1).to(device)\n"
    found = notebook(
        tmp_path, LOADER_CELL.format(pin=""), DEVICE_CELL, FIT_CELL, net + "fit(net, device, train_loader)\n"
    )
    tm801 = [f for f in found if f[2] == "TM801"]
    assert [(cell, line) for cell, line, _, _ in tm801] == [("cell4", 2)]
    assert "`train_loader`" in tm801[0][3] and "`fit` copies to the GPU" in tm801[0][3]
    pinned = notebook(
        tmp_path,
        LOADER_CELL.format(pin=", pin_memory=True"),
        DEVICE_CELL,
        FIT_CELL,
        net + "fit(net, device, train_loader)\n",
    )
    assert [f for f in pinned if f[2] == "TM801"] == []
    # `fit` defined again without moving the batches: nothing is copied to the GPU
    cpu_fit = "def fit(model, dev, loader):\n    for x, y in loader:\n        model(x)\n"
    redefined = notebook(
        tmp_path,
        LOADER_CELL.format(pin=""),
        DEVICE_CELL,
        FIT_CELL,
        cpu_fit,
        net + "fit(net, device, train_loader)\n",
    )
    assert [f for f in redefined if f[2] == "TM801"] == []


def test_TM203_own_checkpoint_in_a_notebook_needs_an_accelerator_somewhere(tmp_path: Path) -> None:
    cell = "import torch\nnet = torch.nn.Linear(2, 2)\nnet.load_state_dict(torch.load('w.pt'))\ntorch.save(net.state_dict(), 'w.pt')\n"
    assert [f for f in notebook(tmp_path, cell) if f[2] == "TM203"] == []
    # a later cell trains on the GPU: this cell ran before it, and wrote the file from the CPU
    move = "import torch\nnet = torch.nn.Linear(2, 2).to('cuda' if torch.cuda.is_available() else 'cpu')\n"
    found = notebook(tmp_path, cell, move)
    assert [(c, line) for c, line, rule, _ in found if rule == "TM203"] == []
    # an earlier cell did: the notebook has a GPU path when this cell runs
    found = notebook(tmp_path, move, cell)
    assert [(c, line) for c, line, rule, _ in found if rule == "TM203"] == [("cell2", 3)]


def test_TM203_file_an_earlier_cell_saved_is_reloaded_in_the_same_run(tmp_path: Path) -> None:
    save = "import torch\nlayer = torch.nn.Linear(3, 1)\ntorch.save(layer.state_dict(), 'layer.bin')\n"
    load = "again = torch.nn.Linear(3, 1)\nagain.load_state_dict(torch.load('layer.bin'))\n"
    assert [f for f in notebook(tmp_path, save, load) if f[2] == "TM203"] == []
    # loaded before any cell saved it, or another file: it may come from elsewhere
    found = notebook(tmp_path, load.replace("again =", "import torch\nagain ="), save)
    assert [(c, line) for c, line, rule, _ in found if rule == "TM203"] == [("cell1", 3)]
    other = notebook(tmp_path, save, load.replace("layer.bin", "other.bin"))
    assert [(c, line) for c, line, rule, _ in other if rule == "TM203"] == [("cell2", 2)]


def test_TM203_file_a_cell_this_kernel_ran_saved_is_not_flagged() -> None:
    load = "import torch\nagain = torch.nn.Linear(3, 1)\nagain.load_state_dict(torch.load('layer.bin'))\n"
    ran = [
        "",
        "import torch\nlayer = torch.nn.Linear(3, 1).cuda()\ntorch.save(layer.state_dict(), 'layer.bin')\n",
    ]
    assert check_source(load, {"_ih": ran}, select=["TM203"]) == []
    assert [f.line for f in check_source(load, {"_ih": ran[:1]}, select=["TM203"])] == [3]
    # a save inside a function the kernel defined says nothing about when it ran
    in_def = ["", "import torch\ndef keep(m):\n    torch.save(m.state_dict(), 'layer.bin')\n"]
    assert [f.line for f in check_source(load, {"_ih": in_def}, select=["TM203"])] == [3]


def test_TM203_multi_line_load_is_reported_at_its_statement() -> None:
    code = "import torch\nstate = torch.load(\n    'ckpt.pt',\n)\nnet.load_state_dict(\n    torch.load('b.pt'))\n"
    assert [f.line for f in check_source(code, select=["TM203"])] == [2, 5]


def test_TM102_quotes_whole_expressions() -> None:
    code = (
        "import torch\nimport torch.nn as nn\n"
        "class Part(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.device = torch.device('cuda')\n"
        "        self.seq = nn.Sequential(\n"
        "            nn.Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False),\n"
        "            nn.ReLU(inplace=True),\n"
        "        ).to(self.device)\n"
    )
    (f,) = check_source(code, select=["TM102"])
    assert f.line == 7
    assert f.message.startswith("`nn.Sequential(...).to(self.device)` inside `Part.__init__`"), f.message


def test_TM107_frozen_backbone_gets_the_freeze_advice() -> None:
    code = (
        "import torch.nn as nn\n"
        "class Enc(nn.Module):\n"
        "    def __init__(self, cnn):\n"
        "        super().__init__()\n"
        "        self.cnn = nn.Sequential(cnn)\n"
        "        self.fc = nn.Linear(4, 4)\n"
        "    def forward(self, images):\n"
        "        feats = self.cnn(images)\n"
        "        return self.fc(feats.detach())\n"
    )
    (f,) = check_source(code, select=["TM107"])
    assert "`self.cnn`" in f.message
    assert "self.cnn.requires_grad_(False)" in f.hint and "otherwise remove" in f.hint
    frozen = code.replace(
        "self.fc = nn.Linear", "self.cnn.requires_grad_(False)\n        self.fc = nn.Linear"
    )
    assert check_source(frozen, select=["TM107"]) == []


def test_TM107_message_keeps_the_operand_whole() -> None:
    code = (
        "import torch.nn as nn\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.enc = nn.Linear(4, 4)\n"
        "    def forward(self, x):\n"
        "        h = self.enc(x)\n"
        "        return (h - x).detach()\n"
    )
    (f,) = check_source(code, select=["TM107"])
    assert f.message.startswith("`(h - x).detach()`"), f.message


def test_TM107_ignores_the_straight_through_estimator() -> None:
    code = (
        "import torch.nn as nn\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.enc = nn.Linear(4, 4)\n"
        "    def forward(self, x):\n"
        "        h = self.enc(x)\n"
        "        return h + (h.round() - h).detach()\n"
    )
    assert check_source(code, select=["TM107"]) == []


def test_TM102_new_tensor_hint_follows_the_parameters() -> None:
    code = (
        "import torch\n"
        "import torch.nn as nn\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.rnn = nn.GRU(4, 4)\n"
        "    def init_hidden(self, n):\n"
        "        return torch.zeros(1, n, 4).cuda()\n"
        "    def forward(self, x):\n"
        "        return self.rnn(x.cuda())\n"
    )
    fresh, moved = check_source(code, select=["TM102"])
    assert "next(self.parameters()).device" in fresh.hint, fresh.hint
    # the input itself has no other input to follow: it goes where the module's tensors are
    assert "next(self.parameters()).device" in moved.hint, moved.hint
    derived = code.replace("self.rnn(x.cuda())", "self.rnn(x).cpu()")
    (f,) = check_source(derived, select=["TM102"])[1:]
    assert "`.to(x.device)`" in f.hint, f.hint


def test_TM102_trainer_forward_follows_its_own_buffer() -> None:
    """A module whose forward is a whole training step (it draws its own batches, back-propagates
    and steps its optimizer) has no input to follow: the hint names a tensor of its own."""
    code = (
        "import torch\n"
        "import torch.nn as nn\n"
        "class Fitter(nn.Module):\n"
        "    def __init__(self, net, loader):\n"
        "        super().__init__()\n"
        "        self.net = net\n"
        "        self.batches = iter(loader)\n"
        "        self.opt = torch.optim.SGD(net.parameters(), lr=0.1)\n"
        "        self.register_buffer('step_count', torch.zeros(()))\n"
        "    def forward(self):\n"
        "        xb, yb = next(self.batches)\n"
        "        xb, yb = xb.cuda(), yb.cuda()\n"
        "        loss = nn.functional.mse_loss(self.net(xb), yb)\n"
        "        loss.backward()\n"
        "        self.opt.step()\n"
        "        self.opt.zero_grad()\n"
        "        self.step_count += 1\n"
    )
    (f,) = check_source(code, select=["TM102"])
    assert f.line == 12
    assert "hardcodes the device of a trainer" in f.message and "whole training step" in f.message, f.message
    assert "`.to(self.step_count.device)`" in f.hint and "x.device" not in f.hint, f.hint
    no_buffer = code.replace("        self.register_buffer('step_count', torch.zeros(()))\n", "").replace(
        "        self.step_count += 1\n", ""
    )
    (f,) = check_source(no_buffer, select=["TM102"])
    assert "`.to(next(self.parameters()).device)`" in f.hint, f.hint
    # a model's forward (no optimizer step) keeps the input-following advice
    model = code.replace("        self.opt.step()\n", "")
    (f,) = check_source(model, select=["TM102"])
    assert "moves data to a device the module chose itself" in f.message, f.message


def test_TM102_stacked_input_list_goes_where_the_parameters_are() -> None:
    """`torch.stack(x)` of the list of host tensors the forward was given has no input device
    to follow: `.to(x.device)` would keep it on the host."""
    code = (
        "import torch\n"
        "import torch.nn as nn\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.device = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
        "        self.fc = nn.Linear(4, 2)\n"
        "    def forward(self, x, **kwargs):\n"
        "        x = torch.stack(x, dim=0).to(self.device)\n"
        "        return self.fc(x)\n"
    )
    (f,) = check_source(code, select=["TM102"])
    assert "`.to(next(self.parameters()).device)`" in f.hint, f.hint
    assert "x.device" not in f.hint, f.hint


def test_TM102_hint_of_a_module_without_parameters_follows_the_input() -> None:
    """`next(self.parameters())` raises StopIteration in a module that registers nothing."""
    code = (
        "import torch\n"
        "import torch.nn as nn\n"
        "class Loss(nn.Module):\n"
        "    def __init__(self, gamma=2.0):\n"
        "        super().__init__()\n"
        "        self.gamma = gamma\n"
        "    def forward(self, scores, labels):\n"
        "        w = torch.tensor([0.5, 2.0]).cuda()\n"
        "        t = (labels * 2).cuda()\n"
        "        idx = labels.cuda()\n"
        "        return (scores * w).sum() + t.sum() + scores[idx].sum()\n"
        "    def prepare(self, batch):\n"
        "        return batch.cuda()\n"
    )
    fresh, moved, other_input, given = check_source(code, select=["TM102"])
    assert "`.to(scores.device)`" in other_input.hint, other_input.hint
    assert "parameters()" not in fresh.hint and "device=scores.device" in fresh.hint, fresh.hint
    assert "parameters()" not in moved.hint and "`.to(scores.device)`" in moved.hint, moved.hint
    assert "parameters()" not in given.hint and "drop the move" in given.hint, given.hint


def test_TM201_silent_in_code_that_requires_cuda() -> None:
    code = "import torch\nassert torch.cuda.is_available()\nx = torch.ones(2).cuda()\n"
    assert check_source(code, select=["TM201"]) == []
    optional = code.replace("assert torch.cuda.is_available()", "ok = torch.cuda.is_available()")
    assert [f.rule for f in check_source(optional, select=["TM201"])] == ["TM201"]


def test_TM201_one_finding_per_statement() -> None:
    code = "import torch\na, b = torch.randn(2).cuda(), torch.randn(3).cuda()\n"
    (f,) = check_source(code, select=["TM201"])
    assert f.line == 2


def test_TM601_module_built_and_loaded_gets_no_fix_where_the_entry_is_read_back() -> None:
    save = (
        "import torch\n"
        "from nets import Decoder\n"
        "def snapshot(net, dest):\n"
        "    copy = Decoder()\n"
        "    copy.load_state_dict(net.state_dict())\n"
        "    torch.save({'decoder': copy}, dest)\n"
    )
    (f,) = check_source(save, select=["TM601"])
    assert f.line == 6 and f.fix is not None and f.fix.applicability == "unsafe"
    # this code loads the entry back and uses it as a module: the edit alone would break it
    reader = "def restore(net, src):\n    net.load_state_dict(torch.load(src)['decoder'].state_dict())\n"
    (g,) = check_source(save + reader, select=["TM601"])
    assert g.fix is None


def test_TM102_cuda_on_a_module_of_this_source_that_registers_nothing() -> None:
    """`Module._apply` moves parameters, buffers and submodules only: a plain tensor attribute
    stays where it is, so `.cuda()` on a class that keeps only such moves nothing."""
    code = (
        "import torch\n"
        "import torch.nn as nn\n"
        "class Bins(nn.Module):\n"
        "    def __init__(self, n=15):\n"
        "        super().__init__()\n"
        "        edges = torch.linspace(0, 1, n + 1)\n"
        "        self.lo = edges[:-1]\n"
        "        self.hi = edges[1:]\n"
        "    def forward(self, p):\n"
        "        return sum(((p > a) & (p <= b)).float().mean() for a, b in zip(self.lo, self.hi))\n"
        "class Holder(nn.Module):\n"
        "    def __init__(self, inner):\n"
        "        super().__init__()\n"
        "        self.inner = inner\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc = nn.Linear(2, 2)\n"
        "    def score(self, x, inner):\n"
        "        bins = Bins().cuda()\n"
        "        held = Holder(inner).cuda()\n"
        "        return bins(self.fc(x)), held\n"
    )
    (f,) = check_source(code, select=["TM102"])
    assert "Holder(inner).cuda()" in f.message, f.message  # `inner` may be a submodule


def test_TM107_max_pair_bound_to_a_name_is_a_stability_shift_not_a_crash() -> None:
    from torchmagic.lint import lint

    head = (
        "import torch\nfrom torch import nn\n\n"
        "class Head(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc = nn.Linear(4, 3)\n\n"
        "    def forward(self, x, given):\n"
        "        logits = self.fc(x)\n"
    )
    shift = (
        head + "        top = torch.max(logits, 1, keepdim=True)\n        return logits - top[0].detach()\n"
    )
    result = lint(shift)
    assert result.errors == [] and [f for f in result.findings if f.rule == "TM107"] == []
    # a pair from the caller, or a max of something else, is no shift of these logits
    unknown = head + "        m, _ = given\n        return logits - m.detach()\n"
    result = lint(unknown)
    assert result.errors == [] and [f.line for f in result.findings if f.rule == "TM107"] == [12]
