"""Details the fixture markers do not show: severities, locations, hints and suppression."""

from __future__ import annotations

from torchmagic import check_source


def only(code: str, rule: str):
    found = [f for f in check_source(code) if f.rule == rule]
    assert len(found) == 1, found
    return found[0]


def test_TM301_every_n_steps_is_the_advice_itself_and_every_step_is_flagged() -> None:
    code = (
        "import torch\n"
        "for step, x in enumerate(torch.randn(5, 3).cuda().unbind()):\n"
        "    if step % 100 == 0:\n"
        "        print(x.sum().item())\n"
        "    else:\n"
        "        v = x.mean().item()\n"
    )
    found = {(f.line, f.severity) for f in check_source(code) if f.rule == "TM301"}
    assert found == {(6, "warning")}
    ternary = (
        "loss = loss.cuda()\nfor step in range(steps):\n    print(loss.item()) if step % 50 == 0 else None\n"
    )
    assert check_source(ternary, select=["TM301"]) == []


def test_TM301_one_finding_per_statement_at_its_first_line() -> None:
    code = (
        "x = x.cuda()\n"
        "for step in range(steps):\n"
        "    print(\n"
        "        x.sum().item(),\n"
        "        x.mean().item(),\n"
        "    )\n"
    )
    (f,) = check_source(code, select=["TM301"])
    assert f.line == 3 and "x.sum().item()" in f.message and "x.mean().item()" in f.notes[0]


def test_TM301_is_silent_without_a_path_to_an_accelerator() -> None:
    loop = "for step in range(steps):\n    print(loss.item())\n"
    assert check_source(loop) == []
    # the same loop where the loss may live on a GPU
    assert [f.line for f in check_source("loss = loss.to(device)\n" + loop)] == [3]
    assert [f.line for f in check_source("model = model.cuda()\n" + loop, select=["TM301"])] == [3]


def test_TM301_quotes_the_else_branch_only_when_it_can_sync() -> None:
    code = (
        "import torch\n"
        "out = torch.randn(3).cuda()\n"
        "for _ in range(steps):\n"
        "    arr = out.cpu().numpy() if out.is_cuda else out.numpy()\n"
    )
    (f,) = check_source(code, select=["TM301"])
    assert "out.cpu()" in f.message
    assert not any("`out.numpy()`" in n for n in f.notes)


def test_TM501_points_at_the_optimizer_step_and_names_it() -> None:
    code = "for x in xs:\n    model(x).sum().backward()\n    optimizer.step()\n"
    f = only(code, "TM501")
    assert (f.line, f.col, f.severity) == (3, 4, "error")
    assert "`optimizer.step()`" in f.message and "optimizer.zero_grad(set_to_none=True)" in f.hint


def test_TM502_points_at_the_early_scheduler_step() -> None:
    code = "for x in xs:\n    scheduler.step()\n    optimizer.zero_grad()\n    optimizer.step()\n"
    assert only(code, "TM502").line == 2


def test_TM701_points_at_the_for_line() -> None:
    code = "import torch\nx = torch.randn(3, 4)\nfor i in range(len(x)):\n    x[i] = x[i] * 2\n"
    f = only(code, "TM701")
    assert (f.line, f.col) == (3, 0)


def test_hints_name_the_fix_as_code() -> None:
    f = only("import torch\nm = torch.load('ckpt.pt')\n", "TM203")
    assert "map_location=device" in f.hint
    f = only("import torch\nx = torch.randn(2, 3)\ny = x.t().view(6)\n", "TM703")
    assert "x.t().reshape(...)" in f.hint


def test_suppression_comments_silence_new_rules() -> None:
    code = "import torch\nm = torch.load('a')  # torchcheck: ignore[TM203]\nn = torch.load('b')  # torchcheck: ignore\n"
    assert check_source(code) == []
    assert [f.rule for f in check_source("import torch\nm = torch.load('a')\n", ignore=["TM2"])] == []
    assert [f.rule for f in check_source("import torch\nm = torch.load('a')\n", select=["TM203"])] == [
        "TM203"
    ]


def test_more_specific_rule_wins_on_the_same_line() -> None:
    code = (
        "import torch\nfrom torch.utils.data import Dataset\n"
        "class D(Dataset):\n"
        "    def __getitem__(self, i):\n"
        "        return self.x[i].to('cuda')\n"
    )
    assert [f.rule for f in check_source(code)] == ["TM204"]


def test_messages_keep_the_parentheses_an_attribute_needs() -> None:
    from torchmagic import check_source

    code = "import torch\nxs = torch.randn(3, requires_grad=True)\ny = (xs ** 2).data\n"
    (f,) = [f for f in check_source(code) if f.rule == "TM403"]
    assert "`(xs ** 2).data`" in f.message and "`(xs ** 2).detach()`" in f.hint
