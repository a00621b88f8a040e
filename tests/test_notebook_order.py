"""GPU findings in a notebook follow the order its cells run in: a cell's top-level loop runs
before a later cell moves the model to the GPU, so its reads wait for no GPU; a function it
defines may be called after the move, so its reads still count (found labelling a held-out
notebook: a sanity-check print loop that ran before `model.to(device)`)."""

from __future__ import annotations

import json

from test_cli import notebook, run

SETUP = "import torch\nfrom torch import nn\nmodel = nn.Linear(4, 2)\nxs = [torch.randn(1, 4) for _ in range(100)]\n"
TOP_LEVEL_LOOP = "for x in xs:\n    print(model(x).sum().item())\n"
FUNCTION_LOOP = "def score(batch):\n    for x in batch:\n        print(model(x).sum().item())\n"
MOVE = "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\nmodel = model.to(device)\n"


def tm301(tmp_path, cells: list[str]) -> list[tuple[str, int]]:
    nb = tmp_path / "order.ipynb"
    nb.write_text(notebook([("code", c) for c in cells]))
    out = run("check", str(nb), "--format", "json", "--select", "TM301")
    return [(f["path"].rsplit("#", 1)[-1], f["line"]) for f in json.loads(out.stdout)]


def test_a_top_level_loop_before_the_move_waits_for_no_gpu(tmp_path) -> None:
    assert tm301(tmp_path, [SETUP, TOP_LEVEL_LOOP, MOVE]) == []


def test_the_same_loop_after_the_move_is_reported(tmp_path) -> None:
    assert tm301(tmp_path, [SETUP, MOVE, TOP_LEVEL_LOOP]) == [("cell3", 2)]


def test_a_function_defined_before_the_move_is_reported(tmp_path) -> None:
    assert tm301(tmp_path, [SETUP, FUNCTION_LOOP, MOVE, "score(xs)\n"]) == [("cell2", 3)]
