"""What a checked cell costs for the namespace it leaves, and what the forward hooks cost.

    .venv/bin/python bench/scan_speed.py [--tensors 10000] [--modules 1000] [--repeat 20]

1. A namespace with N small tensors and a model of M submodules (plus a list of 100
   tensors). A checked cell that runs `x = 1` costs, on top of the plain cell, one namespace
   walk, the metadata records, the live checks, the lint and the report. Anchor, in the same
   run: a naive metadata walk of the same namespace, what any tool must do at least (shape,
   dtype, device and bytes of each tensor; parameters and names of each module), written
   plainly with `isinstance`, properties and `named_modules()`. Target: ≤ 3× the walk, both
   first time (every tensor new) and in the next cell (records kept where nothing changed).
   Peer: a variable inspector calling `repr()`/`str()` on every variable.
2. Forward hooks, per module call, on a model of cheap modules. Anchor: PyTorch's own no-op
   global hooks registered the same way (a forward pre-hook and an always-call forward hook).
   Target: torchmagic's added time ≤ 2× the no-op hooks' added time.

Times are this thread's CPU time, best of the repeats: figures mean the same on a loaded or
a quiet machine, and ratios to the in-run anchors mean the same on any machine.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
from torch import nn
from torch.nn.modules import module as module_hooks

from torchmagic.pipeline import CellCheck
from torchmagic.run import CellRun, CheckOptions
from torchmagic.runtime.modes import ModeRecorder
from torchmagic.runtime.shapes import ShapeTracer

CELL = "x = 1\n"


def namespace(n_tensors: int, n_modules: int) -> dict:
    ns: dict = {"__name__": "__main__"}
    ns.update({f"t{i}": torch.randn(4, 4) for i in range(n_tensors)})
    ns["model"] = nn.Sequential(*[nn.Linear(16, 16) for _ in range(n_modules)])
    ns["losses"] = [torch.randn(()) for _ in range(100)]
    return ns


def best(fn, repeat: int) -> float:
    """Fastest of `repeat` runs, in this thread's CPU seconds."""
    out = []
    for _ in range(repeat):
        t0 = time.thread_time()
        fn()
        out.append(time.thread_time() - t0)
    return min(out)


def naive_walk(ns: dict) -> list:
    rows = []
    for name, value in list(ns.items()):
        values = value if isinstance(value, (list, tuple)) else [value]
        for v in values:
            if isinstance(v, torch.Tensor):
                rows.append((name, tuple(v.shape), v.dtype, v.device, v.nelement() * v.element_size()))
            elif isinstance(v, nn.Module):
                rows.append((name, [p.shape for p in v.parameters()], [n for n, _ in v.named_modules()]))
    return rows


def bench_namespace(n_tensors: int, n_modules: int, repeat: int) -> None:
    ns = namespace(n_tensors, n_modules)
    code = compile(CELL, "<cell-1>", "exec")
    options = CheckOptions(sync_devices=(), trace_shapes=True)

    def checked_with(check: CellCheck) -> None:
        check.begin(ns, CELL, options=options, known_files=lambda: {"<cell-1>": 1})
        exec(code, ns)
        check.end()

    warm = CellCheck()
    checked_with(warm)
    plain = best(lambda: exec(code, ns), repeat)
    walk = best(lambda: naive_walk(ns), repeat)
    first = best(lambda: checked_with(CellCheck()), max(3, repeat // 4)) - plain
    nxt = best(lambda: checked_with(warm), repeat) - plain
    print(f"namespace: {n_tensors:,} tensors + a {n_modules:,}-module model (+ a list of 100 tensors)")
    print(f"  naive metadata walk (anchor)      : {walk * 1e3:6.1f} ms")
    print(
        f"  checked cell overhead, first time : {first * 1e3:6.1f} ms = {first / walk:.2f}× the walk (target ≤ 3×)"
    )
    print(
        f"  checked cell overhead, next cell  : {nxt * 1e3:6.1f} ms = {nxt / walk:.2f}× the walk (target ≤ 3×)"
    )
    inspector = best(lambda: [(repr(v), str(v)) for v in ns.values()], 1)
    print(
        f"  repr()/str() of every variable    : {inspector * 1e3:6.0f} ms (a variable inspector; {inspector / nxt:,.0f}× ours)"
    )


def bench_hooks(n_modules: int, repeat: int) -> None:
    model = nn.Sequential(*[nn.Identity() for _ in range(n_modules)])
    x = torch.ones(1)
    calls = n_modules + 1

    def per_call() -> float:
        return best(lambda: model(x), repeat) / calls

    def noop_pre(module, args):
        return None

    def noop_post(module, args, *rest):
        return None

    bare = per_call()
    handles = [
        module_hooks.register_module_forward_pre_hook(noop_pre),
        module_hooks.register_module_forward_hook(noop_post, with_kwargs=True, always_call=True),
    ]
    try:
        noop = per_call()
    finally:
        for h in handles:
            h.remove()
    modes = ModeRecorder()
    collectors = [modes, ShapeTracer(modes)]
    run = CellRun({"model": model}, "")
    for c in collectors:
        c.start(run)
    try:
        model(x)  # the first call records shapes; the rest count
        ours = per_call()
    finally:
        for c in reversed(collectors):
            c.stop(run)
    noop_added, ours_added = noop - bare, ours - bare
    print(f"forward hooks, per module call (nn.Sequential of {n_modules:,} nn.Identity):")
    print(f"  no hooks                          : {bare * 1e6:6.2f} µs")
    print(f"  PyTorch no-op pre + always-call   : +{noop_added * 1e6:5.2f} µs (anchor)")
    print(
        f"  torchmagic (shapes, modes, TM001) : +{ours_added * 1e6:5.2f} µs = "
        f"{ours_added / noop_added:.2f}× the no-op hooks (target ≤ 2×)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tensors", type=int, default=10_000)
    ap.add_argument("--modules", type=int, default=1_000)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, load average {load:.1f}")
    bench_namespace(args.tensors, args.modules, args.repeat)
    bench_hooks(args.modules, args.repeat)


if __name__ == "__main__":
    main()
