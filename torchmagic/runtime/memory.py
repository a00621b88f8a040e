"""CudaMemoryProbe: the CUDA allocator's counters before and after the cell.

Only when CUDA is already initialised (never initialise it for the user), and only the
caching allocator's host-side counters: no synchronisation, no device query that waits.
The peak is reported only when the cell set a new high-water mark; the allocator's peak is
not reset, because the user may be tracking it themselves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from ..report import MemoryRecord

if TYPE_CHECKING:
    from ..run import CellRun


class CudaMemoryProbe:
    name = "cuda_memory"

    def __init__(self) -> None:
        self._before: tuple[int, int, int] | None = None  # device, allocated, max allocated

    def start(self, run: CellRun) -> None:
        self._before = None
        try:
            if torch.cuda.is_initialized():
                dev = torch.cuda.current_device()
                self._before = (dev, torch.cuda.memory_allocated(dev), torch.cuda.max_memory_allocated(dev))
        except Exception:
            self._before = None

    def stop(self, run: CellRun) -> None:
        pass

    def collect(self, run: CellRun) -> None:
        before, self._before = self._before, None
        try:
            if not torch.cuda.is_initialized():
                return
            dev = before[0] if before else torch.cuda.current_device()
            after = torch.cuda.memory_allocated(dev)
            peak_now = torch.cuda.max_memory_allocated(dev)
        except Exception:
            return
        peak = peak_now if before is None or peak_now > before[2] else None
        run.report.memory = MemoryRecord(
            device=f"cuda:{dev}",
            allocated_before=before[1] if before else None,
            allocated_after=after,
            peak=peak,
        )
