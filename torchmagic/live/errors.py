"""CellError: the live part of TM405, read from the exception the cell raised.

`.numpy()` on a tensor that requires grad raises at once, so nothing is left in the
namespace for a scan to see; the one live signal is the error itself. When the cell ends
with exactly that RuntimeError, the finding points at the cell line that raised it and gives
the fix (the static rule catches the cases it can prove beforehand; the report's dedup
keeps one finding per line).

IPython stores the exception it showed in `sys.last_value` before `post_run_cell`; the
collector remembers which exception was there when the cell started, so an older one (from
an unchecked cell) is never taken for this cell's. Static findings are added after the
collectors stop; `LiveScan` then drops this finding if the static rule flagged the same line.
"""

from __future__ import annotations

import sys
from typing import Any

NUMPY_REQUIRES_GRAD = "Can't call numpy() on Tensor that requires grad"


def _last_exception() -> Any:
    return getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)


class CellError:
    name = "cell_error"

    def __init__(self, config: Any = None) -> None:
        self.config = config
        self._before: Any = None

    def start(self, run: Any) -> None:
        # Exceptions take no weak references, and a strong one would keep the old traceback's
        # frames (user objects) alive: the id is enough, since `sys` holds the old exception
        # for as long as nothing replaces it (a reused id can only hide a finding).
        exc = _last_exception()
        self._before = id(exc) if exc is not None else None

    def stop(self, run: Any) -> None:
        before, self._before = self._before, None
        exc = _last_exception()
        if exc is None or id(exc) == before:
            return
        # Only the exact builtin type: str() of a user-defined exception could run user code.
        if type(exc) is not RuntimeError or NUMPY_REQUIRES_GRAD not in str(exc):
            return
        from .rules import finding

        line = _cell_line(exc.__traceback__, getattr(run.shell, "user_ns", None))
        # A static TM405 on the same line (added after the collectors stop) wins: LiveScan
        # drops this one then.
        run.report.findings.append(
            finding(
                "TM405",
                "`.numpy()` was called on a tensor that requires grad, and the cell failed with "
                f'"{NUMPY_REQUIRES_GRAD}".',
                "Detach first: `t.detach().cpu().numpy()` (or compute it under `torch.no_grad()`).",
                line=line,
                source="live",
            )
        )


def _cell_line(tb: Any, user_ns: Any) -> int | None:
    """The last traceback entry in the cell's own code (its `<module>` frame's file)."""
    cell_file = None
    line = None
    while tb is not None:
        code = tb.tb_frame.f_code
        if cell_file is None and tb.tb_frame.f_globals is user_ns and code.co_name == "<module>":
            cell_file = code.co_filename
        if cell_file is not None and code.co_filename == cell_file:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line
