"""One checked cell as it runs: its options and what collectors, analyzers and rules read.

Plain data with no IPython in it: the pipeline builds a `CellRun` from a namespace and the
cell's source, so everything downstream is testable with a dict and `exec`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from .report import Report
from .runtime.frames import CellLocator, KnownFiles

DISPLAYS = ("auto", "widget", "html", "text", "none")


@dataclass(frozen=True)
class CheckOptions:
    """What one checked cell collects and reports (config, overridden by the magic's line)."""

    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    display: str = "auto"
    scan: bool = True
    trace_shapes: bool = True
    sync_devices: tuple[str, ...] = ("cuda",)
    sync_threshold_s: float = 0.005
    sync_fraction: float = 0.1
    cudnn_shape_limit: int = 8
    max_rows: int = 30


@dataclass
class RunRecords:
    """Runtime records that are not part of the Report: read by the runtime rules."""

    modes: Any = None  # runtime.modes.ModeRecords
    error: Any = None  # runtime.errors.ErrorRecord
    inflight: Any = None  # runtime.shapes.InFlightRecord: forwards running when an error was raised
    compile: Any = None  # runtime.compile.CompileRecords: graph breaks and recompilations


@dataclass
class CellRun:
    namespace: dict[str, Any]
    raw_cell: str
    options: CheckOptions = field(default_factory=CheckOptions)
    cell_id: str | None = None
    execution_count: int | None = None
    hidden: dict[str, Any] | None = None  # names the shell put there, not the user
    known_files: KnownFiles | None = None  # compiled cell file name -> execution count
    report: Report = field(default_factory=Report)
    records: RunRecords = field(default_factory=RunRecords)
    started: float = field(default_factory=time.perf_counter)
    locator: CellLocator = field(init=False)
    _snapshot: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.locator = CellLocator(self.namespace, self.known_files)

    @property
    def lines(self) -> list[str]:
        return self.raw_cell.splitlines()

    def snapshot(self) -> Any:
        """The namespace walked once for this cell (`live.namespace.NamespaceSnapshot`),
        shared by the scan, the live rules and every runtime record that names modules."""
        if self._snapshot is None:
            from .live.namespace import NamespaceSnapshot

            self._snapshot = NamespaceSnapshot(self.namespace, self.hidden)
        return self._snapshot

    def release(self) -> None:
        """Drop the snapshot's strong references to user objects."""
        snap, self._snapshot = self._snapshot, None
        if snap is not None:
            snap.release()
