"""torchmagic: PyTorch anti-patterns, live tensors and GPU stalls for notebook cells.

Load it in IPython/Jupyter with `%load_ext torchmagic`. The linting API (`check_source`)
works without IPython and without importing torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .lint import check_source
from .report import Finding, Report

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

__all__ = [
    "Finding",
    "Report",
    "check_source",
    "last_report",
    "load_ipython_extension",
    "unload_ipython_extension",
]
__version__ = "0.1.0"


def last_report() -> Report | None:
    """The Report of the most recently checked cell in this process, or None."""
    from . import extension

    return extension.last_report()


def load_ipython_extension(ip: InteractiveShell) -> None:
    from . import extension

    extension.load(ip)


def unload_ipython_extension(ip: InteractiveShell) -> None:
    from . import extension

    extension.unload(ip)


def _jupyter_labextension_paths() -> list[dict[str, Any]]:
    return [{"src": "labextension", "dest": "torchmagic"}]
