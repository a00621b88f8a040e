"""TM8xx — data loading."""

from .model import Rule

RULES = [
    Rule(
        "TM801",
        "dataloader-pin-memory",
        "info",
        evidence=("static",),
        what="""
            Flags a `DataLoader(...)` without `pin_memory=True` whose batches are moved to CUDA in
            the loop that iterates over it. Reported at the `DataLoader(...)` call; for a loader built
            in an earlier cell (live: its `pin_memory` is False), at the `for` line.
            """,
        why="""
            Copies from pageable memory are synchronous and slower; pinned batches can be copied
            with `non_blocking=True` while the GPU is still busy with the previous step.
            """,
        example="""
            loader = DataLoader(ds, batch_size=64)
            for x, y in loader:
                x, y = x.cuda(), y.cuda()
            """,
        fix="""
            loader = DataLoader(ds, batch_size=64, pin_memory=True)
            for x, y in loader:
                x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            """,
        not_flagged="loaders whose batches stay on the CPU",
    ),
]
