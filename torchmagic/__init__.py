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
    "dry_run",
    "last_report",
    "load_ipython_extension",
    "unload_ipython_extension",
]
__version__ = "0.1.0"


def last_report() -> Report | None:
    """The Report of the most recently checked cell in this process, or None."""
    from . import extension

    return extension.last_report()


def dry_run(model: Any, *example_inputs: Any, **kwargs: Any) -> Any:
    """Per-layer shapes of `model(*example_inputs, **kwargs)` run on the meta device: a meta copy
    of the module structure runs, the user's parameters are never touched, moved or copied.
    Returns a `DryRun` (`.records`, `.outputs`, `.failure`); displays as a table in a notebook."""
    import sys

    from .explain.dryrun import _caller_name, dry_run_as
    from .views.dryrun import DryRunView

    return DryRunView(dry_run_as(_caller_name(model, sys._getframe(1)), model, *example_inputs, **kwargs))


def load_ipython_extension(ip: InteractiveShell) -> None:
    from . import extension

    extension.load(ip)


def unload_ipython_extension(ip: InteractiveShell) -> None:
    from . import extension

    extension.unload(ip)


def _jupyter_labextension_paths() -> list[dict[str, Any]]:
    return [{"src": "labextension", "dest": "torchmagic"}]
