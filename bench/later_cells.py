"""Do checked cells leave later, unchecked cells slower? (Python version matters.)

    .venv/bin/python bench/later_cells.py [--rounds 5] [--cells 1 10 50 200]

The sync probe wraps `Tensor` methods (`.item`, `__getitem__`, `__bool__`, ...) in place while
a checked cell runs and puts them back after it. Each assignment to a class attribute changes
the class's version, which CPython's attribute cache and specialised bytecode key on. In one
IPython shell, with the probe made to time CPU tensors (`sync_devices = ['cpu']`, so that it
installs on any machine, as it does for CUDA tensors on a GPU machine), this times an
unchecked cell that reads tensor attributes and runs small ops:

- before any checked cell, and again with nothing checked in between (the session's drift);
- after 1, 10, 50, 200 checked cells (cumulative);
- after `%unload_ext torchmagic`.

Target: within the drift, ≤ 5%. The peer, as anchor in the same run: the same number of
checked cells with the sync probe off (`sync_devices = []`), which patches no class.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys

import torch
from cells import timed_cell
from IPython.core.interactiveshell import InteractiveShell

SETUP = "import torch\nx = torch.randn(8)\nw = torch.randn(8, 8)\n"
LATER = """\
for _ in range(50000):
    x.shape; x.dim(); x.dtype; x.requires_grad
    y = (w @ x).relu_()
"""
CHECKED = "%%torchcheck\ny = (w @ x).sum().item()\n"


def series(sync_devices: list[str], rounds: int, counts: list[int]) -> list[tuple[str, float]]:
    shell = InteractiveShell.instance()
    shell.run_cell(SETUP)
    shell.run_cell("%load_ext torchmagic")
    shell.run_cell("%config TorchCheck.display = 'none'")
    shell.run_cell(f"%config TorchCheck.sync_devices = {sync_devices!r}")

    def timed() -> float:
        return statistics.median(timed_cell(shell, LATER) for _ in range(rounds))

    timed_cell(shell, LATER)  # warm up
    out = [("before", timed()), ("again, nothing checked", timed())]
    done = 0
    for n in counts:
        for _ in range(n - done):
            timed_cell(shell, CHECKED)
        done = n
        out.append((f"after {n} checked", timed()))
    shell.run_cell("%unload_ext torchmagic")
    out.append(("after unload", timed()))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cells", type=int, nargs="+", default=[1, 10, 50, 200])
    ap.add_argument("--probe", choices=["on", "off"], help="one series, in this process")
    args = ap.parse_args()
    if args.probe is None:  # each series in a fresh process: class versions are per process
        print(f"Python {platform.python_version()}, torch {torch.__version__}", flush=True)
        for probe in ("on", "off"):
            extra = ["--rounds", str(args.rounds), "--cells", *map(str, args.cells), "--probe", probe]
            subprocess.run([sys.executable, __file__, *extra], check=True)
        return
    label = "sync probe on (patches Tensor)" if args.probe == "on" else "sync probe off (peer)"
    rows = series(["cpu"] if args.probe == "on" else [], args.rounds, sorted(args.cells))
    base = rows[0][1]
    cells = ", ".join(f"{name} {(t / base - 1) * 100:+.1f}%" for name, t in rows[1:])
    print(f"{label}: later cell {base * 1e3:.1f} ms before; {cells}", flush=True)


if __name__ == "__main__":
    main()
