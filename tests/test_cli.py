"""`torchmagic check | explain | rules`, run as a real subprocess like a user or pre-commit would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "torchmagic", *args],
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        timeout=120,
        # the checkout first; a PYTHONPATH of the machine (packages installed with --target) after it
        env={
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            "PATH": "/usr/bin:/bin",
        },
    )


def notebook(cells: list[tuple[str, str]]) -> str:
    return json.dumps(
        {
            "cells": [
                {"cell_type": kind, "metadata": {}, "source": src.splitlines(keepends=True)}
                | ({"outputs": [], "execution_count": None} if kind == "code" else {})
                for kind, src in cells
            ],
            "metadata": {},
            "nbformat": 4,
            "nbformat_minor": 5,
        }
    )


SYNC = (
    "import torch\n"
    "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
    "xs = torch.randn(3, 4, device=device)\n"
    "for x in xs.unbind():\n"
    "    print(x.sum().item())\n"
)


def test_check_py_prints_path_line_col_rule_message(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(SYNC)
    r = run("check", "train.py", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert r.stdout.splitlines() == [
        "train.py:5:11: TM301 `x.sum().item()` inside a loop makes the CPU wait for the GPU on every iteration."
    ]
    assert r.stderr.startswith("torchmagic: 1 file · 1 finding (1 warning) · ")


def test_check_clean_file_exits_0(tmp_path: Path) -> None:
    (tmp_path / "ok.py").write_text("import torch\nx = torch.zeros(3)\n")
    r = run("check", str(tmp_path / "ok.py"))
    assert (r.returncode, r.stdout) == (0, "")
    assert r.stderr.startswith("torchmagic: 1 file · no findings · ")


def test_check_notebook_names_cells_by_position_among_all_cells(tmp_path: Path) -> None:
    nb = notebook(
        [
            ("markdown", "# Training"),
            ("code", "%matplotlib inline\nimport torch\n!nvidia-smi"),
            ("raw", "not code"),
            ("code", "files = !ls\n" + SYNC),
            ("code", "%%bash\necho x.cuda()"),
        ]
    )
    (tmp_path / "nb.ipynb").write_text(nb)
    r = run("check", "nb.ipynb", "--format", "json", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    found = json.loads(r.stdout)
    assert [(f["path"], f["rule"], f["line"], f["col"]) for f in found] == [
        ("nb.ipynb#cell4", "TM301", 6, 10)
    ]
    assert set(found[0]) >= {"rule", "name", "severity", "line", "col", "message", "hint", "object", "source"}
    text = run("check", "nb.ipynb", cwd=tmp_path)
    assert text.stdout.startswith("nb.ipynb#cell4:6:11: TM301 ")


def test_gpu_waits_need_an_accelerator_anywhere_in_the_notebook(tmp_path: Path) -> None:
    loop = "import torch\nw = torch.randn(3)\nfor x in w:\n    print(x.item())\n"
    (tmp_path / "cpu.ipynb").write_text(notebook([("code", loop), ("code", "y = w * 2")]))
    r = run("check", "cpu.ipynb", "--select", "TM3", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout == "", r.stdout
    # the weights go to the GPU in a later cell: a function of the first cell may run after that
    # and read device values then (its top-level loop ran before: see test_notebook_order.py)
    moved = notebook(
        [
            ("code", "import torch\nw = load()\ndef show(w):\n    for x in w:\n        print(x.item())\n"),
            ("code", "w = w.cuda()\nshow(w)"),
        ]
    )
    (tmp_path / "gpu.ipynb").write_text(moved)
    r = run("check", "gpu.ipynb", "--select", "TM301", cwd=tmp_path)
    assert r.stdout.startswith("gpu.ipynb#cell1:5:15: TM301 "), r.stdout


def test_a_device_an_earlier_cell_spelled_out_decides_later_gpu_waits(tmp_path: Path) -> None:
    loop = (
        "model = torch.nn.Linear(4, 2).to(DEVICE)\n"
        "for start in range(0, 1000, 10):\n"
        "    loss = model(rows[start : start + 10].to(DEVICE)).sum()\n"
        "    total += loss.item()\n"
    )
    setup = "import torch\nrows = torch.randn(1000, 4)\ntotal = 0.0\n"
    for device, flagged in (('"cpu"', False), ('torch.device("cpu")', False), ('"cuda"', True)):
        nb = notebook([("code", setup + f"DEVICE = {device}\n"), ("markdown", "## run"), ("code", loop)])
        (tmp_path / "nb.ipynb").write_text(nb)
        r = run("check", "nb.ipynb", "--select", "TM301", cwd=tmp_path)
        assert r.stdout.startswith("nb.ipynb#cell3:4:14: TM301 ") is flagged, (device, r.stdout)
    # rebound in a later cell: the latest binding counts
    nb = notebook([("code", setup + 'DEVICE = "cpu"\n'), ("code", 'DEVICE = "cuda"'), ("code", loop)])
    (tmp_path / "nb.ipynb").write_text(nb)
    assert run("check", "nb.ipynb", "--select", "TM301", cwd=tmp_path).stdout.startswith(
        "nb.ipynb#cell3:4:14:"
    )


def test_a_notebook_that_moves_batches_in_a_later_cell_leaves_earlier_unmoved_ones_on_the_host(
    tmp_path: Path,
) -> None:
    features = (
        "import torch\n"
        "def features(loader):\n"
        "    out = []\n"
        "    for x, y in loader:\n"
        "        out.append(x.mean(dim=1).cpu().numpy())\n"
        "    return out\n"
    )
    train = (
        "def train(model, loader, opt, device):\n"
        "    for x, y in loader:\n"
        "        x = x.to(device)\n"
        "        loss = torch.nn.functional.cross_entropy(model(x), y.to(device))\n"
        "        loss.backward()\n"
        "        opt.step()\n"
    )
    # the helper's batches are never moved while the training cell moves its own: host data
    nb = notebook([("code", features), ("markdown", "## train"), ("code", train)])
    (tmp_path / "nb.ipynb").write_text(nb)
    assert run("check", "nb.ipynb", "--select", "TM301", cwd=tmp_path).stdout == ""
    # a helper cell that moves its batches itself: its read waits for the device
    moved = features.replace("x.mean(dim=1)", "x.cuda().mean(dim=1)")
    nb = notebook([("code", moved), ("markdown", "## train"), ("code", train)])
    (tmp_path / "nb.ipynb").write_text(nb)
    assert run("check", "nb.ipynb", "--select", "TM301", cwd=tmp_path).stdout.startswith(
        "nb.ipynb#cell1:5:20: TM301 "
    )


def test_notebook_cells_know_what_earlier_cells_built(tmp_path: Path) -> None:
    nb = notebook(
        [
            ("code", "import torch\nimport torch.nn as nn"),
            ("markdown", "## model"),
            ("code", "model = nn.Linear(4, 2)\ncriterion = nn.CrossEntropyLoss()"),
            (
                "code",
                "out = model(torch.randn(3, 4))\nloss = criterion(out.softmax(dim=1), torch.zeros(3).long())",
            ),
            ("code", "torch.save(model, 'm.pt')\ntorch.save(out, 'o.pt')"),
        ]
    )
    (tmp_path / "nb.ipynb").write_text(nb)
    found = json.loads(run("check", "nb.ipynb", "--format", "json", cwd=tmp_path).stdout)
    assert [(f["path"], f["rule"], f["line"]) for f in found] == [
        ("nb.ipynb#cell4", "TM904", 2),  # criterion is a CrossEntropyLoss from cell 3
        ("nb.ipynb#cell5", "TM601", 1),  # model is a module from cell 3; out is a tensor
    ]
    # each file on its own: a .py file does not see a notebook's names
    (tmp_path / "alone.py").write_text("torch.save(model, 'm.pt')\n")
    assert run("check", "alone.py", cwd=tmp_path).returncode == 0


def test_check_folder_skips_virtualenvs_and_tool_directories(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("import torch\nm = torch.load('a.pt')\n")
    for skipped in (".git", ".venv", "venv", "node_modules", ".ipynb_checkpoints", "__pycache__", "env"):
        (tmp_path / skipped).mkdir()
        (tmp_path / skipped / "b.py").write_text("import torch\nm = torch.load('a.pt')\n")
    (tmp_path / "env" / "pyvenv.cfg").write_text("home = /usr\n")
    r = run("check", ".", cwd=tmp_path)
    assert r.returncode == 1
    assert [line.split(":")[0] for line in r.stdout.splitlines()] == [str(Path("pkg") / "a.py")]


def test_bad_inputs_get_one_message_each_and_the_rest_is_checked(tmp_path: Path) -> None:
    (tmp_path / "syntax.py").write_text("def broken(:\n")
    (tmp_path / "latin1.py").write_bytes(b"x = '\xe9'\n")
    (tmp_path / "broken.ipynb").write_text('{"cells": [')
    (tmp_path / "deep.py").write_text("x = " + "-" * 200_000 + "1\n")
    (tmp_path / "nested.py").write_text("x = " + "[" * 5000 + "]" * 5000 + "\n")
    (tmp_path / "big.py").write_text(
        "import torch\n" + "y = torch.zeros(3)\n" * 10_000 + "z = torch.load('f')\n"
    )
    (tmp_path / "good.py").write_text(SYNC)
    r = run("check", ".", cwd=tmp_path)
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    errors = sorted(line.split(":")[0] for line in r.stderr.splitlines() if ": error:" in line)
    assert errors == ["broken.ipynb", "latin1.py"]  # files that cannot be read as code at all
    # sources that do not parse are findings, once each, with the rest of the file checked
    unparsable = sorted(line.split(":")[0] for line in r.stdout.splitlines() if " TM000 " in line)
    assert unparsable == ["deep.py", "nested.py", "syntax.py"]
    assert "syntax.py:1:12: TM000 Line 1 does not parse as Python" in r.stdout
    assert "good.py:5:11: TM301" in r.stdout
    assert "big.py:10002:5: TM203" in r.stdout


def test_nbformat3_notebooks_and_fifos(tmp_path: Path) -> None:
    nb3 = {
        "worksheets": [{"cells": [{"cell_type": "code", "input": ["import torch\n", "torch.load('a')\n"]}]}]
    }
    (tmp_path / "old.ipynb").write_text(json.dumps(nb3))
    os.mkfifo(tmp_path / "pipe.py")
    r = run("check", ".", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert r.stdout.startswith("old.ipynb#cell1:2:1: TM203 ")
    r = run("check", "pipe.py", cwd=tmp_path)
    assert (r.returncode, r.stderr.splitlines()[0]) == (1, "pipe.py: error: not a regular file")


def test_unreadable_file_is_reported(tmp_path: Path) -> None:
    p = tmp_path / "secret.py"
    if os.geteuid() == 0:
        # root reads any mode bits; reading offset 0 of a process's own memory fails with EIO
        if not Path("/proc/self/mem").exists():
            pytest.skip("no way to make an unreadable file as root here")
        p.symlink_to("/proc/self/mem")
    else:
        p.write_text("x = 1\n")
        p.chmod(0)
    (tmp_path / "other.py").write_text("import torch\nm = torch.load('a')\n")
    r = run("check", "secret.py", "other.py", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stderr.startswith("secret.py: error: cannot read file")
    assert r.stdout.startswith("other.py:2:5: TM203")


def test_select_and_ignore_take_ids_and_prefixes(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(
        "import torch\nm = torch.load('a.pt')\nif torch.cuda.is_available():\n    print('gpu')\nx = torch.zeros(2).cuda()\n"
    )
    assert {line.split()[1] for line in run("check", "a.py", cwd=tmp_path).stdout.splitlines()} == {
        "TM201",
        "TM203",
    }
    only = run("check", "a.py", "--select", "TM2", "--ignore", "TM203", cwd=tmp_path)
    assert [line.split()[1] for line in only.stdout.splitlines()] == ["TM201"]
    none = run("check", "a.py", "--select", "TM9", cwd=tmp_path)
    assert (none.returncode, none.stdout) == (0, "")


@pytest.mark.parametrize(
    "args",
    [("check", "missing.py"), ("check", "--select", "XY1", "."), ("explain", "TM999"), ("check",), ()],
)
def test_usage_errors_exit_2(args: tuple[str, ...], tmp_path: Path) -> None:
    r = run(*args, cwd=tmp_path)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr


def test_jobs_gives_the_same_findings_as_one_process(tmp_path: Path) -> None:
    for i in range(40):
        (tmp_path / f"m{i:02}.py").write_text(SYNC if i % 3 else "import torch\nm = torch.load('x')\n")
    one = run("check", ".", "--jobs", "1", cwd=tmp_path)
    many = run("check", ".", "--jobs", "3", cwd=tmp_path)
    assert one.returncode == many.returncode == 1
    assert one.stdout == many.stdout and len(one.stdout.splitlines()) == 40


def test_explain_prints_the_rule_documentation() -> None:
    r = run("explain", "tm301")
    assert r.returncode == 0
    assert r.stdout.startswith("TM301 (sync-in-loop)")
    for section in ("## What it does", "## Why is this bad?", "## Example", "## Use instead"):
        assert section in r.stdout


def test_rules_lists_static_live_and_runtime_rules() -> None:
    r = run("rules", "--format", "json")
    assert r.returncode == 0
    rows = {row["id"]: row for row in json.loads(r.stdout)}
    for rid in ("TM101", "TM205", "TM301", "TM303", "TM505", "TM506", "TM702", "TM901", "TM904"):
        assert rid in rows and rows[rid]["summary"].endswith(".")
    assert rows["TM303"]["evidence"] == ["runtime"]
    text = run("rules")
    assert text.stdout.splitlines()[0].startswith("TM000  syntax-error")
    assert any(ln.startswith("TM101  tensor-created-in-forward") for ln in text.stdout.splitlines())


def test_check_never_imports_torch(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(SYNC)
    code = (
        "import sys\n"
        "from torchmagic.cli import main\n"
        f"rc = main(['check', {str(tmp_path / 'a.py')!r}, '--jobs', '1'])\n"
        "import torchmagic\n"
        "torchmagic.check_source('import torch\\nfor x in y:\\n    x.item()\\n')\n"
        "assert rc == 1, rc\n"
        "bad = sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.'))\n"
        "print('TORCH', bad)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT)},
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert "TORCH []" in r.stdout


def test_pre_commit_hook_runs_the_check_command() -> None:
    text = (ROOT / ".pre-commit-hooks.yaml").read_text()
    assert "id: torchmagic" in text and "entry: torchmagic check" in text


def test_a_missing_path_is_reported_and_the_rest_still_checked(tmp_path: Path) -> None:
    (tmp_path / "good.py").write_text(SYNC)
    r = run("check", "gone.py", "good.py", "also_gone/", cwd=tmp_path)
    assert r.returncode == 2  # a usage error, reported after everything readable was checked
    assert "good.py:5:11: TM301" in r.stdout
    lines = r.stderr.splitlines()
    assert lines[:2] == [
        "gone.py: error: no such file or directory",
        "also_gone/: error: no such file or directory",
    ]
    assert lines[-1].startswith("torchmagic: 1 file · 1 finding (1 warning) · 2 could not be checked · ")


def test_summary_counts_files_and_findings_by_severity(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(SYNC)
    (tmp_path / "b.py").write_text(
        "import torch\nm = torch.load('x')\nuse_cuda = torch.cuda.is_available()\nn = torch.nn.Linear(2, 2).cuda()\n"
    )
    r = run("check", ".", "--format", "json", cwd=tmp_path)
    assert json.loads(r.stdout)  # stdout stays pure JSON
    assert r.stderr.startswith("torchmagic: 2 files · 3 findings (2 warnings, 1 info) · ")


def test_progress_shows_on_a_terminal_for_long_runs_only(tmp_path: Path) -> None:
    import pty
    import select

    for i in range(45):
        (tmp_path / f"m{i:02}.py").write_text("import torch\nx = 1\n")

    def on_a_terminal(*args: str) -> str:
        pid, fd = pty.fork()
        if pid == 0:  # child: stdout and stderr are the terminal
            os.chdir(tmp_path)
            os.execv(sys.executable, [sys.executable, "-m", "torchmagic", "check", *args])
        out = b""
        while True:
            ready, _, _ = select.select([fd], [], [], 30)
            if not ready:
                break
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        os.waitpid(pid, 0)
        return out.decode(errors="replace")

    assert "torchmagic check" in on_a_terminal(".", "--jobs", "1")  # the bar, drawn on the terminal
    assert "torchmagic check" not in on_a_terminal("m00.py")  # one file: no bar
    piped = run("check", ".", cwd=tmp_path)
    assert "torchmagic check" not in piped.stderr  # not a terminal: no bar


# a trainer that places everything with `.cuda()` and a Module that moves its own labels
CUDA_EVERYWHERE = (
    "import torch\n"
    "from torch import nn\n"
    "class Trainer(nn.Module):\n"
    "    def forward(self, scores, labels):\n"
    "        return nn.functional.cross_entropy(scores, labels.cuda())\n"
    "def smooth(pred, target):\n"
    "    weight = torch.ones(target.shape).cuda()\n"
    "    return (weight * (pred - target)).abs().sum()\n"
)


def _project(tmp_path: Path, kernels: str | None) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / "model").mkdir()
    (tmp_path / "trainer.py").write_text(CUDA_EVERYWHERE)
    if kernels is not None:
        (tmp_path / "model" / "roi_kernels.py").write_text(kernels)
    return tmp_path


def test_a_project_built_on_a_cuda_only_library_makes_its_cuda_calls_no_portability_loss(
    tmp_path: Path,
) -> None:
    # the cupy import is in another file of the same repository: a file checked alone (or in
    # a pre-commit run that passes only it) still knows the project cannot run without CUDA
    _project(tmp_path, "import cupy as cp\nimport torch\n\ndef roi_pool(x):\n    return cp.asarray(x)\n")
    r = run("check", "trainer.py", "--select", "TM1,TM2", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "TM102" not in r.stdout and "TM201" not in r.stdout


@pytest.mark.parametrize(
    "others",
    [
        {},  # nothing in the project says CUDA-only
        # an optional import the project runs without
        {"model/roi_kernels.py": "try:\n    import apex\nexcept ImportError:\n    apex = None\n"},
        # a test that skips without a GPU says nothing of the project's own code
        {
            "tests/test_kernels.py": "import unittest, torch\n"
            "if not torch.cuda.is_available():\n"
            "    raise unittest.SkipTest('needs a GPU')\n"
        },
        # a benchmark script that asserts a GPU speaks for itself, not for the trainer
        {"bench_gpu.py": "import torch\nassert torch.cuda.is_available()\n"},
    ],
    ids=["plain", "optional-apex", "gpu-test", "gpu-script"],
)
def test_cuda_calls_are_reported_when_nothing_in_the_project_requires_cuda(
    tmp_path: Path, others: dict[str, str]
) -> None:
    _project(tmp_path, None)
    for name, text in others.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    r = run("check", "trainer.py", "--select", "TM1,TM2", cwd=tmp_path)
    assert r.returncode == 1
    rules = [line.split()[1] for line in r.stdout.splitlines()]
    assert rules == ["TM102", "TM201"], r.stdout


def test_a_loose_file_gets_no_evidence_from_the_folders_around_it(tmp_path: Path) -> None:
    # no project marker: the folder is not a project, a neighbour's cupy import is not ours
    (tmp_path / "kernels.py").write_text("import cupy\n")
    (tmp_path / "trainer.py").write_text(CUDA_EVERYWHERE)
    r = run("check", "trainer.py", "--select", "TM2", cwd=tmp_path)
    assert "TM201" in r.stdout
