"""CompileWatch: what `torch.compile` did while the checked cell ran, at the user's lines.

Three of Dynamo's own channels, each used for what only it says, all for this cell only:

- **compilation metrics** (`torch._dynamo.utils._compilation_metrics`, one entry per frame
  Dynamo compiled, recorded whether or not anyone logs): which function, how long it took,
  how many graph ops, why it was compiled again (`recompile_reason`, the failed guard) and
  whether the recompile limit stopped it. Read once after the cell: the entries after the
  last one that was there when the cell started.
- the **compile-start callback** (`torch._dynamo.callback_handler`): runs inside the user's
  call that triggered a compilation, so the cell line making that call, and the module being
  called, are on the Python stack right then.
- the **`graph_breaks` log artifact** (what `TORCH_LOGS=graph_breaks` prints): the only place
  Dynamo says where a graph break happened (file, line, traced user stack) and why. Its
  loggers are set to DEBUG, with their output kept from the terminal, for the cell only. And
  one handler on `torch._dynamo.convert_frame` catches the recompile-limit warning (the user
  still sees it, as before).

Everything is put back after the cell: levels, `propagate`, handlers, the callback list and
Dynamo's duplicate-break memory (it decides whether a later `TORCH_LOGS=graph_breaks`
prints a break in full). A user who set `TORCH_LOGS`/`torch._logging.set_logs` keeps their
output; their loggers are left exactly as they were, with ours added beside and removed.
Nothing here changes what gets compiled: no config, guard or cache is touched, and the hooks
run only while Dynamo compiles, never when compiled code runs.

Cost: nothing is imported for a cell that cannot compile (`torch._dynamo` not imported yet and
no `compile` in the cell's text: importing Dynamo takes over a second); otherwise about 0.1 ms
to install and remove (mostly `Logger.setLevel` clearing the logging caches), nothing per op
or per call of compiled code, and about as much per compilation as `TORCH_LOGS` costs
(bench/compile_cost.py).
"""

from __future__ import annotations

import collections
import logging
import os
import re
import sys
import sysconfig
import threading
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..report import CompileRecord
from .dynamo_messages import (
    GraphBreak,
    GuardFailure,
    describe_guard_failure,
    parse_graph_break,
    parse_limit_warning,
    resumed_function,
)
from .hooks import MENTIONS_COMPILE

if TYPE_CHECKING:
    from ..run import CellRun
    from .frames import CellLocator

_RESUME_PREFIX = "torch_dynamo_resume_in_"
_MODULE_FILE = os.path.join("nn", "modules", "module.py")
_WRAPPERS = os.path.join("torch", "_dynamo", "external_utils.py")
MAX_EVENTS = 1000


def _norm_id(compile_id: Any) -> str:
    """`3/1` for `3/1`, `3/1_2` (a restart of that compilation) and CompileId objects."""
    text = str(compile_id or "")
    return text.split("_", 1)[0]


def _frame_id(compile_id: str) -> str:
    return compile_id.split("/", 1)[0]


@dataclass
class CallSite:
    """Where the cell was when Dynamo started (or gave up) compiling something."""

    line: int | None  # the innermost line of the checked cell's file on the stack
    top: int | None = None  # the cell's own statement (its top-level code) making the call
    module: Any = None  # weak reference to the nn.Module being called, if any
    wrapper: Any = None  # weak reference to the OptimizedModule around it, if any
    module_type: str | None = None


@dataclass
class BreakEvent:
    compile_id: str
    message: str
    site: CallSite


@dataclass
class LimitEvent:
    kind: str  # recompile_limit | accumulated_recompile_limit | ...
    limit: int
    name: str
    file: str
    line: int
    site: CallSite


@dataclass
class RecordedBreak:
    """A graph break, read: where, why, and the cell line that was running."""

    graph_break: GraphBreak
    call_line: int | None


@dataclass
class Recompile:
    failure: GuardFailure
    call_line: int | None
    seconds: float


@dataclass
class CompiledFunction:
    """One user function (its resume functions included) that Dynamo compiled in this cell."""

    file: str
    code_name: str  # `step`, `forward`, `inner` (the wrapper torch.compile puts around torch.nn modules)
    def_line: int | None = None
    label: str = ""
    location: str = ""
    call_line: int | None = None
    graphs: int = 0
    compile_s: float = 0.0
    recompiles: list[Recompile] = field(default_factory=list)
    recompile_count: int = 0
    limit_hit: bool = False
    limit: int | None = None
    breaks: list[RecordedBreak] = field(default_factory=list)
    modules: list[Any] = field(default_factory=list)  # CallSites with a module


@dataclass
class CompileRecords:
    """What the compile rules read (`run.records.compile`)."""

    functions: list[CompiledFunction] = field(default_factory=list)
    cell_file: str | None = None
    lost: bool = False  # more compilations than Dynamo's metrics keep: some are not counted


class CompileWatch:
    """Collector of graph breaks, recompilations and compile time (see module docstring)."""

    name = "compile"

    def __init__(self) -> None:
        self._capture: _Capture | None = None
        self._dormant = False
        self._events: _Events | None = None

    def start(self, run: CellRun) -> None:
        self.stop(run)
        self._capture, self._events, self._dormant = None, None, False
        if "torch._dynamo" not in sys.modules:
            if not MENTIONS_COMPILE.search(run.raw_cell):
                # nothing can have been compiled yet; a helper from an earlier cell that
                # compiles still leaves metrics behind (read in collect)
                self._dormant = True
                return
            import torch._dynamo  # noqa: F401  (the cell is about to: its first torch.compile)
        self._events = _Events(run.locator)
        capture = _Capture(self._events)
        try:
            capture.install()
        except Exception:
            capture.uninstall()
            raise
        self._capture = capture

    def stop(self, run: CellRun | None = None) -> None:
        capture, self._capture = self._capture, None
        if capture is not None:
            capture.uninstall()

    def collect(self, run: CellRun) -> None:
        events, self._events = self._events, None
        dormant, self._dormant = self._dormant, False
        if events is None and not (dormant and "torch._dynamo" in sys.modules):
            return
        if events is None:
            events = _Events(run.locator)  # Dynamo was imported by the cell: every entry is this cell's
        entries, lost = events.new_metrics()
        if not entries and not events.breaks and not events.limits:
            return
        records = _build(run, events, entries, lost, breaks_from_resumes=dormant)
        run.records.compile = records
        run.report.compile = [_record(f) for f in records.functions]
        if lost:
            run.report.errors.append(
                "compile: more compilations than Dynamo keeps metrics for; the counts are incomplete"
            )


# ---- capture while the cell runs -----------------------------------------------------------


class _Events:
    """What the hooks saw while the cell ran (written from inside Dynamo, read after the cell)."""

    def __init__(self, locator: CellLocator) -> None:
        self.locator = locator
        self.thread = threading.get_ident()
        self.sites: dict[str, CallSite] = {}
        self.breaks: list[BreakEvent] = []
        self.limits: list[LimitEvent] = []
        utils = sys.modules.get("torch._dynamo.utils")
        metrics = getattr(utils, "_compilation_metrics", None)
        self.bookmark = metrics[-1] if metrics else None

    def new_metrics(self) -> tuple[list[Any], bool]:
        """The metrics entries recorded since the cell started; True when some may be lost."""
        utils = sys.modules.get("torch._dynamo.utils")
        metrics = getattr(utils, "_compilation_metrics", None)
        if not metrics:
            return [], False
        entries = list(metrics)
        if self.bookmark is not None:
            for i in range(len(entries) - 1, -1, -1):
                if entries[i] is self.bookmark:
                    return entries[i + 1 :], False
        maxlen = getattr(metrics, "maxlen", None)
        return entries, self.bookmark is not None and maxlen is not None and len(entries) >= maxlen

    def site(self) -> CallSite:
        """The cell line and the module being called, from the live stack (compile time only)."""
        frame = sys._getframe(2)
        try:
            line = self.locator.line(frame) if threading.get_ident() == self.thread else None
        except Exception:
            line = None
        module = wrapper = None
        f = frame
        depth = 0
        cell_file = self.locator.cell_file
        top = None
        while f is not None and depth < 400:
            code = f.f_code
            if cell_file is not None and code.co_filename == cell_file:
                if code.co_name == "<module>":
                    top = f.f_lineno
                    break
            elif wrapper is None and code.co_name == "_call_impl" and code.co_filename.endswith(_MODULE_FILE):
                obj = f.f_locals.get("self")
                if obj is not None and type(obj).__name__ == "OptimizedModule":
                    wrapper = obj
                elif obj is not None and module is None:
                    module = obj
            f = f.f_back
            depth += 1
        if module is None and wrapper is not None:
            # `torch.compile(nn.Sequential(...))`: Dynamo compiles a wrapper around the module
            module = wrapper.__dict__.get("_modules", {}).get("_orig_mod")
        return CallSite(
            line,
            top or line,
            _weak(module),
            _weak(wrapper),
            type(module).__name__ if module is not None else None,
        )

    # -- hooks (must never raise into Dynamo) --
    def on_compile(self, args: Any) -> None:
        try:
            if getattr(getattr(args, "callback_trigger", None), "name", "") != "DYNAMO":
                return
            cid = _norm_id(getattr(args, "compile_id", ""))
            if cid not in self.sites and len(self.sites) < MAX_EVENTS:
                self.sites[cid] = self.site()
        except Exception:
            pass

    def on_break(self, record: logging.LogRecord) -> None:
        if len(self.breaks) >= MAX_EVENTS:
            return
        import torch

        cid = _norm_id(torch._guards.CompileContext.current_compile_id())
        self.breaks.append(BreakEvent(cid, record.getMessage(), self.site()))

    def on_warning(self, record: logging.LogRecord) -> None:
        if len(self.limits) >= MAX_EVENTS or "hit config." not in str(record.msg):
            return
        parsed = parse_limit_warning(record.getMessage())
        if parsed is not None:
            self.limits.append(LimitEvent(*parsed, site=self.site()))


def _weak(obj: Any) -> Any:
    if obj is None:
        return None
    try:
        return weakref.ref(obj)
    except TypeError:
        return None


class _Handler(logging.Handler):
    def __init__(self, sink: Any) -> None:
        super().__init__(logging.DEBUG)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.sink(record)
        except Exception:
            pass


class _Capture:
    """Installs the hooks for one cell and puts everything back (see module docstring)."""

    def __init__(self, events: _Events) -> None:
        self.events = events
        self.break_handler = _Handler(events.on_break)
        self.warning_handler = _Handler(events.on_warning)
        # logger -> (level, propagate) we found, for the loggers whose level we changed
        self.changed: dict[logging.Logger, tuple[int, bool]] = {}
        self.loggers: list[logging.Logger] = []
        self.callback_installed = False
        self.dup_checker: Any = None
        self.dup_saved: Any = None
        self.dup_copy: Any = None

    def install(self) -> None:
        import torch._dynamo
        from torch._logging._internal import log_registry

        torch._dynamo.callback_handler.register_start_callback(self.events.on_compile)
        self.callback_installed = True
        for qname in sorted(log_registry.get_artifact_log_qnames()):
            if not qname.endswith(".__graph_breaks"):
                continue
            logger = logging.getLogger(qname)
            if not logger.isEnabledFor(logging.DEBUG):
                # the user does not print graph breaks: enable them for us alone
                self.changed[logger] = (logger.level, logger.propagate)
                logger.setLevel(logging.DEBUG)
                logger.propagate = False
            logger.addHandler(self.break_handler)
            self.loggers.append(logger)
        warnings_logger = logging.getLogger("torch._dynamo.convert_frame")
        warnings_logger.addHandler(self.warning_handler)
        self.loggers.append(warnings_logger)
        if self.changed:
            # Dynamo prints a break in full only the first time it is logged; what it logs for
            # us must not shorten what the user sees once they turn TORCH_LOGS on.
            checker = getattr(sys.modules.get("torch._dynamo.utils"), "graph_break_dup_warning_checker", None)
            seen = getattr(checker, "set", None)
            if isinstance(seen, collections.OrderedDict):
                self.dup_checker, self.dup_saved = checker, seen
                self.dup_copy = checker.set = collections.OrderedDict(seen)

    def uninstall(self) -> None:
        for logger in self.loggers:
            for handler in (self.break_handler, self.warning_handler):
                try:
                    logger.removeHandler(handler)
                except Exception:
                    pass
        self.loggers = []
        changed, self.changed = self.changed, {}
        for logger, (level, propagate) in changed.items():
            # put back what we found, unless the cell reconfigured logging itself
            # (`torch._logging.set_logs(...)`): then its settings stand
            if logger.level == logging.DEBUG and logger.propagate is False:
                logger.setLevel(level)
                logger.propagate = propagate
        checker, self.dup_checker = self.dup_checker, None
        if checker is not None:
            if checker.set is self.dup_copy:
                checker.set = self.dup_saved
            else:  # torch._dynamo.reset() in the cell: keep it reset, without what we added
                checker.set = collections.OrderedDict()
            self.dup_saved = self.dup_copy = None
        if self.callback_installed:
            self.callback_installed = False
            try:
                import torch._dynamo

                torch._dynamo.callback_handler.remove_start_callback(self.events.on_compile)
            except (ValueError, AttributeError):
                pass


# ---- from events and metrics to records ------------------------------------------------------


def _library_roots() -> tuple[str, ...]:
    roots = set()
    for key in ("purelib", "platlib", "stdlib", "platstdlib"):
        try:
            path = sysconfig.get_paths().get(key)
        except Exception:
            path = None
        if path:
            roots.add(os.path.realpath(path) + os.sep)
    try:
        import torch

        roots.add(os.path.realpath(os.path.dirname(torch.__file__)) + os.sep)
    except Exception:
        pass
    return tuple(sorted(roots))


_LIBRARY_ROOTS: tuple[str, ...] | None = None


def is_library_file(filename: str) -> bool:
    """Code the user does not own: installed packages and the standard library."""
    global _LIBRARY_ROOTS
    if not filename or filename.startswith("<"):
        return filename.startswith("<frozen")
    if _LIBRARY_ROOTS is None:
        _LIBRARY_ROOTS = _library_roots()
    if f"{os.sep}site-packages{os.sep}" in filename or f"{os.sep}dist-packages{os.sep}" in filename:
        return True
    real = os.path.realpath(filename)
    return any(real.startswith(root) for root in _LIBRARY_ROOTS)


def short_path(filename: str) -> str:
    """`transformers/models/bert/modeling_bert.py` for an installed file, the base name otherwise."""
    for marker in (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return os.path.basename(filename)


def _seconds(entry: Any) -> float:
    s = getattr(entry, "entire_frame_compile_time_s", None)
    if isinstance(s, (int, float)):
        return float(s)
    us = getattr(entry, "duration_us", None)
    if isinstance(us, (int, float)):
        return us / 1e6
    start, end = getattr(entry, "start_time_us", None), getattr(entry, "end_time_us", None)
    if isinstance(start, (int, float)) and isinstance(end, (int, float)) and end >= start:
        return (end - start) / 1e6
    return 0.0


def _build(
    run: CellRun, events: _Events, entries: list[Any], lost: bool, *, breaks_from_resumes: bool = False
) -> CompileRecords:
    locator = run.locator
    functions: dict[tuple[str, str], CompiledFunction] = {}
    by_cid: dict[str, tuple[str, str]] = {}  # Dynamo's compile id -> function, within this cell
    by_frame: dict[str, tuple[str, str]] = {}  # Dynamo's frame id (one per code object) -> function
    recompiles_per_frame: collections.Counter[tuple[str, tuple[str, str]]] = collections.Counter()

    def function(file: str, code_name: str, site: CallSite | None = None) -> CompiledFunction:
        name = resumed_function(code_name)
        module = site.module() if site is not None and site.module is not None else None
        if file.endswith(_WRAPPERS) and module is not None:
            # every module compiled with `torch.compile(nn.Linear(...))` shares this one code
            # object: Dynamo counts a second model as a recompilation; we keep them apart
            name = f"{name}@{id(module)}"
        key = (file, name)
        fn = functions.get(key)
        if fn is None:
            fn = functions[key] = CompiledFunction(file, resumed_function(code_name))
        return fn

    def note_site(fn: CompiledFunction, site: CallSite | None) -> None:
        if site is None:
            return
        if fn.call_line is None and site.top is not None:
            fn.call_line = site.top
        if (site.module is not None or site.wrapper is not None) and len(fn.modules) < 4:
            fn.modules.append(site)

    for entry in entries:
        cid = _norm_id(getattr(entry, "compile_id", None))
        frame = _frame_id(cid)
        site = events.sites.get(cid)
        co_name, co_file = getattr(entry, "co_name", None), getattr(entry, "co_filename", None)
        fail = getattr(entry, "fail_reason", None) or ""
        first_here = False
        if co_name and co_file:
            fn = function(co_file, co_name, site)
            key = next(k for k, v in functions.items() if v is fn)
            first_here = key not in by_frame.values()
            by_cid[cid] = by_frame[frame] = key
            if not co_name.startswith(_RESUME_PREFIX):
                line = getattr(entry, "co_firstlineno", None)
                if isinstance(line, int) and (fn.def_line is None or line < fn.def_line):
                    fn.def_line = line
            elif breaks_from_resumes and cid.endswith("/0"):
                fn.breaks.append(RecordedBreak(GraphBreak(co_file, None, "other", "graph break"), None))
        elif cid in by_cid or frame in by_frame:
            key = by_cid.get(cid) or by_frame[frame]
            fn = functions[key]
        else:
            continue  # a limit hit of a function first compiled in an earlier cell: the warning names it
        note_site(fn, site)
        seconds = _seconds(entry)
        fn.compile_s += seconds
        if getattr(entry, "is_forward", True) is False:
            continue  # the backward graph compiled at the first .backward(): time only
        if "recompile limit" in fail or "recompile_limit" in fail:
            fn.limit_hit = True
            continue
        if (getattr(entry, "graph_op_count", None) or 0) > 0:
            fn.graphs += 1
        reason = getattr(entry, "recompile_reason", None)
        if reason:
            failure = describe_guard_failure(reason)
            if first_here and fn.file.endswith(_WRAPPERS) and reason_is_about_module(reason):
                continue  # the first compilation of another module that shares the wrapper's code
            recompiles_per_frame[(frame, key)] += 1
            fn.recompiles.append(Recompile(failure, site.top if site else None, seconds))
    for key, fn in functions.items():
        fn.recompile_count = max((n for (_, k), n in recompiles_per_frame.items() if k == key), default=0)
    for limit in events.limits:
        fn = function(limit.file, limit.name, limit.site)
        fn.limit_hit, fn.limit = True, limit.limit
        if fn.def_line is None:
            fn.def_line = limit.line
        note_site(fn, limit.site)
    for event in events.breaks:
        gb = parse_graph_break(event.message)
        if gb is None:
            continue
        key = by_cid.get(event.compile_id) or by_frame.get(_frame_id(event.compile_id))
        if key is not None:
            fn = functions[key]
        elif gb.stack:
            fn = function(gb.stack[0].file, gb.stack[0].name, event.site)
        elif gb.file:
            fn = function(gb.file, "<compiled code>", event.site)
        else:
            continue
        fn.breaks.append(RecordedBreak(gb, event.site.line))
        note_site(fn, event.site)
    cell_file = locator.cell_file
    names = None
    for fn in functions.values():
        if fn.modules and names is None:
            names = run.snapshot().module_names()
        fn.label, fn.location = _describe(fn, cell_file, locator, names or {})
    ordered = sorted(
        functions.values(),
        key=lambda f: (f.call_line if f.call_line is not None else 10**9, f.label),
    )
    return CompileRecords(ordered, cell_file, lost)


def reason_is_about_module(reason: str) -> bool:
    """A failed guard on the compiled module itself (`fn`): its type, identity or parameters."""
    text = reason.split(":", 1)[-1]
    return bool(re.search(r"(?<![\w.])fn\b", text))


def _describe(
    fn: CompiledFunction, cell_file: str | None, locator: CellLocator, names: dict[int, tuple[str, str]]
) -> tuple[str, str]:
    """(what the user calls it, where it is defined)."""
    module_name = module_type = None
    for site in fn.modules:
        for ref in (site.wrapper, site.module):
            obj = ref() if ref is not None else None
            if obj is not None and id(obj) in names:
                module_name = names[id(obj)][0]
                break
        if module_type is None and site.module_type:
            module_type = site.module_type
        if module_name is not None:
            break
    wrapper = fn.file.endswith(_WRAPPERS)
    if wrapper:
        label = module_name or (f"a compiled `{module_type}`" if module_type else "a compiled module")
        label = label if module_name else label.strip("`")
    elif fn.code_name in ("forward", "_call_impl", "__call__"):
        label = module_name or (f"{module_type}.{fn.code_name}" if module_type else fn.code_name)
    else:
        label = fn.code_name
    if wrapper:
        location = f"torch.nn.{module_type}" if module_type else "torch.nn"
    elif cell_file is not None and fn.file == cell_file:
        location = f"line {fn.def_line}" if fn.def_line else "this cell"
    else:
        number = locator.cell_number(fn.file)
        if number is not None:
            location = f"cell [{number}]" + (f", line {fn.def_line}" if fn.def_line else "")
        else:
            location = short_path(fn.file) + (f":{fn.def_line}" if fn.def_line else "")
    return label, location


def _record(fn: CompiledFunction) -> CompileRecord:
    reasons = list(dict.fromkeys(r.failure.text for r in fn.recompiles))
    return CompileRecord(
        name=fn.label,
        location=fn.location,
        line=fn.call_line,
        graphs=fn.graphs,
        breaks=len(fn.breaks),
        recompiles=fn.recompile_count,
        compile_s=fn.compile_s,
        limit_hit=fn.limit_hit,
        reasons=reasons[:8],
    )
