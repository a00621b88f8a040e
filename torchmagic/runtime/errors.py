"""CellError: the exception the checked cell ended with, for the rules that explain it.

IPython stores the exception it showed in `sys.last_exc`/`sys.last_value` before
`post_run_cell`; the collector remembers which exception was there when the cell started, so
an older one (from an unchecked cell) is never taken for this cell's. Exceptions take no weak
references, and a strong one would keep the old traceback's frames (user objects) alive: the
id is enough, since `sys` holds the old exception for as long as nothing replaces it (a
reused id can only hide a finding). The record holds this cell's exception only until the
report is built.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..run import CellRun

# Exception types whose str() is PyTorch's own message; str() of a user-defined exception
# could run user code.
BUILTIN_ERRORS = (RuntimeError, ValueError, TypeError, IndexError, NotImplementedError, AssertionError)


@dataclass
class ErrorRecord:
    exc: BaseException  # transient: dropped with the run
    line: int | None  # the last traceback entry in the cell's own code
    message: str | None  # str(exc) for the exact builtin types above, else None
    top_line: int | None = None  # the line the cell's top-level code stopped at

    @property
    def type_name(self) -> str:
        return type(self.exc).__name__


def _last_exception() -> Any:
    return getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)


class CellError:
    name = "cell_error"

    def __init__(self) -> None:
        self._before: int | None = None

    def start(self, run: CellRun) -> None:
        exc = _last_exception()
        self._before = id(exc) if exc is not None else None

    def stop(self, run: CellRun) -> None:
        pass

    def collect(self, run: CellRun) -> None:
        before, self._before = self._before, None
        exc = _last_exception()
        if exc is None or id(exc) == before or not isinstance(exc, BaseException):
            return
        message = None
        if type(exc) in BUILTIN_ERRORS:
            try:
                message = str(exc)
            except Exception:
                message = None
        top, line = run.locator.traceback_lines(exc.__traceback__)
        run.records.error = ErrorRecord(exc, line, message, top)
