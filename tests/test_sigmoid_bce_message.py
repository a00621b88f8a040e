"""TM904 on `binary_cross_entropy(sigmoid(z), y)` says why in user terms and names the call that
computes the same loss (found by labelling real notebooks: a textbook logistic regression)."""

from __future__ import annotations

from torchmagic import check_source

CODE = (
    "import torch\n"
    "import torch.nn.functional as F\n"
    "w = torch.zeros(3, requires_grad=True)\n"
    "score = x @ w\n"
    "p = torch.sigmoid(score)\n"
    "loss = F.binary_cross_entropy(p, target, weight=mask)\n"
)


def test_the_message_says_what_goes_wrong_and_the_hint_names_the_logits_call() -> None:
    (f,) = [f for f in check_source(CODE) if f.rule == "TM904"]
    assert f.severity == "warning"  # unstable, not wrong: see the severity test below
    assert "rounds to exactly 0 or 1" in f.message and "no gradient" in f.message
    assert "autocast" in f.message
    assert "`F.binary_cross_entropy_with_logits(score, target, weight=mask)`" in f.hint
    assert "same loss" in f.hint


def test_a_bce_module_is_told_its_logits_counterpart() -> None:
    code = "import torch\nimport torch.nn as nn\nloss = nn.BCELoss()(torch.sigmoid(z), y)\n"
    (f,) = [f for f in check_source(code) if f.rule == "TM904"]
    assert "`nn.BCEWithLogitsLoss()(z, y)`" in f.hint


def test_a_sigmoid_into_bce_is_a_warning_and_double_normalising_an_error() -> None:
    code = (
        "import torch\n"
        "import torch.nn.functional as F\n"
        "z, y = torch.randn(4, 1), torch.rand(4, 1)\n"
        "bce = F.binary_cross_entropy(torch.sigmoid(z), y)\n"
        "logits, labels = torch.randn(4, 3), torch.tensor([0, 2, 1, 0])\n"
        "ce = F.cross_entropy(F.softmax(logits, dim=1), labels)\n"
    )
    found = {f.line: f.severity for f in check_source(code) if f.rule == "TM904"}
    assert found == {4: "warning", 6: "error"}
