"""What watching `torch.compile` costs: nothing for cells that compile nothing, little for cells that do.

    .venv/bin/python bench/compile_cost.py [--rounds 7]

All in one IPython shell, interleaved over rounds, medians reported:

1. A cell that compiles nothing (the MNIST-size training loop of cell_cost.py, 100 steps) in a
   kernel where Dynamo is loaded and has compiled before, so the compile collector installs
   its capture: the cell plain, and checked with only the compile collector. Also the
   collector's start + stop alone, and a cell calling an already compiled function 2,000
   times (cache hits: the hooks only run while Dynamo compiles).
2. A cell that compiles: a function with two graph breaks, called with three batch sizes (one
   recompilation), compiled from scratch each round (`torch._dynamo.reset()` before it,
   outside the timing). Plain; under `TORCH_LOGS=graph_breaks,recompiles` (its in-process
   equivalent, `torch._logging.set_logs(graph_breaks=True, recompiles=True)`, writing to
   /dev/null as a terminal would have to); checked with only the compile collector; and fully
   checked (`%%torchcheck`, every collector).
3. Unchecked cells after a checked compile cell: the compiled-function loop of 1, before the
   first checked cell and after one (nothing is left installed).
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import time

import torch
from cells import timed_cell
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from torchmagic.run import CellRun, CheckOptions
from torchmagic.runtime.compile import CompileWatch

SETUP = """\
import torch
import torch._dynamo
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
X = torch.randn(64, 784)
Y = torch.randint(0, 10, (64,))
net = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
opt = torch.optim.SGD(net.parameters(), lr=0.01)

@torch.compile(backend="eager")
def fast(x):
    return (x * 2).relu()

fast(torch.randn(8))
"""

NOTHING = """\
running = 0.0
for step in range(100):
    opt.zero_grad()
    loss = F.cross_entropy(net(X), Y)
    loss.backward()
    opt.step()
    running += loss.item()
"""

CACHE_HITS = """\
t = torch.randn(8)
for _ in range(2000):
    out = fast(t)
"""

COMPILES = """\
@torch.compile(backend="eager")
def step(x):
    y = torch.tanh(x @ x.T)
    s = y.sum().item()
    print("s", round(s, 3))
    return y * s

for n in (16, 17, 18):
    out = step(torch.randn(n, 32))
"""


run = timed_cell


def watched(shell: InteractiveShell, code: str) -> float:
    """The cell under the compile collector alone: its hooks while the cell runs, then its
    records (not the rest of a check: lint, namespace scan, rules, display)."""
    compiler = shell.compile
    cell = CellRun(shell.user_ns, code, CheckOptions(), known_files=lambda: compiler._filename_map)
    watch = CompileWatch()
    with capture_output():
        t0 = time.perf_counter()
        watch.start(cell)
        try:
            shell.run_cell(code, store_history=True)
        finally:
            watch.stop(cell)
            watch.collect(cell)
        elapsed = time.perf_counter() - t0
    cell.release()
    return elapsed


def fresh(shell: InteractiveShell) -> None:
    shell.run_cell("torch._dynamo.reset()", store_history=False)


def median_ms(ts: list[float]) -> float:
    return statistics.median(ts) * 1e3


def bench_nothing_compiled(shell: InteractiveShell, rounds: int) -> None:
    times: dict[str, list[float]] = {"plain": [], "compile collector": []}
    hits: dict[str, list[float]] = {"plain": [], "compile collector": []}
    for code in (NOTHING, CACHE_HITS):
        run(shell, code)
    for _ in range(rounds):
        times["plain"].append(run(shell, NOTHING))
        times["compile collector"].append(watched(shell, NOTHING))
        hits["plain"].append(run(shell, CACHE_HITS))
        hits["compile collector"].append(watched(shell, CACHE_HITS))
    cell = CellRun(shell.user_ns, NOTHING, CheckOptions())
    watch = CompileWatch()
    n = 2000
    t0 = time.perf_counter()
    for _ in range(n):
        watch.start(cell)
        watch.stop(cell)
        watch.collect(cell)
    per = (time.perf_counter() - t0) / n
    print(f"1. a cell that compiles nothing, in a kernel that has compiled before (median of {rounds}):")
    for label, data in (("training loop, 100 steps", times), ("2,000 calls of a compiled function", hits)):
        plain, with_watch = median_ms(data["plain"]), median_ms(data["compile collector"])
        print(
            f"   {label:<36}: plain {plain:7.1f} ms, compile collector {with_watch:7.1f} ms "
            f"({with_watch - plain:+.1f} ms)"
        )
    print(f"   compile collector start + stop + collect, nothing compiled: {per * 1e6:.0f} µs")


def bench_compiling_cell(shell: InteractiveShell, rounds: int) -> None:
    devnull = open(os.devnull, "w")  # noqa: SIM115  (closed at the end)
    labels = (
        "plain",
        "TORCH_LOGS=graph_breaks,recompiles",
        "compile collector",
        "%%torchcheck (whole check)",
    )
    times: dict[str, list[float]] = {label: [] for label in labels}
    fresh(shell)
    run(shell, COMPILES)  # warm up Dynamo's own first-use costs
    for _ in range(rounds):
        fresh(shell)
        times["plain"].append(run(shell, COMPILES))
        fresh(shell)
        torch._logging.set_logs(graph_breaks=True, recompiles=True)
        for handler in logging.getLogger("torch._dynamo").handlers:
            if isinstance(handler, logging.StreamHandler):
                handler.setStream(devnull)
        times["TORCH_LOGS=graph_breaks,recompiles"].append(run(shell, COMPILES))
        torch._logging.set_logs()
        fresh(shell)
        times["compile collector"].append(watched(shell, COMPILES))
        fresh(shell)
        times["%%torchcheck (whole check)"].append(run(shell, "%%torchcheck\n" + COMPILES))
    devnull.close()
    plain = median_ms(times["plain"])
    print(f"2. a cell that compiles (2 graph breaks, 1 recompilation; backend eager; median of {rounds}):")
    for label in labels:
        t = median_ms(times[label])
        print(f"   {label:<36}: {t:7.1f} ms ({t - plain:+6.1f} ms, {(t / plain - 1) * 100:+5.1f}%)")


def bench_later_cells(shell: InteractiveShell, rounds: int) -> None:
    fresh(shell)
    shell.run_cell("fast(torch.randn(8))")
    before = [run(shell, CACHE_HITS) for _ in range(rounds)]
    fresh(shell)
    run(shell, "%%torchcheck\n" + COMPILES)
    shell.run_cell("fast(torch.randn(8))")
    after = [run(shell, CACHE_HITS) for _ in range(rounds)]
    print("3. unchecked cells, 2,000 calls of a compiled function:")
    print(
        f"   before any checked cell: {median_ms(before):6.1f} ms; after a checked compile cell: {median_ms(after):6.1f} ms"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    torch.set_num_threads(1)
    shell = InteractiveShell.instance()
    with capture_output():
        shell.run_cell(SETUP)
        shell.run_cell("%load_ext torchmagic")
        shell.run_cell("%config TorchCheck.display = 'none'")
    print(f"torch {torch.__version__}, 1 intra-op thread")
    bench_nothing_compiled(shell, args.rounds)
    bench_compiling_cell(shell, args.rounds)
    bench_later_cells(shell, args.rounds)


if __name__ == "__main__":
    main()
