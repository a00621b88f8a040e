"""How fast is `torchmagic check`? Side by side with a bare parse and other PyTorch linters.

Corpus: the installed `torch/nn` and `torch/optim` sources (~62k lines). In one run:

- the whole `torchmagic check` process (start-up, discovery, parsing, rules, output),
  with the default `--jobs` and with `--jobs 1`;
- bare `ast.parse` of the same files in one process (the floor for any AST linter);
- TorchFix (`torchfix --select ALL`) and hotpath-ai (`hotpath analyze`) when installed;
- `check_source` on a 100-line notebook cell, warm (the `%%torchcheck` budget: 5 ms);
- the CLI over the whole installed torch package: it must finish without a crash.

Usage: `python bench/lint_speed.py [--repeat N] [--skip-full]`. Prints figures; asserts nothing
about time (timings belong in reports, not in tests).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def torch_dir() -> Path:
    # Find the installed torch without importing it (that alone takes seconds).
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        sys.exit("torch is not installed in this environment")
    return Path(spec.origin).parent


def py_files(*dirs: Path) -> list[Path]:
    return sorted(p for d in dirs for p in d.rglob("*.py"))


def timed(cmd: list[str], repeat: int) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Best wall time of `repeat` runs of a whole process."""
    best, last = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        last = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        best = min(best, time.perf_counter() - t0)
    assert last is not None
    return best, last


def tool(name: str) -> str | None:
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else shutil.which(name)


def _hotpath_count(out: str) -> int:
    """Findings in `hotpath analyze --format json` output: {"files": [{"findings": [...]}]}."""
    try:
        data = json.loads(out)
    except ValueError:
        return 0
    files = data.get("files", []) if isinstance(data, dict) else []
    return sum(len(f.get("findings", [])) for f in files if isinstance(f, dict))


def bare_parse(files: list[Path], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for p in files:
            try:
                ast.parse(p.read_bytes(), filename=str(p))
            except SyntaxError:
                pass
        best = min(best, time.perf_counter() - t0)
    return best


CELL = """\
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Net(nn.Module):
    def __init__(self, d_in=32, d_hidden=64, n_classes=10):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_hidden)
        self.head = nn.Linear(d_hidden, n_classes)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        h = F.relu(self.fc1(x))
        h = self.drop(F.relu(self.fc2(h)))
        return self.head(h)


ds = TensorDataset(torch.randn(512, 32), torch.randint(0, 10, (512,)))
loader = DataLoader(ds, batch_size=64, shuffle=True)
model = Net().to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=5)
crit = nn.CrossEntropyLoss()
history = []
best = float("inf")
"""
LOOP = """
for epoch in range({n}):
    model.train()
    total = 0.0
    for step, (x, y) in enumerate(loader):
        x, y = x.to(device), y.to(device)
        opt.zero_grad()
        out = model(x)
        loss = crit(out, y)
        loss.backward()
        opt.step()
        total += loss.item()
        if step % 10 == 0:
            print(epoch, step, loss.item())
    sched.step()
    model.eval()
    with torch.no_grad():
        acc = (model(x).argmax(1) == y).float().mean()
    history.append(total)
"""


def hundred_line_cell() -> str:
    code = CELL
    n = 0
    while code.count("\n") + LOOP.count("\n") <= 100:
        code += LOOP.format(n=n + 1)
        n += 1
    return code + "\n" * (100 - code.count("\n"))  # complete blocks, padded to 100 lines


def cell_time(code: str) -> tuple[float, float, int]:
    sys.path.insert(0, str(ROOT))
    from torchmagic import check_source

    for _ in range(20):
        check_source(code)
    times = []
    for _ in range(200):
        t0 = time.perf_counter()
        found = check_source(code)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times), len(found)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--skip-full", action="store_true", help="skip the whole-torch crash check")
    args = ap.parse_args()
    torch = torch_dir()
    # A copy outside the virtualenv: some linters skip anything under site-packages/.venv,
    # and every tool should read the same files from the same (warm) place.
    tmp = Path(tempfile.mkdtemp(prefix="lint_corpus_"))
    corpus = [tmp / "nn", tmp / "optim"]
    for src, dst in zip((torch / "nn", torch / "optim"), corpus):
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyi"))
    files = py_files(*corpus)
    lines = sum(p.read_bytes().count(b"\n") for p in files)
    print(
        f"corpus: {len(files)} files, {lines} lines (torch/nn + torch/optim copied to {tmp}); {os.cpu_count()} CPUs"
    )
    print(f"python: {sys.version.split()[0]}")

    rows: list[tuple[str, float, str]] = []
    tm = [sys.executable, "-m", "torchmagic", "check", *map(str, corpus)]
    t, r = timed(tm, args.repeat)
    rows.append(
        ("torchmagic check (--jobs auto)", t, f"{len(r.stdout.splitlines())} findings, rc={r.returncode}")
    )
    t1, r1 = timed([*tm, "--jobs", "1"], args.repeat)
    rows.append(("torchmagic check --jobs 1", t1, f"{len(r1.stdout.splitlines())} findings"))
    rows.append(("bare ast.parse (in-process)", bare_parse(files, args.repeat), "floor for an AST linter"))
    py_start, _ = timed([sys.executable, "-c", "pass"], args.repeat)
    rows.append(("python -c pass (start-up)", py_start, ""))

    torchfix = tool("torchfix")
    if torchfix:
        tf, rf = timed([torchfix, "--select", "ALL", *map(str, corpus)], max(1, args.repeat // 2))
        rows.append(
            ("torchfix --select ALL", tf, f"{len(rf.stdout.splitlines())} findings, rc={rf.returncode}")
        )
        tf1, _ = timed([torchfix, "--select", "ALL", "-j", "1", *map(str, corpus)], 1)
        rows.append(("torchfix --select ALL -j 1", tf1, ""))
    else:
        print("torchfix: not installed (pip install torchfix)")
    hotpath = tool("hotpath")
    if hotpath:
        times = []
        found = 0
        for _ in range(max(1, args.repeat // 2)):
            t0 = time.perf_counter()
            outs = [
                subprocess.run(
                    [hotpath, "analyze", "--include-heuristics", "--format", "json", str(d)],
                    capture_output=True,
                    text=True,
                )
                for d in corpus
            ]
            times.append(time.perf_counter() - t0)
            found = sum(_hotpath_count(o.stdout) for o in outs)
        rows.append(
            ("hotpath analyze --include-heuristics", min(times), f"{found} findings (2 runs: nn, optim)")
        )
    else:
        print("hotpath-ai: not installed (pip install hotpath-ai)")

    base = rows[0][1]
    print()
    print(f"{'tool':<38} {'best of runs':>12} {'vs torchmagic':>14}  note")
    for name, secs, note in rows:
        print(f"{name:<38} {secs:>10.3f} s {secs / base:>13.2f}x  {note}")
    print(
        f"\ntarget: whole torchmagic check process <= 1.0 s -> {'OK' if base <= 1.0 else 'MISSED'} ({base:.3f} s)"
    )

    cell = hundred_line_cell()
    med, best, n = cell_time(cell)
    print(
        f"check_source on a {cell.count(chr(10))}-line cell (warm): median {med * 1e3:.2f} ms, best {best * 1e3:.2f} ms,"
        f" {n} findings -> {'OK' if med <= 0.005 else 'MISSED'} (target 5 ms)"
    )

    if not args.skip_full:
        n_files = len(py_files(torch))
        t0 = time.perf_counter()
        full = subprocess.run(
            [sys.executable, "-m", "torchmagic", "check", str(torch)],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        el = time.perf_counter() - t0
        crashed = "Traceback" in full.stderr or full.returncode not in (0, 1)
        print(
            f"whole torch package ({n_files} files): {el:.2f} s, rc={full.returncode},"
            f" {len(full.stdout.splitlines())} findings, {len(full.stderr.splitlines())} per-file errors"
            f" -> {'CRASH' if crashed else 'no crash'}"
        )
        for line in full.stderr.splitlines()[:5]:
            print("   ", line)
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
