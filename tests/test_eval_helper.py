"""TM408 when the evaluation loop's forward pass runs in a helper function (found by labelling
real notebooks: `model.eval()` then `dev_loss += calc_loss(x, y).item()`)."""

from __future__ import annotations

import json

from test_cli import notebook, run

from torchmagic import check_source

HELPER = (
    "import torch\n"
    "import torch.nn as nn\n"
    "net = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5))\n"
    "crit = nn.MSELoss()\n"
    "def pair_loss(a, b):\n"
    "    return crit(net(a), b)\n"
)
LOOP = "net.eval()\ntotal = 0.0\nfor a, b in pairs:\n    total += pair_loss(a, b).item()\n"


def test_a_helper_of_the_same_file_is_followed_and_named() -> None:
    (f,) = [f for f in check_source(HELPER + LOOP) if f.rule == "TM408"]
    assert f.line == 9
    assert "runs `pair_loss(...)`, which calls `net(...)`, after `net.eval()`" in f.message


def test_a_helper_that_back_propagates_or_is_decorated_is_not() -> None:
    backward = HELPER.replace(
        "    return crit(net(a), b)\n", "    l = crit(net(a), b)\n    l.backward()\n    return l\n"
    )
    decorated = HELPER.replace("def pair_loss", "@torch.inference_mode()\ndef pair_loss")
    for code in (backward, decorated):
        assert [f for f in check_source(code + LOOP) if f.rule == "TM408"] == []


def test_a_helper_of_an_earlier_notebook_cell_is_followed(tmp_path) -> None:
    nb = tmp_path / "eval.ipynb"
    nb.write_text(notebook([("code", HELPER), ("code", LOOP)]))
    out = run("check", str(nb), "--format", "json", "--select", "TM408")
    found = [(f["path"].rsplit("#", 1)[-1], f["line"]) for f in json.loads(out.stdout)]
    assert found == [("cell2", 3)]


def test_no_grad_results_a_later_cell_changes_in_place_keep_no_grad(tmp_path) -> None:
    """TM402: `normalize` of an earlier cell changes its argument in place; inference tensors
    refuse that outside inference_mode, so `no_grad` there is not replaceable."""
    helper = "def normalize(x):\n    x.clamp_(0, 1)\n    return x\n"
    use = (
        "import torch\nimport torch.nn as nn\nnet = nn.Linear(3, 3)\n"
        "for step in range(4):\n"
        "    with torch.no_grad():\n        y = net(torch.full((1, 3), float(step)))\n"
    )
    for changes, expected in (("    img = normalize(y[0])\n", []), ("    img = y[0] * 2\n", [("cell2", 5)])):
        nb = tmp_path / "gen.ipynb"
        nb.write_text(notebook([("code", helper), ("code", use + changes)]))
        out = run("check", str(nb), "--format", "json", "--select", "TM402")
        found = [(f["path"].rsplit("#", 1)[-1], f["line"]) for f in json.loads(out.stdout)]
        assert found == expected


def test_a_sync_helper_of_an_earlier_cell_makes_a_timing_loop_wait_on_purpose(tmp_path) -> None:
    """TM301: `synchronize()` defined in an earlier cell, then a clock: each pass of the
    benchmark waits for the GPU there, so the copy after it is no wait of its own."""
    helper = (
        "import time\nimport torch\ndevice = torch.device('cuda')\n"
        "def synchronize():\n    torch.cuda.synchronize(device)\n"
    )
    loop = (
        "net = torch.nn.Linear(4, 4).to(device)\nrows = []\n"
        "for x in batches:\n"
        "    start = time.perf_counter()\n"
        "    y = net(x.to(device))\n"
        "    synchronize()\n"
        "    seconds = time.perf_counter() - start\n"
        "    rows.append((seconds, y.cpu()))\n"
    )
    for timed, expected in ((True, []), (False, [("cell2", 7)])):
        code = loop if timed else loop.replace("    seconds = time.perf_counter() - start\n", "")
        nb = tmp_path / "bench.ipynb"
        nb.write_text(notebook([("code", helper), ("code", code)]))
        out = run("check", str(nb), "--format", "json", "--select", "TM301")
        found = [(f["path"].rsplit("#", 1)[-1], f["line"]) for f in json.loads(out.stdout)]
        assert found == expected
