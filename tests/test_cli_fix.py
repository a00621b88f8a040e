"""`torchmagic check --fix | --diff | --unsafe-fixes` on files and notebooks, as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from tests.test_cli import run

MODEL = (
    "import torch\n"
    "import torch.nn as nn\n"
    "from torch.autograd import Variable\n"
    "\n"
    "\n"
    "class Net(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.layers = [nn.Linear(4, 4) for _ in range(2)]\n"
    "        nn.init.xavier_uniform(self.layers[0].weight)\n"
    "\n"
    "    def forward(self, x):\n"
    "        for layer in self.layers:\n"
    "            x = layer(x)\n"
    "        return x\n"
    "\n"
    "\n"
    "net = Net()\n"
    "x = Variable(torch.randn(2, 4))\n"
    "torch.save(net, 'net.pt')\n"
)
SAFE_FIXED = (
    MODEL.replace(
        "self.layers = [nn.Linear(4, 4) for _ in range(2)]",
        "self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])",
    )
    .replace("nn.init.xavier_uniform(", "nn.init.xavier_uniform_(")
    .replace("x = Variable(torch.randn(2, 4))", "x = torch.randn(2, 4)")
)


def test_fix_applies_the_safe_fixes_and_reports_what_remains(tmp_path: Path) -> None:
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    r = run("check", "--fix", "model.py", cwd=tmp_path)
    assert path.read_text() == SAFE_FIXED
    # the unsafe one (TM601) remains, and decides the exit code
    assert r.stdout.splitlines() == [
        "model.py:20:1: TM601 `torch.save(net, 'net.pt')` pickles the whole module, tied to its class path."
    ]
    assert r.returncode == 1
    assert " · 3 fixes applied · 1 finding remaining (1 warning) · 1 more with --unsafe-fixes · " in r.stderr


def test_unsafe_fixes_apply_too_and_a_clean_result_exits_0(tmp_path: Path) -> None:
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    r = run("check", "--fix", "--unsafe-fixes", "model.py", cwd=tmp_path)
    assert path.read_text() == SAFE_FIXED.replace("torch.save(net, ", "torch.save(net.state_dict(), ")
    assert r.returncode == 0, r.stdout + r.stderr
    assert " · 4 fixes applied · no findings remaining · " in r.stderr


def test_diff_prints_a_unified_diff_and_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    before = path.stat().st_mtime_ns
    r = run("check", "--diff", "model.py", cwd=tmp_path)
    assert path.read_text() == MODEL and path.stat().st_mtime_ns == before
    assert r.returncode == 1  # the findings are all still there
    assert r.stdout.startswith("--- a/model.py\n+++ b/model.py\n")
    assert "-x = Variable(torch.randn(2, 4))\n+x = torch.randn(2, 4)\n" in r.stdout
    assert "state_dict" not in r.stdout  # unsafe: not without --unsafe-fixes
    assert " · 3 fixes to apply · 4 findings " in r.stderr
    # the diff applies cleanly with patch(1) and gives what --fix writes
    patched = tmp_path / "patched"
    patched.mkdir()
    (patched / "model.py").write_text(MODEL)
    import subprocess

    p = subprocess.run(["patch", "-p1", "-s"], input=r.stdout, text=True, cwd=patched, capture_output=True)
    if p.returncode == 127:
        pytest.skip("no patch(1) here")
    assert (patched / "model.py").read_text() == SAFE_FIXED


def test_plain_check_says_how_many_findings_are_fixable(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text(MODEL)
    r = run("check", "model.py", cwd=tmp_path)
    assert (
        " · 4 findings (1 error, 3 warnings) · 3 fixable with --fix · 1 more with --unsafe-fixes · "
        in r.stderr
    )
    assert MODEL == (tmp_path / "model.py").read_text()
    findings = json.loads(run("check", "--format", "json", "model.py", cwd=tmp_path).stdout)
    fixes = {f["rule"]: f["fix"] for f in findings}
    assert fixes["TM404"] == {
        "title": "Drop the `Variable` wrapper",
        "applicability": "safe",
        "edits": [{"line": 19, "col": 4, "end_line": 19, "end_col": 31, "text": "torch.randn(2, 4)"}],
    }


def test_fix_keeps_a_bom_and_crlf_line_endings(tmp_path: Path) -> None:
    path = tmp_path / "model.py"
    path.write_bytes(b"\xef\xbb\xbf" + MODEL.replace("\n", "\r\n").encode())
    run("check", "--fix", "model.py", cwd=tmp_path)
    assert path.read_bytes() == b"\xef\xbb\xbf" + SAFE_FIXED.replace("\n", "\r\n").encode()


def test_a_file_that_cannot_be_written_is_reported_and_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import builtins

    from torchmagic.cli import main

    path = tmp_path / "model.py"
    path.write_text(MODEL)
    real_open = builtins.open

    def read_only_disk(file, mode="r", *args, **kwargs):  # noqa: ANN001, ANN202
        if "w" in mode and str(file) == "model.py":
            raise PermissionError(13, "Permission denied")
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(builtins, "open", read_only_disk)
    code = main(["check", "--fix", "model.py"])
    err = capsys.readouterr().err
    assert path.read_text() == MODEL
    assert "model.py: error: cannot write the fixes (Permission denied)" in err and code == 1
    assert " · 0 fixes applied · 4 findings remaining " in err


def test_a_file_that_does_not_parse_is_not_touched(tmp_path: Path) -> None:
    path = tmp_path / "broken.py"
    broken = MODEL + "def oops(:\n"
    path.write_text(broken)
    r = run("check", "--fix", "broken.py", cwd=tmp_path)
    assert path.read_text() == broken
    assert "TM000" in r.stdout and " · 0 fixes applied · " in r.stderr


# ---- notebooks --------------------------------------------------------------------------------------


def jupyter_notebook(path: Path) -> None:
    """A notebook as Jupyter saves it: ids, outputs (text and an image), metadata, markdown."""
    nb = nbformat.v4.new_notebook()
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python", "version": "3.11.0"},
    }
    model, rest = MODEL.split("\n\nnet = Net()\n")
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Training — ünïcode stays"),
        nbformat.v4.new_code_cell(model, execution_count=1),
        nbformat.v4.new_code_cell(
            "net = Net()\nprint('ok')",
            execution_count=2,
            outputs=[
                nbformat.v4.new_output("stream", name="stdout", text="ok\n"),
                nbformat.v4.new_output(
                    "display_data", data={"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"}
                ),
            ],
            metadata={"tags": ["keep"], "collapsed": False},
        ),
        nbformat.v4.new_code_cell(
            "x = Variable(torch.randn(2, 4))\nx.shape",
            execution_count=3,
            outputs=[
                nbformat.v4.new_output(
                    "execute_result", data={"text/plain": "torch.Size([2, 4])"}, execution_count=3
                )
            ],
        ),
        nbformat.v4.new_code_cell("%%time\ny = net(x)"),
    ]
    for i, cell in enumerate(nb.cells):
        cell.id = f"cell-{i}"
    nbformat.write(nb, str(path))


def test_fix_on_a_notebook_changes_only_the_fixed_sources(tmp_path: Path) -> None:
    path = tmp_path / "train.ipynb"
    jupyter_notebook(path)
    original = path.read_text(encoding="utf-8")
    r = run("check", "--fix", "train.ipynb", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert " · 3 fixes applied · no findings remaining · " in r.stderr
    new = path.read_text(encoding="utf-8")
    before, after = json.loads(original), json.loads(new)
    changed = [i for i, (a, b) in enumerate(zip(before["cells"], after["cells"])) if a != b]
    assert changed == [1, 3]
    for i in changed:
        a, b = dict(before["cells"][i]), dict(after["cells"][i])
        assert a.pop("source") != b.pop("source") and a == b  # outputs, metadata, id, count kept
    assert "".join(after["cells"][3]["source"]) == "x = torch.randn(2, 4)\nx.shape"
    assert "nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])" in "".join(after["cells"][1]["source"])
    assert {k: v for k, v in after.items() if k != "cells"} == {
        k: v for k, v in before.items() if k != "cells"
    }
    # byte for byte: the new file is the old one with those source lines replaced
    old_lines, new_lines = original.splitlines(), new.splitlines()
    assert len(old_lines) == len(new_lines)
    differing = [(a, b) for a, b in zip(old_lines, new_lines) if a != b]
    assert len(differing) == 3 and all(a.startswith('    "') and b.startswith('    "') for a, b in differing)
    assert new.endswith("\n") and "ünïcode" in new


def test_diff_on_a_notebook_names_the_cells(tmp_path: Path) -> None:
    path = tmp_path / "train.ipynb"
    jupyter_notebook(path)
    original = path.read_bytes()
    r = run("check", "--diff", "train.ipynb", cwd=tmp_path)
    assert path.read_bytes() == original
    assert "--- a/train.ipynb#cell2\n+++ b/train.ipynb#cell2\n" in r.stdout
    assert "-x = Variable(torch.randn(2, 4))\n+x = torch.randn(2, 4)\n" in r.stdout


def test_a_notebook_without_cell_ids_gets_none_added(tmp_path: Path) -> None:
    path = tmp_path / "old.ipynb"
    jupyter_notebook(path)
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        del cell["id"]
    nb["nbformat_minor"] = 4
    path.write_text(json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    run("check", "--fix", "old.ipynb", cwd=tmp_path)
    after = json.loads(path.read_text())
    assert all("id" not in c for c in after["cells"]) and after["nbformat_minor"] == 4


def test_a_notebook_with_nothing_to_fix_is_not_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "clean.ipynb"
    path.write_text(
        json.dumps(
            {
                "cells": [
                    {
                        "cell_type": "code",
                        "metadata": {},
                        "source": "x = 1",
                        "outputs": [],
                        "execution_count": None,
                    }
                ],
                "metadata": {},
                "nbformat": 4,
                "nbformat_minor": 5,
            }
        )
    )
    before = path.read_bytes()
    r = run("check", "--fix", "clean.ipynb", cwd=tmp_path)
    assert path.read_bytes() == before and r.returncode == 0


def test_a_notebook_in_another_layout_is_written_in_jupyters_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "colab.ipynb"
    jupyter_notebook(path)
    nb = json.loads(path.read_text())
    path.write_text(json.dumps(nb, indent=2))  # Colab-style: two spaces, keys unsorted, ASCII escapes
    r = run("check", "--fix", "colab.ipynb", cwd=tmp_path)
    assert "colab.ipynb: note: written in Jupyter's own layout" in r.stderr
    after = json.loads(path.read_text())
    assert [c.get("outputs") for c in after["cells"]] == [c.get("outputs") for c in nb["cells"]]


def test_the_fixed_notebook_has_no_safe_fix_left_and_still_runs_in_a_kernel(tmp_path: Path) -> None:
    from nbclient import NotebookClient

    path = tmp_path / "train.ipynb"
    jupyter_notebook(path)
    run("check", "--fix", "train.ipynb", cwd=tmp_path)
    left = json.loads(run("check", "--format", "json", "train.ipynb", cwd=tmp_path).stdout)
    assert not [f for f in left if f["fix"] and f["fix"]["applicability"] == "safe"]
    nb = nbformat.read(str(path), as_version=4)
    NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    outputs = nb.cells[3].outputs
    assert outputs[0]["data"]["text/plain"] == "torch.Size([2, 4])"
