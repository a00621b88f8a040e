"""CellCheck: the check of one cell, from just before its code runs to its `Report`.

`begin` starts the runtime collectors (hooks) for the cell; `end` stops them before doing
anything else, then builds the report in one pass:

    collectors' records  (sync, shape trace, memory, mode events, the cell's error)
    static findings      (the cell's source, names resolved in the live namespace)
    live findings        (the namespace scan, walked once and shared)
    runtime findings     (rules over the collectors' records)
    -> suppression comments and select/ignore -> one merge -> Report

No IPython here: a namespace dict, the cell's source and (optionally) the compiler's
map of cell files are all it needs, so it is tested with `exec`.
"""

from __future__ import annotations

import functools
import time
import warnings
from collections.abc import Sequence
from typing import Any

from . import catalog
from .lint.engine import lint
from .lint.source import prepare
from .live.scan import LiveScan
from .merge import merge_findings
from .report import Finding, Report
from .run import CellRun, CheckOptions, RunRecords
from .runtime import Collector, make_collectors
from .runtime.frames import KnownFiles
from .runtime.registry import runtime_rules


class CellCheck:
    """Checks one cell at a time. Lives as long as the loaded extension (the live scan keeps
    its between-cells memory here: weak references and metadata records only)."""

    def __init__(self, collectors: Sequence[Collector] | None = None) -> None:
        self.collectors: list[Collector] = list(collectors) if collectors is not None else make_collectors()
        self.live = LiveScan()
        self.run: CellRun | None = None

    def begin(
        self,
        namespace: dict[str, Any],
        raw_cell: str,
        *,
        options: CheckOptions | None = None,
        cell_id: str | None = None,
        execution_count: int | None = None,
        hidden: dict[str, Any] | None = None,
        known_files: KnownFiles | None = None,
        problems: Sequence[str] = (),
    ) -> CellRun:
        """Start checking a cell whose code is about to run in `namespace`."""
        self.abort()
        run = CellRun(
            namespace,
            raw_cell,
            options or CheckOptions(),
            cell_id=cell_id,
            execution_count=execution_count,
            hidden=hidden,
            known_files=known_files,
        )
        run.report.errors.extend(problems)
        self.run = run
        for c in self.collectors:
            try:
                c.start(run)
            except Exception as e:
                run.report.errors.append(f"{c.name} could not start: {type(e).__name__}: {e}")
        run.started = time.perf_counter()
        return run

    def end(self, execution_count: int | None = None) -> Report | None:
        """Stop the collectors, whatever happens after (no hook outlives its cell), then build
        the report. None when no cell was being checked."""
        run, self.run = self.run, None
        if run is None:
            return None
        run.report.elapsed_s = time.perf_counter() - run.started
        self._stop(run)
        try:
            return self._finish(run, execution_count)
        finally:
            run.release()
            run.records = RunRecords()

    def abort(self) -> None:
        """Stop checking the running cell without a report (unload in the middle of a cell)."""
        run, self.run = self.run, None
        if run is not None:
            self._stop(run)
            run.release()

    def _stop(self, run: CellRun) -> None:
        for c in reversed(self.collectors):
            try:
                c.stop(run)
            except Exception as e:
                run.report.errors.append(f"{c.name} failed: {type(e).__name__}: {e}")

    def _finish(self, run: CellRun, execution_count: int | None) -> Report:
        report = run.report
        t0 = time.perf_counter()
        opts = run.options
        report.cell_id = run.cell_id
        report.code = run.raw_cell
        report.execution_count = execution_count if execution_count is not None else run.execution_count
        for c in self.collectors:
            try:
                c.collect(run)
            except Exception as e:
                report.errors.append(f"{c.name} failed: {type(e).__name__}: {e}")
        static: list[Finding] = []
        try:
            result = lint(
                run.raw_cell,
                run.namespace,
                select=opts.select,
                ignore=opts.ignore,
                post_run=True,
                accelerator_hint=kernel_uses_accelerator(run),
            )
            # a cell that does not parse failed in IPython already, with the real traceback
            # a process with no accelerator at all never waits for one, whatever the code says
            gpu = None if accelerator_available() else False
            static = [f for f in result.resolved(gpu) if f.rule != "TM000"]
            report.errors.extend(result.errors)
        except Exception as e:
            report.errors.append(f"lint failed: {type(e).__name__}: {e}")
        live: list[Finding] = []
        try:
            live = self.live.analyze(run, static)
        except Exception as e:
            report.errors.append(f"live scan failed: {type(e).__name__}: {e}")
        runtime: list[Finding] = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for rule in runtime_rules(opts.select, opts.ignore):
                try:
                    runtime.extend(rule.run(run))
                except Exception as e:
                    report.errors.append(f"runtime rule {rule.rule.id} failed: {type(e).__name__}: {e}")
        report.findings = merge_findings(_shown([*static, *live, *runtime], run.raw_cell, opts))
        report.check_s = time.perf_counter() - t0
        report.finished = time.time()
        return report


def kernel_uses_accelerator(run: CellRun) -> bool:
    """Something in this kernel lives on an accelerator: CUDA is in use, or a tensor or model
    in the namespace sits on a non-CPU device (read from the cell's one namespace walk)."""
    import torch

    try:
        if torch.cuda.is_initialized():
            return True
        if not _other_accelerators(torch):
            return False  # nothing but CUDA could hold a tensor off the CPU, and it is unused
    except Exception:
        pass
    return run.snapshot().uses_accelerator()


@functools.cache  # devices do not come and go in a process
def accelerator_available() -> bool:
    """This process can use an accelerator (CUDA, MPS, XPU). `is_available()` asks the driver
    for a device count; it creates no context and syncs nothing."""
    try:
        import torch

        return bool(torch.cuda.is_available()) or _other_accelerators(torch)
    except Exception:
        return True  # unknown: keep the findings


def _other_accelerators(torch: Any) -> bool:
    """An accelerator backend other than CUDA that this process could have put tensors on."""
    mps = getattr(getattr(torch, "backends", None), "mps", None)
    xpu = getattr(torch, "xpu", None)
    return bool((mps is not None and mps.is_available()) or (xpu is not None and xpu.is_available()))


def _shown(findings: list[Finding], raw_cell: str, opts: CheckOptions) -> list[Finding]:
    """Suppression comments and select/ignore, for findings of every source."""
    sup = prepare(raw_cell).suppressions
    return [
        f
        for f in findings
        if not sup.silenced(f.rule, f.line) and catalog.selected(f.rule, opts.select, opts.ignore)
    ]
