"""What `%%torchcheck` adds to a launch-bound training cell, per collector, and to a clean cell.

    .venv/bin/python bench/cell_cost.py [--steps 300] [--rounds 5]

1. The typical notebook training cell: an MNIST-size MLP (784-128-10), batch 64, a few
   hundred SGD steps, `running += loss.item()` each step. It runs in one IPython shell,
   plain and under `%%torchcheck` (display off: the report's display is measured in 2),
   interleaved over several rounds. Target: checked ≤ +25% over plain with every collector
   on. Then each collector alone (the sync probe timing CPU "syncs" as it would time CUDA
   ones, the module hooks for shapes, train/eval modes and TM001, the CUDA memory probe, the
   cell's error) and the analysis after the cell (namespace scan, lint, rules, merge), so
   the extra time can be read per part.
2. A cell with nothing to report: checked with the report displayed as in Jupyter
   (`display = 'widget'`) against the same checked cell with `display = 'none'`.
   Target: ≤ 2 ms, shown as one quiet line.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from cells import timed_cell
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from torchmagic.pipeline import CellCheck
from torchmagic.run import CheckOptions
from torchmagic.runtime.errors import CellError
from torchmagic.runtime.memory import CudaMemoryProbe
from torchmagic.runtime.modes import ModeRecorder
from torchmagic.runtime.shapes import ShapeTracer
from torchmagic.runtime.sync import SyncProbe

SETUP = """\
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
X = torch.randn(64, 784)
Y = torch.randint(0, 10, (64,))
net = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
opt = torch.optim.SGD(net.parameters(), lr=0.01)
"""

TRAIN = """\
running = 0.0
for step in range({steps}):
    opt.zero_grad()
    loss = F.cross_entropy(net(X), Y)
    loss.backward()
    opt.step()
    running += loss.item()
"""


run = timed_cell


def collector_sets() -> dict[str, list]:
    modes = ModeRecorder()
    return {
        "sync probe (times .item() as a GPU wait)": [SyncProbe()],
        "module hooks (shapes, modes, TM001)": [modes, ShapeTracer(modes)],
        "CUDA memory probe": [CudaMemoryProbe()],
        "cell error": [CellError()],
        "after the cell (scan, lint, rules)": [],
    }


def with_collectors(shell: InteractiveShell, code: str, collectors: list) -> float:
    check = CellCheck(collectors=collectors)
    compiler = shell.compile
    check.begin(
        shell.user_ns,
        code,
        options=CheckOptions(sync_devices=("cpu",)),
        known_files=lambda: compiler._filename_map,
    )
    t0 = time.perf_counter()
    try:
        with capture_output():
            shell.run_cell(code, store_history=True)
    finally:
        check.end()
    return time.perf_counter() - t0


def bench_training(shell: InteractiveShell, steps: int, rounds: int) -> None:
    code = TRAIN.format(steps=steps)
    shell.run_cell(SETUP)
    shell.run_cell("%load_ext torchmagic")
    shell.run_cell("%config TorchCheck.display = 'none'")
    run(shell, code)  # warm up
    times: dict[str, list[float]] = {
        "plain": [],
        "checked (defaults)": [],
        "checked (sync probe on the CPU)": [],
    }
    parts: dict[str, list[float]] = {label: [] for label in collector_sets()}
    for _ in range(rounds):
        times["plain"].append(run(shell, code))
        shell.run_cell("%config TorchCheck.sync_devices = ['cuda']")
        times["checked (defaults)"].append(run(shell, "%%torchcheck\n" + code))
        shell.run_cell("%config TorchCheck.sync_devices = ['cpu']")
        times["checked (sync probe on the CPU)"].append(run(shell, "%%torchcheck\n" + code))
        for label, collectors in collector_sets().items():
            parts[label].append(with_collectors(shell, code, collectors))
    plain = statistics.median(times["plain"])
    print(f"MNIST-size MLP, batch 64, {steps} steps, .item() each step (median of {rounds} rounds):")
    print(f"  plain                             : {plain * 1e3:7.1f} ms ({plain / steps * 1e6:.0f} µs/step)")
    for label in ("checked (defaults)", "checked (sync probe on the CPU)"):
        t = statistics.median(times[label])
        print(f"  {label:<34}: {t * 1e3:7.1f} ms  +{(t / plain - 1) * 100:5.1f}% (target ≤ +25%)")
    print("  where the time goes, each part alone over plain:")
    for label, ts in parts.items():
        t = statistics.median(ts)
        print(f"    {label:<40}: +{(t - plain) * 1e3:6.1f} ms  (+{(t / plain - 1) * 100:4.1f}%)")


def bench_clean_cell(shell: InteractiveShell, rounds: int) -> None:
    code = "%%torchcheck\ny = 1 + 1\n"
    shell.run_cell("%config TorchCheck.sync_devices = ['cuda']")
    out: dict[str, float] = {}
    for display in ("none", "widget"):
        shell.run_cell(f"%config TorchCheck.display = '{display}'")
        run(shell, code)
        out[display] = statistics.median(run(shell, code) for _ in range(max(20, rounds * 10)))
    with capture_output() as cap:
        shell.run_cell(code)
    shown = cap.outputs[0].data.get("text/plain", "") if cap.outputs else ""
    print("a clean cell (nothing to report), checked:")
    print(f"  display='none'                    : {out['none'] * 1e3:6.2f} ms")
    print(
        f"  display='widget' (as in Jupyter)  : {out['widget'] * 1e3:6.2f} ms "
        f"(+{(out['widget'] - out['none']) * 1e3:.2f} ms; target ≤ 2 ms)"
    )
    print(f"  shown: {shown!r}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(1)
    shell = InteractiveShell.instance()
    print(f"torch {torch.__version__}, 1 intra-op thread")
    bench_training(shell, args.steps, args.rounds)
    bench_clean_cell(shell, args.rounds)


if __name__ == "__main__":
    main()
