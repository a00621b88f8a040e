"""Hooks active while a checked cell runs, and what they record.

A collector is started just before the cell's code runs and stopped right after it, even
when the cell raises or is interrupted. `stop` must remove every hook it installed and then
add its records and findings to `run.report`. Collectors are created once per loaded
extension and may keep state between cells (weak references only).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..report import Report


@dataclass
class CellRun:
    """One checked cell as it runs: what collectors and post-cell analyzers may read."""

    shell: Any  # IPython InteractiveShell
    config: Any  # extension.TorchCheck (traitlets): sync_devices, sync_threshold_s, ...
    raw_cell: str
    cell_id: str | None = None
    execution_count: int | None = None
    started: float = field(default_factory=time.perf_counter)
    report: Report = field(default_factory=Report)

    @property
    def lines(self) -> list[str]:
        return self.raw_cell.splitlines()


class Collector(Protocol):
    """Runtime evidence gathered while the cell runs (sync probe, shape tracer, mode checks)."""

    name: str

    def start(self, run: CellRun) -> None: ...

    def stop(self, run: CellRun) -> None: ...


class Analyzer(Protocol):
    """Evidence gathered after the cell ran (the live namespace scan and live rules)."""

    name: str

    def analyze(self, run: CellRun) -> None: ...


def make_collectors(config: Any) -> list[Collector]:
    """The collectors of one loaded extension, in start order (stopped in reverse)."""
    from ..live.errors import CellError
    from ..live.memory import CudaMemoryProbe
    from .modes import ModeChecks
    from .shapes import ShapeTracer
    from .sync import SyncProbe

    collectors: list[Collector] = [
        SyncProbe(config),
        ShapeTracer(config),
        ModeChecks(config),
        CudaMemoryProbe(config),
        CellError(config),
    ]
    return collectors


def make_analyzers(config: Any) -> list[Analyzer]:
    from ..live.scan import LiveScan

    analyzers: list[Analyzer] = [LiveScan(config)]
    return analyzers
