"""What the collectors that install global module hooks share."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

# torch.compile warns when global module hooks exist; those are ours, for this cell only.
_COMPILE_WARNING = r"Using `torch.compile\(module\)` when there are global hooks"


def quiet_compile_warning() -> Any:
    """Silence that one warning while our hooks are installed; returns the filter to remove."""
    warnings.filterwarnings("ignore", message=_COMPILE_WARNING, category=UserWarning)
    return warnings.filters[0]


def restore_warnings(entry: Any) -> None:
    try:
        warnings.filters.remove(entry)
        mutated = getattr(warnings, "_filters_mutated", None)
        if mutated is not None:
            mutated()
    except (ValueError, AttributeError):
        pass


def remove_handles(handles: Iterable[Any]) -> None:
    for h in handles:
        try:
            h.remove()
        except Exception:
            pass


class _Paused(threading.local):
    depth = 0


_paused = _Paused()


def hooks_paused() -> bool:
    """True while torchmagic itself runs modules (a dry run on meta copies): the cell's hooks
    must not record them."""
    return _paused.depth > 0


@contextmanager
def pause_hooks() -> Iterator[None]:
    _paused.depth += 1
    try:
        yield
    finally:
        _paused.depth -= 1
