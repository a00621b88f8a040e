"""Hooks active while a checked cell runs, and the records they leave; runtime rules read them.

A collector is started just before the cell's code runs and stopped right after it, even
when the cell raises or is interrupted. `stop` only removes what `start` installed (it runs
first, before anything else after the cell); `collect` then turns what was seen into records
on `run.report` (syncs, shape trace, memory, compile) or `run.records` (mode events, the
cell's error, graph breaks and recompilations). Collectors live as long as the loaded extension and keep only weak references
between cells. Runtime rules (`runtime/rules`) turn the records into findings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..run import CellRun


class Collector(Protocol):
    name: str

    def start(self, run: CellRun) -> None: ...

    def stop(self, run: CellRun) -> None: ...

    def collect(self, run: CellRun) -> None: ...


def make_collectors() -> list[Collector]:
    """One of each, in start order (stopped in reverse)."""
    from .compile import CompileWatch
    from .errors import CellError
    from .memory import CudaMemoryProbe
    from .modes import ModeRecorder
    from .shapes import ShapeTracer
    from .sync import SyncProbe

    modes = ModeRecorder()
    # one pair of global module hooks for the cell: the tracer's, which feeds the mode recorder
    return [CompileWatch(), SyncProbe(), modes, ShapeTracer(modes), CudaMemoryProbe(), CellError()]
