"""Run real notebooks plain and under `%torchcheck on`; compare what the user sees, collect findings.

    python bench/live_notebooks.py DIR [--out results.json] [--timeout 120]
        [--pythonpath CHECKOUT] [--runs 2] [--seed 0 | --no-seed] [--threads N] [--only NAME]

Each notebook under DIR runs in fresh `python3` kernels, each in its own temporary copy of the
notebook's folder (helper modules and data files come along): `--runs` times as written and
`--runs` times with a first cell that loads torchmagic, switches automatic checking on and
shows reports as static HTML, plain and checked runs interleaved. Unless `--no-seed`, every
run starts with the same seeding of `random`, NumPy and torch (and PYTHONHASHSEED), so that
unseeded notebooks can be compared value for value.

Cell by cell, the checked runs' outputs (streams, results, displays other than torchmagic's
own reports, errors' name and value) are compared with the plain ones after normalising
timings, memory addresses and kernel pids. A cell whose plain runs disagree is
'nondeterministic' (only the kinds of its outputs are compared); a difference after such a
cell is 'suspect' rather than a difference. Findings, internal errors and `torchmagic:` warning
lines come from the first checked run's report outputs (`application/vnd.torchmagic.report+json`).
Per cell, the minimum over the runs of two times: the kernel's wall time (nbclient's timing
metadata) and the kernel process's CPU time (pre/post-run hooks the setup cell registers, so
torchmagic's post-run work counts); the CPU time is the steadier one on a shared machine,
above all with `--threads 1` (torch's worker threads spin while they wait for a busy core).

`--pythonpath` is prepended to the kernels' PYTHONPATH so a frozen checkout can be measured
while another is being edited; the setup cell prints `torchmagic.__file__` and the runner stops
if that file is not inside the checkout asked for. Exit status: 0 clean, 1 differences or
crashes, 2 torchmagic did not load.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient

REPORT_MIMETYPE = "application/vnd.torchmagic.report+json"
WARNING_PREFIX = "torchmagic:"
FILE_MARKER = "torchmagic-file="
LOAD_TORCHMAGIC = [
    f"print('{FILE_MARKER}' + __import__('torchmagic').__file__)",
    "%load_ext torchmagic",
    "%config TorchCheck.display = 'html'",
    "%torchcheck on",
]
CPU_LOG = ".live-notebooks-cpu.jsonl"
# Registered last in the setup cell, so a checked cell's CPU time includes torchmagic's own
# post-run work (lint, namespace scan, report). CPU time of the whole kernel process (all
# threads) resists the load of other processes on a shared machine better than wall time.
CPU_HOOKS = f"""
def _bench_cpu_hooks():
    import json, os, time
    log, started = os.path.abspath({CPU_LOG!r}), []
    def pre(info):
        started[:] = [time.process_time()]
    def post(result):
        with open(log, "a") as f:
            f.write(json.dumps(time.process_time() - started[0] if started else None) + "\\n")
    get_ipython().events.register("pre_run_cell", pre)
    get_ipython().events.register("post_run_cell", post)
_bench_cpu_hooks(); del _bench_cpu_hooks"""
FINDING_KEYS = ("rule", "severity", "line", "message", "object", "source", "hint")

_NORMALISERS = [
    (re.compile(r"0x[0-9a-fA-F]{6,}"), "0x?"),
    (re.compile(r"ipykernel_\d+"), "ipykernel_?"),
    (re.compile(r"\b\d+(\.\d+)?\s*(ns|µs|us|ms|s|sec|secs|seconds|min|minutes)\b"), "<time>"),
    (re.compile(r"\b\d+(\.\d+)?\s*(it/s|s/it)\b"), "<rate>"),
    (re.compile(r"(Wall time|CPU times)\s*:[^\n]*"), r"\1: <time>"),
    (re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+)?"), "<datetime>"),
]


def normalise(text: str) -> str:
    for pattern, repl in _NORMALISERS:
        text = pattern.sub(repl, text)
    return text


def setup_cell(seed: int | None, checked: bool) -> str:
    """The first cell of every run: the same seeding for plain and checked runs, then
    torchmagic for checked runs only."""
    # torch is imported here in every run, so that no user cell pays for it in one kind of run
    # only (loading torchmagic imports torch)
    lines = ["# live-notebooks bench: setup", "import random as _r, numpy as _np, torch as _t"]
    if seed is not None:
        lines.append(f"_r.seed({seed}); _np.random.seed({seed}); _t.manual_seed({seed})")
    lines.append("del _r, _np, _t")
    return "\n".join(lines + (LOAD_TORCHMAGIC if checked else []) + [CPU_HOOKS])


def _bundle(data: dict[str, Any]) -> dict[str, str]:
    """A display's data, one normalised string per mimetype (images and long values hashed)."""
    out = {}
    for mime, value in sorted(data.items()):
        if mime.startswith("image/") and isinstance(value, str) and not mime.endswith("svg+xml"):
            out[mime] = "sha1:" + hashlib.sha1(base64.b64decode(value)).hexdigest()[:12]
            continue
        text = normalise(value if isinstance(value, str) else json.dumps(value, sort_keys=True))
        out[mime] = text if len(text) <= 200 else "sha1:" + hashlib.sha1(text.encode()).hexdigest()[:12]
    return out


@dataclass
class CellView:
    """What the user sees of one cell, normalised; torchmagic's own outputs taken apart."""

    stdout: str = ""
    stderr: str = ""
    results: list[dict[str, str]] = field(default_factory=list)
    displays: list[dict[str, str]] = field(default_factory=list)
    error: list[str] | None = None
    reports: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    seconds: float | None = None
    cpu_s: float | None = None

    def visible(self) -> dict[str, Any]:
        return {
            "stdout": normalise(self.stdout),
            "stderr": normalise(self.stderr),
            "results": self.results,
            "displays": self.displays,
            "error": self.error,
        }

    def kinds(self) -> dict[str, Any]:
        """The kinds of output only: compared where a cell's values vary from run to run."""
        return {
            "stdout": bool(self.stdout),
            "stderr": bool(self.stderr),
            "results": [sorted(r) for r in self.results],
            "displays": [sorted(d) for d in self.displays],
            "error": self.error[0] if self.error else None,
        }


def _seconds(meta: dict[str, Any]) -> float | None:
    """Kernel-side time of a cell (post-run hooks included) from nbclient's timing metadata."""
    ex = meta.get("execution", {})
    start, end = ex.get("iopub.execute_input"), ex.get("shell.execute_reply")
    if not start or not end:
        return None

    def parse(value: Any) -> datetime:
        return value if isinstance(value, datetime) else datetime.fromisoformat(str(value))

    return (parse(end) - parse(start)).total_seconds()


def cell_view(cell: Any) -> CellView:
    view = CellView(seconds=_seconds(cell.get("metadata", {})))
    for out in cell.get("outputs", []):
        kind = out.get("output_type")
        if kind == "stream" and out.get("name") == "stderr":
            lines = out.get("text", "").splitlines(keepends=True)
            view.warnings += [ln.strip() for ln in lines if ln.startswith(WARNING_PREFIX)]
            view.stderr += "".join(ln for ln in lines if not ln.startswith(WARNING_PREFIX))
        elif kind == "stream":
            view.stdout += out.get("text", "")
        elif kind == "error":
            view.error = [out.get("ename", ""), normalise(out.get("evalue", ""))]
        elif kind in ("execute_result", "display_data"):
            data = out.get("data", {})
            if REPORT_MIMETYPE in data:
                view.reports.append(data[REPORT_MIMETYPE])
            else:
                (view.results if kind == "execute_result" else view.displays).append(_bundle(data))
    return view


@dataclass
class Run:
    setup: CellView
    cells: list[CellView]
    wall_s: float
    crash: str | None = None


def execute(nb_path: Path, setup: str, timeout: int, env: dict[str, str]) -> Run:
    """One run in a fresh kernel and a fresh copy of the notebook's folder."""
    nb = nbformat.read(nb_path, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(setup))
    with tempfile.TemporaryDirectory(prefix="live-nb-") as work:
        ignore = shutil.ignore_patterns("*.ipynb", ".ipynb_checkpoints", "__pycache__")
        shutil.copytree(nb_path.parent, work, ignore=ignore, dirs_exist_ok=True)
        client = NotebookClient(
            nb,
            timeout=timeout,
            kernel_name="python3",
            allow_errors=True,
            store_widget_state=False,
            resources={"metadata": {"path": work}},
        )
        crash = None
        t0 = time.perf_counter()
        try:
            client.execute(env=env)
        except Exception as e:  # dead kernel, cell timeout: keep what ran
            crash = f"{type(e).__name__}: {str(e)[:500]}"
        wall = time.perf_counter() - t0
        log = Path(work, CPU_LOG)
        cpu = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    views = [cell_view(c) for c in nb.cells if c.cell_type == "code"]
    for view, seconds in zip(views, cpu):  # the setup cell's own entry comes first
        view.cpu_s = seconds
    return Run(setup=views[0], cells=views[1:], wall_s=wall, crash=crash)


def loaded_from(run: Run) -> tuple[str | None, str | None]:
    """(torchmagic.__file__ in the kernel, the setup cell's error if it failed)."""
    match = re.search(re.escape(FILE_MARKER) + r"(\S+)", run.setup.stdout)
    error = ": ".join(run.setup.error) if run.setup.error else run.crash
    return (match.group(1) if match else None), error


def _min_seconds(views: list[CellView], attr: str = "seconds") -> float | None:
    return min((getattr(v, attr) for v in views if getattr(v, attr) is not None), default=None)


def compare(plain: list[Run], checked: list[Run], sources: list[str]) -> list[dict[str, Any]]:
    """Per cell: whether any checked run's outputs differ from the plain ones, and findings."""
    cells = []
    varied_before = False
    for i, source in enumerate(sources):
        runs = [r.cells[i] if i < len(r.cells) else CellView() for r in plain]
        mine = [r.cells[i] if i < len(r.cells) else CellView() for r in checked]
        stable = all(r.visible() == runs[0].visible() for r in runs)
        if stable:
            differs = any(m.visible() != runs[0].visible() for m in mine)
        else:
            same_kinds = all(r.kinds() == runs[0].kinds() for r in runs)
            differs = same_kinds and any(m.kinds() != runs[0].kinds() for m in mine)
        first = mine[0]
        entry: dict[str, Any] = {
            "cell": i + 1,
            "source_head": source.strip().splitlines()[0][:80] if source.strip() else "",
            "nondeterministic": not stable,
            "differs": differs and not varied_before,
            "suspect": differs and varied_before,
            "plain_s": _min_seconds(runs),
            "checked_s": _min_seconds(mine),
            "plain_cpu_s": _min_seconds(runs, "cpu_s"),
            "checked_cpu_s": _min_seconds(mine, "cpu_s"),
            "check_s": sum(rep.get("check_s") or 0 for rep in first.reports),
            "findings": [
                {k: f.get(k) for k in FINDING_KEYS} for rep in first.reports for f in rep.get("findings", [])
            ],
            "errors": [e for rep in first.reports for e in rep.get("errors", [])],
            "warnings": first.warnings,
        }
        if differs:
            entry["plain_output"] = runs[0].visible()
            entry["checked_output"] = next(m.visible() for m in mine if m.visible() != runs[0].visible())
        elif not stable:
            entry["plain_variants"] = [r.visible() for r in runs[:2]]
        cells.append(entry)
        varied_before = varied_before or not stable
    return cells


def run_notebook(
    nb_path: Path, timeout: int, env: dict[str, str], runs: int, seed: int | None
) -> dict[str, Any]:
    nb = nbformat.read(nb_path, as_version=4)
    sources = [c.source for c in nb.cells if c.cell_type == "code"]
    plain: list[Run] = []
    checked: list[Run] = []
    for _ in range(runs):  # interleaved, so that load on the machine hits both alike
        plain.append(execute(nb_path, setup_cell(seed, checked=False), timeout, env))
        checked.append(execute(nb_path, setup_cell(seed, checked=True), timeout, env))
    cells = compare(plain, checked, sources)
    loaded, setup_error = loaded_from(checked[0])
    rules = Counter(f"{f['rule']}/{f['source']}" for c in cells for f in c["findings"])
    return {
        "notebook": str(nb_path),
        "torchmagic_file": loaded,
        "setup_error": setup_error,
        "seed": seed,
        "runs": runs,
        "code_cells": len(sources),
        "differing_cells": [c["cell"] for c in cells if c["differs"]],
        "suspect_cells": [c["cell"] for c in cells if c["suspect"]],
        "nondeterministic_cells": [c["cell"] for c in cells if c["nondeterministic"]],
        "plain_crash": [r.crash for r in plain if r.crash],
        "checked_crash": [r.crash for r in checked if r.crash],
        "internal_errors": sum(len(c["errors"]) for c in cells),
        "warning_lines": sum(len(c["warnings"]) for c in cells),
        "findings_by_rule": dict(sorted(rules.items())),
        "plain_wall_s": min(r.wall_s for r in plain),
        "checked_wall_s": min(r.wall_s for r in checked),
        "plain_cells_s": sum(c["plain_s"] or 0 for c in cells),
        "checked_cells_s": sum(c["checked_s"] or 0 for c in cells),
        "plain_cpu_s": sum(c["plain_cpu_s"] or 0 for c in cells),
        "checked_cpu_s": sum(c["checked_cpu_s"] or 0 for c in cells),
        "setup_plain_s": _min_seconds([r.setup for r in plain]),
        "setup_checked_s": _min_seconds([r.setup for r in checked]),
        "cells": cells,
    }


@dataclass
class Row:
    name: str
    cells: int
    diff: int
    suspect: int
    nondet: int
    crash: int
    interr: int
    findings: int
    plain_s: float
    checked_s: float
    plain_cpu: float
    checked_cpu: float

    @classmethod
    def of(cls, r: dict[str, Any]) -> Row:
        return cls(
            name=Path(r["notebook"]).stem[:34],
            cells=r["code_cells"],
            diff=len(r["differing_cells"]),
            suspect=len(r["suspect_cells"]),
            nondet=len(r["nondeterministic_cells"]),
            crash=0 if r["plain_crash"] else len(r["checked_crash"]),
            interr=r["internal_errors"] + r["warning_lines"],
            findings=sum(r["findings_by_rule"].values()),
            plain_s=r["plain_cells_s"] + (r["setup_plain_s"] or 0),
            checked_s=r["checked_cells_s"] + (r["setup_checked_s"] or 0),
            plain_cpu=r["plain_cpu_s"],
            checked_cpu=r["checked_cpu_s"],
        )


def _pct(checked: float, plain: float) -> str:
    return f"{(checked / plain - 1) * 100:+.0f}%" if plain else "n/a"


def summarise(results: list[dict[str, Any]]) -> str:
    rows = [Row.of(r) for r in results]
    names = [f.name for f in fields(Row)][1:]
    total = Row("TOTAL", *(sum(getattr(r, n) for r in rows) for n in names))
    head = (
        f"{'notebook':34} {'cells':>5} {'diff':>4} {'susp':>4} {'nondet':>6} {'crash':>5} {'int.err':>7} "
        f"{'findings':>8} {'plain s':>8} {'checked s':>9} {'+wall':>6} {'+cpu':>6}"
    )
    lines = [head, "-" * len(head)]
    for r in [*rows, total]:
        lines.append(
            f"{r.name:34} {r.cells:5d} {r.diff:4d} {r.suspect:4d} {r.nondet:6d} {r.crash:5d} {r.interr:7d} "
            f"{r.findings:8d} {r.plain_s:8.2f} {r.checked_s:9.2f} {_pct(r.checked_s, r.plain_s):>6} "
            f"{_pct(r.checked_cpu, r.plain_cpu):>6}"
        )
    rules: Counter[str] = Counter()
    for r in results:
        rules.update(r["findings_by_rule"])
    by_rule = ", ".join(f"{k}×{n}" for k, n in sorted(rules.items())) or "none"
    note = "plain/checked s: kernel wall time per cell, setup cell included; +wall/+cpu: overhead"
    note += " in wall time and in the kernel's CPU time, torchmagic's post-run work included"
    return "\n".join([*lines, "", f"findings per rule/source: {by_rule}", note])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", type=Path, help="folder of .ipynb files (searched recursively)")
    ap.add_argument("--out", type=Path, default=Path("live_results.json"), help="JSON results")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per cell")
    ap.add_argument("--pythonpath", type=Path, default=None, help="checkout to import torchmagic from")
    ap.add_argument(
        "--runs", type=int, default=2, help="plain and checked runs each (2+ detects nondeterminism)"
    )
    ap.add_argument("--seed", type=int, default=0, help="seed for random, NumPy, torch and PYTHONHASHSEED")
    ap.add_argument("--no-seed", dest="seed", action="store_const", const=None, help="run notebooks unseeded")
    ap.add_argument(
        "--threads", type=int, default=None, help="OMP/MKL threads of the kernels (1: steadier timings)"
    )
    ap.add_argument("--only", default=None, help="run only notebooks whose file name contains this")
    args = ap.parse_args(argv)

    env = dict(os.environ)
    expected = args.pythonpath.resolve() if args.pythonpath else None
    if expected:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(expected), env.get("PYTHONPATH")]))
    if args.seed is not None:
        env["PYTHONHASHSEED"] = str(args.seed)
    if args.threads:
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(args.threads)
    notebooks = sorted(p for p in args.dir.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    notebooks = [p for p in notebooks if args.only is None or args.only in p.name]
    results: list[dict[str, Any]] = []
    for nb_path in notebooks:
        print(f"running {nb_path} ...", file=sys.stderr, flush=True)
        result = run_notebook(nb_path, args.timeout, env, max(1, args.runs), args.seed)
        loaded = result["torchmagic_file"]
        if loaded is None:
            print(f"error: torchmagic did not load: {result['setup_error']}", file=sys.stderr)
            return 2
        if expected and not Path(loaded).resolve().is_relative_to(expected):
            print(f"error: the kernel imported torchmagic from {loaded}, not {expected}", file=sys.stderr)
            return 2
        results.append(result)
        args.out.write_text(json.dumps({"notebooks": results}, indent=1, default=str), encoding="utf-8")
    print(summarise(results))
    print(f"\nwrote {args.out}")
    return 1 if any(r["differing_cells"] or r["checked_crash"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
