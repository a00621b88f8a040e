"""How fast is the live scan, and what do the forward hooks cost per module call?

    .venv/bin/python bench/scan_speed.py [--tensors 10000] [--modules 1000]

1. A namespace with N small tensors and a model of M submodules: the torchmagic scan
   (records + live rules) when every tensor is new to it ("no cache": the first checked
   cell) and in the usual next cell (same objects, records kept where nothing changed),
   against the variable-inspector approach of calling `repr()` /
   `str()` on every variable (what a generic notebook variable explorer does; it also reads
   every tensor's values, which on a GPU means a device sync and a copy per tensor).
2. Forward-hook tracing: the extra time per module call with the ShapeTracer alone and with
   ShapeTracer + ModeRecorder (what a checked cell installs), on a model of cheap modules.

Targets: scan ≤ 20 ms for 10,000 tensors + a 1,000-module model; tracing ≤ 3 µs per call.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
from torch import nn

from torchmagic.live.scan import LiveScan
from torchmagic.run import CellRun
from torchmagic.runtime.modes import ModeRecorder
from torchmagic.runtime.shapes import ShapeTracer


def namespace(n_tensors: int, n_modules: int) -> dict:
    ns: dict = {f"t{i}": torch.randn(4, 4) for i in range(n_tensors)}
    ns["model"] = nn.Sequential(*[nn.Linear(16, 16) for _ in range(n_modules)])
    ns["losses"] = [torch.randn(()) for _ in range(100)]
    return ns


def timed(fn, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def cpu_timed(fn, repeat: int) -> list[float]:
    """CPU time of this thread: what the scan costs, less what other processes steal."""
    out = []
    for _ in range(repeat):
        t0 = time.thread_time()
        fn()
        out.append(time.thread_time() - t0)
    return out


def analyze(scan: LiveScan, ns: dict) -> None:
    """What a checked cell does after it ran: one namespace walk, records, live checks."""
    run = CellRun(ns, "x = 1\n")
    try:
        scan.analyze(run, [])
    finally:
        run.release()


def bench_scan(n_tensors: int, n_modules: int, repeat: int) -> None:
    ns = namespace(n_tensors, n_modules)
    warm = LiveScan()
    analyze(warm, ns)

    def fresh() -> None:
        # Every tensor new to the scan (the first checked cell, or a cell that rebinds all).
        analyze(LiveScan(), ns)

    def repeated() -> None:
        # The usual next cell: the same objects, records kept where metadata is unchanged.
        analyze(warm, ns)

    def inspector() -> None:
        for value in ns.values():
            repr(value)
            str(value)

    print(f"namespace: {n_tensors:,} tensors + a {n_modules:,}-module model (+ a list of 100 tensors)")
    medians = {}
    for label, fn in (("scan + live rules, no cache", fresh), ("scan + live rules, next cell", repeated)):
        wall, cpu = timed(fn, repeat), cpu_timed(fn, repeat)
        medians[label] = statistics.median(wall)
        print(
            f"  {label:<29}: median {medians[label] * 1e3:6.2f} ms wall, {statistics.median(cpu) * 1e3:6.2f} ms CPU"
            f" (best {min(wall) * 1e3:.2f} ms; target ≤ 20 ms)"
        )
    r = statistics.median(timed(inspector, max(3, repeat // 10)))
    print(f"  {'repr()/str() of every value':<29}: median {r * 1e3:6.0f} ms wall")
    for label, s in medians.items():
        print(f"  ratio, {label:<22}: {r / s:,.0f}× faster than repr()/str()")


def _module_collectors() -> list:
    modes = ModeRecorder()
    return [modes, ShapeTracer(modes)]


def bench_hooks(n_modules: int, repeat: int) -> None:
    model = nn.Sequential(*[nn.Identity() for _ in range(n_modules)])
    x = torch.ones(1)
    calls = n_modules + 1

    def per_call() -> float:
        return min(timed(lambda: model(x), repeat)) / calls

    base = per_call()
    results = {}
    for label, collectors in (
        ("ShapeTracer", [ShapeTracer()]),
        ("ShapeTracer + ModeRecorder", _module_collectors()),
    ):
        run = CellRun({"model": model}, "")
        for c in collectors:
            c.start(run)
        try:
            model(x)  # first call records shapes; the rest only count
            results[label] = per_call()
        finally:
            for c in reversed(collectors):
                c.stop(run)
    print(f"forward hooks: nn.Sequential of {n_modules:,} nn.Identity, per module call")
    print(f"  no hooks                     : {base * 1e6:6.2f} µs")
    for label, t in results.items():
        print(
            f"  {label:<29}: {t * 1e6:6.2f} µs  (+{(t - base) * 1e6:.2f} µs per call, target ≤ 3 µs; {t / base:.1f}× a bare call)"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tensors", type=int, default=10_000)
    ap.add_argument("--modules", type=int, default=1_000)
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, load average {load:.1f}")
    bench_scan(args.tensors, args.modules, args.repeat)
    bench_hooks(args.modules, args.repeat)


if __name__ == "__main__":
    main()
