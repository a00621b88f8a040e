"""What the bench scripts share: a cell timed as the user waits for it."""

from __future__ import annotations

import time

from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output


def timed_cell(shell: InteractiveShell, code: str) -> float:
    """Seconds `shell` takes to run `code` as a cell, its output captured (a checked cell: its
    whole check and report included). The cell's own error is raised: a bench cell that
    fails must not pass for a timing."""
    with capture_output():
        t0 = time.perf_counter()
        result = shell.run_cell(code, store_history=True)
        elapsed = time.perf_counter() - t0
    result.raise_error()
    return elapsed
