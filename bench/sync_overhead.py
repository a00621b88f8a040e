"""What the sync probe costs, side by side with torch.profiler, on one training cell.

The same cell (a small MLP, a few hundred SGD steps, `loss.item()` every step) runs in one
IPython shell three ways, interleaved, several rounds:

  plain     the cell as is
  probe     a `%%torchcheck` cell with `sync_devices = ["cpu"]` (the portable backend times
            every CPU "sync" at the sync-prone entry points it wraps)
  profiler  the cell inside `torch.profiler.profile(with_stack=True)` plus building its table
            (`key_averages(group_by_stack_n=5).table(...)`), the usual way to find the same lines

Times are the cell's wall time (`run_cell`), median of the rounds; for `probe` also the part
spent in the cell's code alone (without torchmagic's lint/scan after the cell).

    .venv/bin/python bench/sync_overhead.py [--steps 300] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from IPython.core.interactiveshell import InteractiveShell
from torch.overrides import TorchFunctionMode

SETUP = """\
import time
import torch
import torch.nn as nn
torch.manual_seed(0)
X = torch.randn(128, 64)
Y = torch.randint(0, 10, (128,))
"""

TRAIN = """\
t0 = time.perf_counter()
net = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
losses = []
for step in range(STEPS):
    opt.zero_grad()
    loss = nn.functional.cross_entropy(net(X), Y)
    loss.backward()
    opt.step()
    losses.append(loss.item())
body_s = time.perf_counter() - t0
"""

PROFILED = """\
import torch.profiler
with torch.profiler.profile(with_stack=True) as prof:
{body}
table = prof.key_averages(group_by_stack_n=5).table(sort_by="self_cpu_time_total", row_limit=10)
"""


class _Count(TorchFunctionMode):
    n = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        _Count.n += 1
        return func(*args, **(kwargs or {}))


def timed(shell: InteractiveShell, code: str) -> float:
    t0 = time.perf_counter()
    result = shell.run_cell(code, store_history=True)
    elapsed = time.perf_counter() - t0
    result.raise_error()
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)  # steadier timings; the probe's cost is per op, on the CPU side

    shell = InteractiveShell.instance()
    shell.run_cell("%load_ext torchmagic", store_history=False)
    shell.run_cell("%config TorchCheck.display = 'none'", store_history=False)
    shell.run_cell("%config TorchCheck.sync_devices = ['cpu']", store_history=False)
    shell.run_cell(SETUP, store_history=True)
    shell.user_ns["STEPS"] = args.steps

    plain_cell = "# plain\n" + TRAIN
    probe_cell = "%%torchcheck\n" + TRAIN
    indented = "\n".join("    " + line for line in TRAIN.splitlines())
    prof_cell = PROFILED.format(body=indented)

    timed(shell, plain_cell)  # warm-up (allocator, first-call paths, the profiler's init)
    timed(shell, probe_cell)
    timed(shell, prof_cell)

    walls: dict[str, list[float]] = {"plain": [], "probe": [], "profiler": []}
    bodies: dict[str, list[float]] = {"plain": [], "probe": [], "profiler": []}
    report = None
    for _ in range(args.rounds):
        for name, cell in (("plain", plain_cell), ("probe", probe_cell), ("profiler", prof_cell)):
            walls[name].append(timed(shell, cell))
            bodies[name].append(shell.user_ns["body_s"])
            if name == "probe":
                import torchmagic

                report = torchmagic.last_report()

    with _Count():
        shell.user_ns["STEPS"] = 1
        shell.run_cell(TRAIN, store_history=False)
    shell.user_ns["STEPS"] = args.steps
    ops_per_step = _Count.n

    wall = {k: statistics.median(v) for k, v in walls.items()}
    body = {k: statistics.median(v) for k, v in bodies.items()}
    probe_added = wall["probe"] - wall["plain"]
    probe_body_added = body["probe"] - body["plain"]
    prof_added = wall["profiler"] - wall["plain"]

    print(
        f"torch {torch.__version__}, {args.steps} steps, {ops_per_step} torch calls per step, "
        f"median of {args.rounds} rounds, 1 thread"
    )
    print(f"{'':10} {'cell wall':>10} {'cell code':>10}")
    for k in walls:
        print(f"{k:10} {wall[k] * 1e3:8.1f}ms {body[k] * 1e3:8.1f}ms")
    print()
    print(
        f"probe added:    {probe_added * 1e3:7.1f} ms ({probe_added / wall['plain']:.0%} of plain) "
        f"[cell code alone: {probe_body_added * 1e3:.1f} ms, "
        f"{probe_body_added / body['plain']:.0%}; "
        f"{probe_body_added / (ops_per_step * args.steps) * 1e6:.2f} µs per torch call]"
    )
    print(f"profiler added: {prof_added * 1e3:7.1f} ms ({prof_added / wall['plain']:.0%} of plain)")
    print(
        f"probe / profiler added time: {probe_added / prof_added:.3f} "
        f"(target <= 0.100); probe / plain: {probe_added / wall['plain']:.3f} (target <= 0.300)"
    )
    if report is not None:
        for s in report.syncs:
            print(f"  line {s.line}: {s.count} syncs, {s.seconds * 1e3:.2f} ms, {s.ops}  {s.code}")


if __name__ == "__main__":
    main()
