"""What the collectors that install global module hooks share."""

from __future__ import annotations

import re
import sys
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
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


# ---- torch.compile: the cell's hooks must not become part of what Dynamo compiles -----------------
#
# Dynamo traces what a compiled call runs, global module and optimizer hooks included, and
# guards on them: a function compiled while our hooks are installed is specialised on their
# presence (`len(_global_forward_pre_hooks) == 1`) and compiled again in the next, unchecked
# cell. And a hook called from eager code inside a compiled region (a compiled module's
# `_call_impl`, code after a graph break) is a new frame that Dynamo would compile itself.
# So, when Dynamo is loaded: the hooks step aside while it compiles (removed at the start of
# each compilation, put back at its end: compiled code then runs exactly as without us), and
# their code objects are marked for Dynamo to run as plain Python, callees included.


def dynamo_loaded() -> bool:
    """Something in this process imported Dynamo, so `torch.compile` may run (it costs over a
    second to import: never do it just to ask)."""
    return "torch._dynamo" in sys.modules


# A cell that may compile though nothing was compiled before (its first `torch.compile`).
# `re.compile(pattern)` always has a positional pattern; `model.compile()` has none.
MENTIONS_COMPILE = re.compile(r"torch\s*\.\s*(?:compile|_dynamo|compiler)\b|\.compile\(\s*(?:\)|\w+\s*=)")


def compile_in_play(raw_cell: str) -> bool:
    """The cell may compile or run compiled code: it says `torch.compile` (or `.compile()`),
    or Dynamo has compiled something in this process since its last reset."""
    if MENTIONS_COMPILE.search(raw_cell):
        return True
    utils = sys.modules.get("torch._dynamo.utils")
    if utils is None:
        return False
    try:
        return bool(utils.counters["frames"]["total"]) or bool(utils._compilation_metrics)
    except Exception:
        return True


_kept_out: set[Any] = set()


def keep_out_of_dynamo(*functions: Any) -> None:
    """Have Dynamo run these functions (and what they call) as plain Python, never compile them.
    Marks the code objects once; does nothing while Dynamo is not loaded."""
    if not dynamo_loaded():
        return
    codes = [getattr(getattr(f, "__func__", f), "__code__", None) for f in functions]
    todo = [c for c in codes if c is not None and c not in _kept_out]
    if not todo:
        return
    try:
        from torch._dynamo.eval_frame import set_code_exec_strategy
        from torch._dynamo.types import FrameAction, FrameExecStrategy

        for code in todo:
            set_code_exec_strategy(code, FrameExecStrategy(FrameAction.SKIP, FrameAction.SKIP))
            _kept_out.add(code)
    except Exception:
        pass


def aside_while_compiling(pause: Callable[[], None], resume: Callable[[], None]) -> Callable[[], None] | None:
    """Call `pause` when Dynamo starts compiling and `resume` when it has finished, until the
    returned function is called. None when Dynamo is not loaded."""
    dynamo = sys.modules.get("torch._dynamo")
    handler = getattr(dynamo, "callback_handler", None)
    if handler is None:
        return None

    def on_start(args: Any) -> None:
        try:
            pause()
        except Exception:
            pass

    def on_end(args: Any) -> None:
        try:
            resume()
        except Exception:
            pass

    handler.register_start_callback(on_start)
    handler.register_end_callback(on_end)

    def remove() -> None:
        for remover, fn in ((handler.remove_start_callback, on_start), (handler.remove_end_callback, on_end)):
            try:
                remover(fn)
            except ValueError:
                pass

    return remove
