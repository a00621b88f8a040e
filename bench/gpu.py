"""What `%%torchcheck` costs on a GPU, and what it leaves behind for later cells.

    python bench/gpu.py [--rounds 5]         # on any machine with CUDA

Everything runs in one IPython shell, interleaved over several rounds, medians reported:

1. A GPU-bound cell (a large MLP, 100 steps) and a launch-bound one (an MNIST-size MLP,
   batch 64, 300 steps, `.item()` each step), each plain, under `%%torchcheck` (all collectors
   on, display off), and inside `torch.profiler.profile(with_stack=True)` plus its table (the
   peer). Target: checked launch-bound cell ≤ +25% over plain. Then each part of the check
   alone, so the extra time can be read per collector.
2. Later unchecked cells: the small-model loop and a loop of 20,000 small CUDA allocations,
   timed before any checked cell, again with nothing checked (the session's own drift), after
   one checked cell, after 50, and after `%unload_ext torchmagic`. Target: within that drift
   (≤ 5%) of the time before.
3. That every sync kind is still attributed at its line (`.item()`, a boolean mask,
   `nonzero`, `bool()`, `.cpu()`, `.tolist()`, `float()`, a pageable non-blocking copy,
   `torch.cuda.synchronize()`, a stream and an event sync).

Prints a Markdown table for README's cost section.
"""

from __future__ import annotations

import argparse
import statistics
import sys

import torch
from cells import timed_cell
from IPython.core.interactiveshell import InteractiveShell

SETUP = """\
import torch, torch.nn as nn, torch.nn.functional as F
dev = torch.device("cuda")
torch.manual_seed(0)
big = nn.Sequential(nn.Linear(4096, 8192), nn.ReLU(), nn.Linear(8192, 8192), nn.ReLU(), nn.Linear(8192, 10)).to(dev)
big_opt = torch.optim.SGD(big.parameters(), lr=1e-3)
BX, BY = torch.randn(2048, 4096, device=dev), torch.randint(0, 10, (2048,), device=dev)
small = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10)).to(dev)
small_opt = torch.optim.SGD(small.parameters(), lr=1e-2)
SX, SY = torch.randn(64, 784, device=dev), torch.randint(0, 10, (64,), device=dev)
"""

GPU_BOUND = """\
for step in range(100):
    big_opt.zero_grad()
    loss = F.cross_entropy(big(BX), BY)
    loss.backward()
    big_opt.step()
torch.cuda.synchronize()
"""

LAUNCH_BOUND = """\
running = 0.0
for step in range(300):
    small_opt.zero_grad()
    loss = F.cross_entropy(small(SX), SY)
    loss.backward()
    small_opt.step()
    running += loss.item()
torch.cuda.synchronize()
"""

ALLOCATIONS = """\
for _ in range(20000):
    t = torch.empty(256, device=dev)
torch.cuda.synchronize()
"""

PROFILED = """\
import torch.profiler
with torch.profiler.profile(with_stack=True) as prof:
{body}
table = prof.key_averages(group_by_stack_n=5).table(sort_by="self_cuda_time_total", row_limit=10)
"""

SYNC_KINDS = """\
x = torch.randn(1000, device=dev)
a = x.sum().item()
m = x[x > 0]
nz = x.nonzero()
b = bool(x.sum() > 0)
h = x.cpu()
lst = x[:10].tolist()
f = float(x.mean())
pageable = torch.randn(1000).to(dev, non_blocking=True)
torch.cuda.synchronize()
torch.cuda.current_stream().synchronize()
ev = torch.cuda.Event(); ev.record(); ev.synchronize()
"""
EXPECTED_SYNC_LINES = {
    3: "item",
    4: "mask",
    5: "nonzero",
    6: "bool",
    7: "cpu",
    8: "tolist",
    9: "float",
    10: "pageable copy",
    11: "torch.cuda.synchronize",
    12: "Stream.synchronize",
    13: "Event.synchronize",
}


def run(shell: InteractiveShell, code: str) -> float:
    torch.cuda.synchronize()
    return timed_cell(shell, code)


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def profiled(body: str) -> str:
    return PROFILED.format(body="\n".join("    " + line for line in body.splitlines()))


def bench_cells(shell: InteractiveShell, rounds: int) -> list[str]:
    rows = []
    for label, body in (
        ("large MLP, 100 steps, GPU-bound", GPU_BOUND),
        ("MNIST-size MLP, batch 64, 300 steps", LAUNCH_BOUND),
    ):
        for cell in (body, "%%torchcheck\n" + body, profiled(body)):
            run(shell, cell)  # warm up
        plain, checked, prof = [], [], []
        for _ in range(rounds):
            plain.append(run(shell, body))
            checked.append(run(shell, "%%torchcheck\n" + body))
            prof.append(run(shell, profiled(body)))
        p, c, r = med(plain), med(checked), med(prof)
        rows.append(f"| {label} | {p:.3f} s | {(c / p - 1) * 100:+.1f}% | {(r / p - 1) * 100:+,.0f}% |")
        print(
            f"{label}: plain {p * 1e3:.1f} ms, checked {c * 1e3:.1f} ms ({(c / p - 1) * 100:+.1f}%), "
            f"profiler {r * 1e3:.1f} ms ({(r / p - 1) * 100:+,.0f}%)"
        )
    return rows


def bench_parts(shell: InteractiveShell, rounds: int) -> None:
    from torchmagic.pipeline import CellCheck
    from torchmagic.run import CheckOptions
    from torchmagic.runtime.errors import CellError
    from torchmagic.runtime.memory import CudaMemoryProbe
    from torchmagic.runtime.modes import ModeRecorder
    from torchmagic.runtime.shapes import ShapeTracer
    from torchmagic.runtime.sync import SyncProbe

    def alone(collectors: list) -> float:
        check = CellCheck(collectors=collectors)
        compiler = shell.compile
        check.begin(
            shell.user_ns, LAUNCH_BOUND, options=CheckOptions(), known_files=lambda: compiler._filename_map
        )
        try:
            return run(shell, LAUNCH_BOUND)
        finally:
            check.end()

    plain = med([run(shell, LAUNCH_BOUND) for _ in range(rounds)])
    print("launch-bound cell, each part alone over plain:")
    modes = ModeRecorder()
    for label, collectors in (
        ("sync probe", [SyncProbe()]),
        ("module hooks (shapes, modes, TM001)", [modes, ShapeTracer(modes)]),
        ("CUDA memory probe", [CudaMemoryProbe()]),
        ("cell error", [CellError()]),
        ("after the cell (scan, lint, rules)", []),
    ):
        t = med([alone(collectors) for _ in range(rounds)])
        print(f"  {label:<38}: {(t / plain - 1) * 100:+5.1f}%")


def bench_later_cells(shell: InteractiveShell, rounds: int, checked_cells: int) -> list[str]:
    """Unchecked cells timed before any checked cell, again with nothing checked in between
    (the drift of the session itself: the noise floor), after one checked cell, after
    `checked_cells` in all, and after `%unload_ext`."""
    cells = {"small-model loop": LAUNCH_BOUND, "20,000 small CUDA allocations": ALLOCATIONS}

    def timed() -> dict[str, float]:
        return {k: med([run(shell, c) for _ in range(rounds)]) for k, c in cells.items()}

    for c in cells.values():  # warm up: cuBLAS handles, the allocator's pool, specialised bytecode
        run(shell, c)
    stages = {"before": timed(), "again, nothing checked": timed()}
    run(shell, "%%torchcheck\n" + LAUNCH_BOUND)
    stages["after 1 checked cell"] = timed()
    for _ in range(checked_cells - 1):
        run(shell, "%%torchcheck\n" + LAUNCH_BOUND)
    stages[f"after {checked_cells} checked cells"] = timed()
    shell.run_cell("%unload_ext torchmagic")
    stages["after `%unload_ext`"] = timed()
    shell.run_cell("%load_ext torchmagic")
    shell.run_cell("%config TorchCheck.display = 'none'")
    names = list(stages)[1:]
    rows = [
        f"| later cell | before any checked cell | {' | '.join(names)} |",
        "|---" * (len(names) + 2) + "|",
    ]
    for k in cells:
        base = stages["before"][k]
        rel = [f"{(stages[n][k] / base - 1) * 100:+.1f}%" for n in names]
        rows.append(f"| {k}, unchecked | {base * 1e3:.1f} ms | {' | '.join(rel)} |")
        print(f"{k}: before {base * 1e3:.1f} ms; " + ", ".join(f"{n} {r}" for n, r in zip(names, rel)))
    print("(target: after checked cells and after unload within the drift of 'again, nothing checked', ≤ 5%)")
    return rows


def check_sync_kinds(shell: InteractiveShell) -> None:
    import torchmagic

    run(shell, "%%torchcheck\n" + SYNC_KINDS)
    report = torchmagic.last_report()
    seen = {s.line: s for s in report.syncs}
    print("sync kinds attributed at their lines:")
    for line, kind in EXPECTED_SYNC_LINES.items():
        rec = seen.get(line)
        status = f"{rec.count}× {rec.seconds * 1e3:.2f} ms {rec.ops}" if rec else "MISSING"
        print(f"  line {line:>2} {kind:<24} {status}")
    extra = sorted(set(seen) - set(EXPECTED_SYNC_LINES))
    print(f"  lines charged that do not sync: {extra or 'none'}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--checked-cells", type=int, default=50, help="checked cells before the last timing")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench/gpu.py needs a CUDA device; none here.")
        return 0
    shell = InteractiveShell.instance()
    shell.run_cell(SETUP)
    shell.run_cell("%load_ext torchmagic")
    shell.run_cell("%config TorchCheck.display = 'none'")
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    later = bench_later_cells(shell, args.rounds, args.checked_cells)  # first: nothing checked before it
    table = bench_cells(shell, args.rounds)
    bench_parts(shell, args.rounds)
    check_sync_kinds(shell)
    print("\n| cell | plain | under `%%torchcheck` | `torch.profiler(with_stack)` |\n|---|---|---|---|")
    print("\n".join(table))
    print()
    print("\n".join(later))
    return 0


if __name__ == "__main__":
    sys.exit(main())
