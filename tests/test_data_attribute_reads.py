"""TM403 on `.data` reads, from patterns labelled in real notebooks: a read of a tensor that never
required grad bypasses nothing and is not reported; several reads in one statement make one
finding that names the tensor with a graph first."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from torchmagic import check_source  # noqa: E402


def tm403(code: str, ns: dict | None = None):
    return [f for f in check_source(code, namespace=ns) if f.rule == "TM403"]


def test_a_read_of_a_factory_tensor_is_not_reported() -> None:
    code = "import torch\nts = torch.linspace(0, 1, 5).unsqueeze(1)\nprint(ts.data.numpy())\n"
    assert tm403(code) == []


def test_a_factory_tensor_switched_to_requires_grad_is_still_reported() -> None:
    code = "import torch\nts = torch.zeros(5)\nts.requires_grad_(True)\nprint(ts.data.numpy())\n"
    assert [f.line for f in tm403(code)] == [4]


def test_one_statement_names_the_tensor_with_a_graph_first() -> None:
    code = (
        "import torch\n"
        "import torch.nn as nn\n"
        "enc = nn.Linear(2, 2)\n"
        "def show(batch, vals):\n"
        "    ref = torch.as_tensor(vals)\n"
        "    emb = enc(batch)\n"
        "    print(ref.data, emb.data)\n"
    )
    (f,) = tm403(code)
    assert f.line == 7 and f.message.startswith("`emb.data` and `ref.data` read the tensors")
    assert f.col == 20  # at `emb.data`
    assert f.hint == "Read with `emb.detach()` and `ref.detach()`."
    assert f.fix is not None and [e.text for e in f.fix.edits] == ["ref.detach()", "emb.detach()"]


@pytest.mark.parametrize(
    ("value", "reported"),
    [
        (torch.linspace(0, 1, 3), False),
        (torch.zeros(3, requires_grad=True), True),
        (torch.zeros(3, requires_grad=True) * 2, True),  # a graph
        (nn.Parameter(torch.zeros(3), requires_grad=False), True),  # a parameter: keep reporting
    ],
)
def test_a_live_tensor_is_reported_only_when_it_requires_grad_or_has_a_graph(value, reported) -> None:
    assert bool(tm403("print(xs.data.sum())\n", {"xs": value})) is reported


def test_live_reads_name_the_tensor_with_a_graph() -> None:
    lin = nn.Linear(1, 1)
    grid = torch.linspace(-1, 1, 4).unsqueeze(1)
    ns = {"grid": grid, "pred": lin(grid), "other": torch.ones(2, requires_grad=True)}
    (f,) = tm403("print(grid.data.numpy(), pred.data.numpy())\n", ns)
    assert f.message == "`pred.data` reads the tensor behind autograd's back."
    (g,) = tm403("print(other.data, pred.data)\n", ns)
    assert "`other.data` and `pred.data`" in g.message


def test_a_write_already_under_no_grad_is_not_reported_and_one_outside_is() -> None:
    code = (
        "import torch\n"
        "params = [torch.randn(3, requires_grad=True)]\n"
        "with torch.no_grad():\n"
        "    for step in range(100):\n"
        "        for p in params:\n"
        "            p.data += -0.1 * p\n"
        "for p in params:\n"
        "    p.data.mul_(0.5)\n"
    )
    (outside,) = check_source(code, select=["TM403"])
    assert outside.line == 8 and "with torch.no_grad(): p.mul_(0.5)" in outside.hint, outside.hint


def test_a_write_into_a_gradient_is_not_reported() -> None:
    # Reptile's meta-update: `p.grad.data.add_(l.data, alpha=-1.0)` with `l` a learner weight that
    # requires grad. The gradient is in no graph, and `.data` on `l` keeps `l`'s graph out of
    # it: nothing is bypassed, so nothing is reported.
    code = (
        "import torch.nn as nn\n"
        "model, learner = nn.Linear(3, 2), nn.Linear(3, 2)\n"
        "for p, l in zip(model.parameters(), learner.parameters()):\n"
        "    p.grad.data.add_(l.data, alpha=-1.0)\n"
        "    p.grad.data.mul_(0.5).add_(p.data)\n"
    )
    assert tm403(code) == []


def test_a_write_into_an_activation_is_not_told_to_write_under_no_grad() -> None:
    """`out.data.masked_fill_(...)` on a tensor that a later layer saved for backward: the same
    write under `no_grad` would make `backward()` raise, so the hint offers the out-of-place
    write and says what `.data` does instead (tacotron2's padded mel outputs)."""
    code = (
        "import torch\nfrom torch import nn\n"
        "class Dec(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.lin = nn.Linear(4, 4)\n"
        "        self.post = nn.Linear(4, 4)\n"
        "    def forward(self, x, mask):\n"
        "        mel_out = self.lin(x)\n"
        "        post = mel_out + self.post(mel_out)\n"
        "        mel_out.data.masked_fill_(mask, 0.0)\n"
        "        return mel_out, post\n"
    )
    (f,) = tm403(code)
    assert "no_grad():" not in f.hint
    assert "`mel_out = mel_out.masked_fill(mask, 0.0)`" in f.hint
    assert "raises at `backward()`" in f.hint

    # what the hint says, checked: no_grad in place raises at backward, out of place runs
    lin, post_lin = nn.Linear(4, 4), nn.Linear(4, 4)
    x, mask = torch.randn(2, 4), torch.tensor([[True, False, False, False]] * 2)
    out = lin(x)
    post = out + post_lin(out)
    with torch.no_grad():
        out.masked_fill_(mask, 0.0)
    with pytest.raises(RuntimeError, match="inplace"):
        (post.sum() + out.sum()).backward()
    out = lin(x)
    post = out + post_lin(out)
    out = out.masked_fill(mask, 0.0)
    (post.sum() + out.sum()).backward()
    assert lin.weight.grad is not None


def test_writes_through_a_row_and_through_a_writing_helper_get_the_write_fix() -> None:
    code = (
        "import torch\nfrom torch import nn\n\n"
        "def swap_rows_(table, a, b):\n"
        "    table[a], table[b] = table[b].clone(), table[a].clone()\n\n"
        "class Symbolic(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.affine = nn.Parameter(torch.zeros(3, 3, 4))\n\n"
        "    def fix(self, j, i, params):\n"
        "        self.affine.data[j][i] = params\n\n"
        "    def swap(self, a, b):\n"
        "        with torch.no_grad():\n"
        "            swap_rows_(self.affine.data, a, b)\n\n"
        "    def swap_now(self, a, b):\n"
        "        swap_rows_(self.affine.data, a, b)\n"
    )
    row, helper = tm403(code)  # the helper's write at line 17 runs under no_grad: not reported
    assert row.line == 13 and "writes the tensor" in row.message
    assert "no_grad" in row.hint and ".detach()" not in row.hint
    assert helper.line == 20 and "passes `.data` to `swap_rows_`, which writes it in place" in helper.message
    assert "with torch.no_grad(): swap_rows_(self.affine, ...)" in helper.hint


def test_a_write_to_a_lazy_layer_is_reported_as_lost_not_as_a_write_to_redo_with_nn_init() -> None:
    # nn.init on an UninitializedParameter raises, and the `.data` write is dropped when the
    # layer materialises: check both facts on the real torch, then what the finding says
    lazy = nn.LazyLinear(1)
    lazy.weight.data.fill_(0.0)
    lazy(torch.randn(2, 3))
    assert bool((lazy.weight != 0).any())
    with pytest.raises(ValueError):
        nn.init.zeros_(nn.LazyLinear(1).weight)
    code = (
        "import torch.nn as nn\n"
        "class Reg(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.net = nn.LazyLinear(1)\n"
        "        self.net.weight.data.normal_(0, 0.01)\n"
        "        self.head = nn.Linear(4, 1)\n"
        "        self.head.weight.data.normal_(0, 0.01)\n"
    )
    lazy_f, eager_f = tm403(code)
    assert lazy_f.line == 6 and "this write is lost" in lazy_f.message and "nn.init" not in lazy_f.hint
    assert eager_f.line == 8 and "nn.init.normal_" in eager_f.hint
