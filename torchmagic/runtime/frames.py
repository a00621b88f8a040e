"""Which cell line is running: the one home for mapping frames and tracebacks to cell lines.

IPython compiles each cell under a file name of its own (`<ipython-input-N-…>`, or
ipykernel's `/tmp/ipykernel_PID/HASH.py`) and runs it as a `<module>` code object whose
globals are the user namespace; functions the cell defines share that file. The checked
cell's file is therefore the one of the *innermost* `<module>` frame whose globals are the
namespace (innermost, so that a body run by `get_ipython().run_cell_magic(...)` wins over
the one-line cell that called it). When the shell's compiler map is given, only files it
compiled count, so code the cell `exec`s from a string is not taken for the cell.

Cells run natively (the `%%torchcheck` line is commented out, not removed), so a frame's
line number in the cell's file is the editor's line.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from types import FrameType, TracebackType
from typing import Any

KnownFiles = Callable[[], Mapping[str, int]]


class CellLocator:
    """Maps frames of the running cell (and of functions from earlier cells) to cell lines."""

    def __init__(self, namespace: Any, known_files: KnownFiles | None = None) -> None:
        self.namespace = namespace
        self._known_files = known_files
        self.cell_file: str | None = None

    # ---- the cell's own file -------------------------------------------------------------
    def _known(self) -> Mapping[str, int] | None:
        if self._known_files is None:
            return None
        try:
            known = self._known_files()
        except Exception:
            return None
        return known if isinstance(known, Mapping) and known else None

    def _is_cell_module(self, frame: FrameType, known: Mapping[str, int] | None) -> bool:
        code = frame.f_code
        return (
            code.co_name == "<module>"
            and frame.f_globals is self.namespace
            and (known is None or code.co_filename in known)
        )

    def _resolve(self, frame: FrameType | None) -> str | None:
        known = self._known()
        f = frame
        while f is not None:
            if self._is_cell_module(f, known):
                return f.f_code.co_filename
            f = f.f_back
        return None

    # ---- lines -----------------------------------------------------------------------------
    def line(self, frame: FrameType | None = None) -> int | None:
        """The cell line the innermost cell frame at `frame` (default: the caller) is on."""
        if frame is None:
            try:
                frame = sys._getframe(1)
            except ValueError:
                return None
        cell_file = self.cell_file
        if cell_file is None:
            cell_file = self.cell_file = self._resolve(frame)
            if cell_file is None:
                return None
        f: FrameType | None = frame
        while f is not None:
            if f.f_code.co_filename == cell_file:
                return f.f_lineno
            f = f.f_back
        return None

    def traceback_lines(self, tb: TracebackType | None) -> tuple[int | None, int | None]:
        """`(top, last)`: the line the cell's top-level code stopped at (its `<module>` frame's
        entry), and the line of the last traceback entry in the cell's own file (inside a
        function the cell defines, when the error came from there)."""
        known = self._known()
        cell_file = None
        top = line = None
        while tb is not None:
            frame = tb.tb_frame
            if cell_file is None and self._is_cell_module(frame, known):
                cell_file = frame.f_code.co_filename
                top = tb.tb_lineno
            if cell_file is not None and frame.f_code.co_filename == cell_file:
                line = tb.tb_lineno
            tb = tb.tb_next
        if cell_file is not None and self.cell_file is None:
            self.cell_file = cell_file
        return top, line

    def cell_number(self, filename: str) -> int | None:
        """The execution count of the cell that compiled `filename` (None outside cells)."""
        known = self._known()
        if not known:
            return None
        n = known.get(filename)
        return n if isinstance(n, int) else None
