"""Run real notebooks plain and under `%torchcheck on`; compare what the user sees, collect findings.

    python bench/live_notebooks.py DIR [--out results.json] [--timeout 120]
        [--pythonpath CHECKOUT] [--plain-runs 2]

Each notebook in DIR runs in a fresh `python3` kernel (its own temporary working folder):
`--plain-runs` times as written, then once with a first injected cell that loads torchmagic,
switches automatic checking on and shows reports as static HTML. Cell by cell, the checked
run's outputs (streams, results, displays other than torchmagic's own reports, errors' name
and value) are compared with the plain ones after normalising timings and memory addresses.
A cell whose plain runs disagree is 'nondeterministic' (only the kinds of its outputs are
compared then), not a difference. Findings, internal errors and `torchmagic:` warning lines
are read from each cell's report output (`application/vnd.torchmagic.report+json`).

`--pythonpath` is prepended to the kernels' PYTHONPATH so a frozen checkout can be measured
while another one is being edited; the injected cell prints `torchmagic.__file__` and the
runner stops with an error if that file is not inside the checkout asked for. Start it from
a folder that holds no `torchmagic` package (kernels run in temporary folders anyway).
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
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient

REPORT_MIMETYPE = "application/vnd.torchmagic.report+json"
WARNING_PREFIX = "torchmagic:"
FILE_MARKER = "torchmagic-file="
INJECTED = "\n".join(
    [
        f"print('{FILE_MARKER}' + __import__('torchmagic').__file__)",
        "%load_ext torchmagic",
        "%config TorchCheck.display = 'html'",
        "%torchcheck on",
    ]
)

_NORMALISERS = [
    (re.compile(r"0x[0-9a-fA-F]{6,}"), "0x?"),
    (re.compile(r"ipykernel_\d+"), "ipykernel_?"),  # the kernel's pid in warning paths
    (re.compile(r"\b\d+(\.\d+)?\s*(ns|µs|us|ms|s|sec|secs|seconds|min|minutes)\b"), "<time>"),
    (re.compile(r"\b\d+(\.\d+)?\s*(it/s|s/it)\b"), "<rate>"),
    (re.compile(r"(Wall time|CPU times|user|sys|total)\s*:\s*[^\n]*"), r"\1: <time>"),
    (re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+)?"), "<datetime>"),
]


def normalise(text: str) -> str:
    for pattern, repl in _NORMALISERS:
        text = pattern.sub(repl, text)
    return text


def _digest(value: Any) -> str:
    raw = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    if len(raw) > 200:  # images and large HTML: a hash is enough to tell equal from different
        return "sha1:" + hashlib.sha1(raw.encode()).hexdigest()[:12]
    return normalise(raw)


def _bundle(data: dict[str, Any]) -> dict[str, str]:
    out = {}
    for mime, value in sorted(data.items()):
        if mime.startswith("image/") and isinstance(value, str):
            value = hashlib.sha1(base64.b64decode(value)).hexdigest()[:12] if value else ""
        out[mime] = _digest(normalise(value) if isinstance(value, str) else value)
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
    parse = lambda v: v if isinstance(v, datetime) else datetime.fromisoformat(str(v))  # noqa: E731
    return (parse(end) - parse(start)).total_seconds()


def cell_view(cell: Any) -> CellView:
    view = CellView(seconds=_seconds(cell.get("metadata", {})))
    for out in cell.get("outputs", []):
        kind = out.get("output_type")
        if kind == "stream":
            text = out.get("text", "")
            if out.get("name") == "stderr":
                lines = text.splitlines(keepends=True)
                view.warnings += [ln.strip() for ln in lines if ln.startswith(WARNING_PREFIX)]
                view.stderr += "".join(ln for ln in lines if not ln.startswith(WARNING_PREFIX))
            else:
                view.stdout += text
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
    cells: list[CellView]
    wall_s: float
    crash: str | None = None


def execute(nb_path: Path, timeout: int, env: dict[str, str], inject: bool) -> Run:
    """One run in a fresh kernel and working folder (a copy of the notebook's folder, helper
    modules and data files included, notebooks left out)."""
    nb = nbformat.read(nb_path, as_version=4)
    if inject:
        nb.cells.insert(0, nbformat.v4.new_code_cell(INJECTED))
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
    cells = [cell_view(c) for c in nb.cells if c.cell_type == "code"]
    return Run(cells=cells, wall_s=wall, crash=crash)


def loaded_from(run: Run) -> tuple[str | None, str | None]:
    """(torchmagic.__file__ in the kernel, the injected cell's error if it failed)."""
    first = run.cells[0] if run.cells else CellView(error=["no output", run.crash or ""])
    match = re.search(re.escape(FILE_MARKER) + r"(\S+)", first.stdout)
    return (match.group(1) if match else None), (": ".join(first.error) if first.error else None)


def compare(plain: list[Run], checked: Run, sources: list[str]) -> dict[str, Any]:
    """Per cell: findings, and whether the checked outputs differ from the plain ones."""
    cells = []
    user_cells = checked.cells[1:]
    for i, source in enumerate(sources):
        runs = [r.cells[i] if i < len(r.cells) else CellView() for r in plain]
        mine = user_cells[i] if i < len(user_cells) else CellView()
        stable = all(r.visible() == runs[0].visible() for r in runs)
        if stable:
            differs = mine.visible() != runs[0].visible()
        else:
            differs = all(r.kinds() == runs[0].kinds() for r in runs) and mine.kinds() != runs[0].kinds()
        entry: dict[str, Any] = {
            "cell": i + 1,
            "source_head": source.strip().splitlines()[0][:80] if source.strip() else "",
            "nondeterministic": not stable,
            "differs": differs,
            "plain_s": min((r.seconds for r in runs if r.seconds is not None), default=None),
            "checked_s": mine.seconds,
            "findings": [
                {k: f.get(k) for k in ("rule", "severity", "line", "message", "object", "source", "hint")}
                for rep in mine.reports
                for f in rep.get("findings", [])
            ],
            "errors": [e for rep in mine.reports for e in rep.get("errors", [])],
            "warnings": mine.warnings,
            "check_s": sum(rep.get("check_s") or 0 for rep in mine.reports),
        }
        if differs:
            entry["plain_output"] = runs[0].visible()
            entry["checked_output"] = mine.visible()
        elif not stable:
            entry["plain_variants"] = [r.visible() for r in runs[:2]]
        cells.append(entry)
    return {"cells": cells}


def run_notebook(nb_path: Path, timeout: int, env: dict[str, str], plain_runs: int) -> dict[str, Any]:
    nb = nbformat.read(nb_path, as_version=4)
    sources = [c.source for c in nb.cells if c.cell_type == "code"]
    plain = [execute(nb_path, timeout, env, inject=False) for _ in range(plain_runs)]
    checked = execute(nb_path, timeout, env, inject=True)
    result = compare(plain, checked, sources)
    cells = result["cells"]
    rules = Counter(f"{f['rule']}/{f['source']}" for c in cells for f in c["findings"])
    loaded, setup_error = loaded_from(checked)
    result.update(
        notebook=str(nb_path),
        torchmagic_file=loaded,
        setup_error=setup_error,
        code_cells=len(sources),
        differing_cells=[c["cell"] for c in cells if c["differs"]],
        nondeterministic_cells=[c["cell"] for c in cells if c["nondeterministic"]],
        plain_crash=[r.crash for r in plain if r.crash],
        checked_crash=checked.crash,
        internal_errors=sum(len(c["errors"]) for c in cells),
        warning_lines=sum(len(c["warnings"]) for c in cells),
        findings_by_rule=dict(sorted(rules.items())),
        plain_wall_s=min(r.wall_s for r in plain),
        checked_wall_s=checked.wall_s,
        plain_cells_s=sum(c["plain_s"] or 0 for c in cells),
        checked_cells_s=sum(c["checked_s"] or 0 for c in cells),
        injected_cell_s=checked.cells[0].seconds if checked.cells else None,
    )
    return result


@dataclass
class Row:
    name: str
    cells: int
    differing: int
    nondet: int
    crashes: int
    internal: int
    findings: int
    plain_s: float
    checked_s: float


def summarise(results: list[dict[str, Any]]) -> str:
    rows = [
        Row(
            name=Path(r["notebook"]).stem[:34],
            cells=r["code_cells"],
            differing=len(r["differing_cells"]),
            nondet=len(r["nondeterministic_cells"]),
            crashes=int(r["checked_crash"] is not None and not r["plain_crash"]),
            internal=r["internal_errors"] + r["warning_lines"],
            findings=sum(r["findings_by_rule"].values()),
            plain_s=r["plain_cells_s"],
            checked_s=r["checked_cells_s"] + (r["injected_cell_s"] or 0),
        )
        for r in results
    ]
    head = f"{'notebook':34} {'cells':>5} {'diff':>4} {'nondet':>6} {'crash':>5} {'int.err':>7} {'findings':>8} {'plain s':>8} {'checked s':>9} {'overhead':>8}"
    lines = [head, "-" * len(head)]
    total = Row("TOTAL", *(sum(getattr(r, k) for r in rows) for k in list(Row.__dataclass_fields__)[1:]))
    for row in [*rows, total]:
        over = f"{(row.checked_s / row.plain_s - 1) * 100:+.0f}%" if row.plain_s else "n/a"
        lines.append(
            f"{row.name:34} {row.cells:5d} {row.differing:4d} {row.nondet:6d} {row.crashes:5d} "
            f"{row.internal:7d} {row.findings:8d} {row.plain_s:8.2f} {row.checked_s:9.2f} {over:>8}"
        )
    rules: Counter[str] = Counter()
    for r in results:
        rules.update(r["findings_by_rule"])
    lines.append("")
    lines.append(
        "findings per rule/source: " + (", ".join(f"{k}×{n}" for k, n in sorted(rules.items())) or "none")
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", type=Path, help="folder of .ipynb files (searched recursively)")
    ap.add_argument("--out", type=Path, default=Path("live_results.json"), help="JSON results")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per cell")
    ap.add_argument("--pythonpath", type=Path, default=None, help="checkout to import torchmagic from")
    ap.add_argument("--plain-runs", type=int, default=2, help="plain runs (2+ detects nondeterminism)")
    ap.add_argument("--only", default=None, help="run only notebooks whose name contains this")
    args = ap.parse_args(argv)

    env = dict(os.environ)
    expected = None
    if args.pythonpath:
        expected = args.pythonpath.resolve()
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(expected), env.get("PYTHONPATH")]))
    notebooks = sorted(p for p in args.dir.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    if args.only:
        notebooks = [p for p in notebooks if args.only in p.name]
    results: list[dict[str, Any]] = []
    for nb_path in notebooks:
        print(f"running {nb_path} ...", file=sys.stderr, flush=True)
        result = run_notebook(nb_path, args.timeout, env, max(1, args.plain_runs))
        loaded = result["torchmagic_file"]
        if result["setup_error"] or loaded is None:
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
