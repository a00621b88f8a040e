"""The IPython edge: `%%torchcheck`, `%torchcheck on|off|status`, events and configuration.

How a checked cell runs unchanged: an input transformer turns a leading `%%torchcheck ...`
line into a comment *before* IPython looks for cell magics, so the body runs natively —
`Out`, `_`/`_N`, displays and tracebacks are IPython's own, and the code's line numbers are
the editor's (the magic line stays line 1). `pre_run_cell` still sees the raw cell, so it
knows the cell is to be checked and starts the runtime collectors; `post_run_cell` stops
them (it fires after errors and interrupts too), lints the source, scans the namespace and
shows the report. A torchmagic failure anywhere becomes one warning line on stderr.
"""

from __future__ import annotations

import argparse
import ast
import shlex
import sys
import time
from typing import Any

from IPython.core.magic import Magics, line_cell_magic, magics_class
from traitlets import Bool, Enum, Float, Int, List, Unicode
from traitlets.config import Configurable

from .lint.engine import lint
from .lint.registry import selected
from .lint.source import prepare
from .report import Finding, Report
from .runtime import CellRun, make_analyzers, make_collectors

MAGIC = "torchcheck"
_PREFIX = f"%%{MAGIC}"


class TorchCheck(Configurable):
    """torchmagic settings: `c.TorchCheck.x = ...` in ipython_config.py or `%config TorchCheck.x = ...`."""

    select = List(
        Unicode(), default_value=[], help="Only these rule IDs or prefixes (e.g. ['TM3', 'TM101'])."
    ).tag(config=True)
    ignore = List(Unicode(), default_value=[], help="Rule IDs or prefixes never reported.").tag(config=True)
    auto = Bool(False, help="Check every cell, as `%torchcheck on` does.").tag(config=True)
    display = Enum(
        ["auto", "widget", "html", "text", "none"],
        default_value="auto",
        help="How a report is shown after the cell; 'auto' is a widget in Jupyter, text in a terminal.",
    ).tag(config=True)
    sync_devices = List(
        Unicode(), default_value=["cuda"], help="Device types whose synchronisations are timed."
    ).tag(config=True)
    sync_threshold_s = Float(0.005, help="TM303: a line must wait at least this long ...").tag(config=True)
    sync_fraction = Float(0.1, help="... and at least this fraction of the cell's time.").tag(config=True)
    scan = Bool(True, help="Scan the namespace for tensors and modules after each checked cell.").tag(
        config=True
    )
    trace_shapes = Bool(True, help="Record per-layer shapes of forward passes while the cell runs.").tag(
        config=True
    )
    cudnn_shape_limit = Int(
        8, help="TM901: distinct convolution input shapes tolerated with cudnn.benchmark."
    ).tag(config=True)
    max_rows = Int(30, help="Rows shown per table before 'show all'.").tag(config=True)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="%%torchcheck", add_help=False, exit_on_error=False)
    p.add_argument("-d", "--display", choices=["auto", "widget", "html", "text", "none"])
    p.add_argument("--select", default=None, help="comma-separated rule IDs or prefixes")
    p.add_argument("--ignore", default=None, help="comma-separated rule IDs or prefixes")
    p.add_argument("--no-scan", action="store_true")
    p.add_argument("--no-trace", action="store_true")
    return p


class CellOptions:
    """Per-cell overrides from the `%%torchcheck` line, falling back to the TorchCheck config."""

    def __init__(self, config: TorchCheck, line: str) -> None:
        self._config = config
        self.display: str = config.display
        self.select: list[str] = list(config.select)
        self.ignore: list[str] = list(config.ignore)
        self.scan = config.scan
        self.trace_shapes = config.trace_shapes
        self.problem: str | None = None
        if not line.strip():
            return
        try:
            ns, unknown = _parser().parse_known_args(shlex.split(line))
        except (argparse.ArgumentError, ValueError, SystemExit) as e:
            self.problem = f"ignored options {line.strip()!r}: {e}"
            return
        if unknown:
            self.problem = f"unknown options ignored: {' '.join(unknown)}"
        if ns.display:
            self.display = ns.display
        if ns.select:
            self.select = [s for s in ns.select.split(",") if s.strip()]
        if ns.ignore:
            self.ignore = [*self.ignore, *[s for s in ns.ignore.split(",") if s.strip()]]
        self.scan = self.scan and not ns.no_scan
        self.trace_shapes = self.trace_shapes and not ns.no_trace

    def __getattr__(self, name: str) -> Any:
        # Anything not overridden per cell (sync_devices, thresholds, ...) comes from config.
        return getattr(self._config, name)


def comment_out_magic_line(lines: list[str]) -> list[str]:
    """Input transformer: `%%torchcheck ...` as the first line becomes `# %%torchcheck ...`."""
    i = 0
    while i < len(lines) and not lines[i].strip():
        i += 1
    if i < len(lines) and lines[i].lstrip().startswith(_PREFIX):
        first = lines[i].lstrip()
        rest = first[len(_PREFIX) :]
        if not rest.strip() or rest[0].isspace():
            if i + 1 < len(lines) and lines[i + 1].lstrip().startswith("%%"):
                # stacked on another cell magic (`%%time`, `%%capture`): that one must come
                # first for IPython to run it; pre_run_cell still sees this cell as checked
                return [*lines[:i], *lines[i + 1 :]]
            return [*lines[:i], "# " + first, *lines[i + 1 :]]
    return lines


def _magic_line(raw_cell: str) -> str | None:
    """The options of a `%%torchcheck` first line, or None when the cell has none."""
    first = raw_cell.lstrip("\n").split("\n", 1)[0].strip()
    if first.startswith(_PREFIX) and (len(first) == len(_PREFIX) or first[len(_PREFIX)].isspace()):
        return first[len(_PREFIX) :]
    return None


def _is_control_cell(raw_cell: str) -> bool:
    """Cells that only run `%torchcheck ...` or `%load_ext`: nothing of the user's to report."""
    lines = [ln.strip() for ln in raw_cell.strip().splitlines() if ln.strip()]
    return bool(lines) and all(
        ln.startswith(f"%{MAGIC} ")
        or ln == f"%{MAGIC}"
        or "load_ext" in ln
        or "unload_ext" in ln
        or ln.startswith("%config TorchCheck")
        for ln in lines
    )


def _warn(msg: str) -> None:
    print(f"torchmagic: {msg}", file=sys.stderr)


@magics_class
class TorchCheckMagics(Magics):
    def __init__(self, shell: Any, ext: TorchMagic) -> None:
        super().__init__(shell)
        self.ext = ext

    @line_cell_magic
    def torchcheck(self, line: str, cell: str | None = None) -> Any:
        """Check a cell for PyTorch anti-patterns, live tensors, shapes and GPU stalls.

        %%torchcheck [-d widget|html|text|none] [--select TM3,TM101] [--ignore TM402] [--no-scan] [--no-trace]
            runs the cell unchanged, then shows its report.
        %torchcheck on|off|status
            checks every cell automatically (on), stops doing so (off), shows the state.
        """
        if cell is None:
            return self.ext.line_command(line)
        return self.ext.run_body(line, cell)


class TorchMagic:
    """The loaded extension: one per shell."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self.config = TorchCheck(parent=shell)
        self.collectors = make_collectors(self.config)
        self.analyzers = make_analyzers(self.config)
        self.run: CellRun | None = None
        self.options: CellOptions | None = None
        self.last: Report | None = None
        self.channel: Any = None
        self.magics = TorchCheckMagics(shell, self)

    # ---- wiring ---------------------------------------------------------------------------
    def register(self) -> None:
        sh = self.shell
        sh.register_magics(self.magics)
        if comment_out_magic_line not in sh.input_transformers_cleanup:
            sh.input_transformers_cleanup.insert(0, comment_out_magic_line)
        sh.events.register("pre_run_cell", self.pre_run_cell)
        sh.events.register("post_run_cell", self.post_run_cell)
        if self.config not in sh.configurables:
            sh.configurables.append(self.config)
        try:
            from .views.comm import SidebarChannel

            self.channel = SidebarChannel(sh)
        except Exception as e:  # the sidebar is optional; the cell report is not
            self.channel = None
            _warn(f"sidebar channel unavailable ({type(e).__name__}: {e})")

    def unregister(self) -> None:
        sh = self.shell
        for name, cb in (("pre_run_cell", self.pre_run_cell), ("post_run_cell", self.post_run_cell)):
            try:
                sh.events.unregister(name, cb)
            except ValueError:
                pass
        while comment_out_magic_line in sh.input_transformers_cleanup:
            sh.input_transformers_cleanup.remove(comment_out_magic_line)
        for kind in ("line", "cell"):
            sh.magics_manager.magics[kind].pop(MAGIC, None)
        if self.config in sh.configurables:
            sh.configurables.remove(self.config)
        if self.run is not None:
            self._stop_collectors(self.run)
            self.run = None
        if self.channel is not None:
            try:
                self.channel.close()
            except Exception:
                pass

    # ---- %torchcheck on|off|status --------------------------------------------------------
    def line_command(self, line: str) -> None:
        arg = line.strip().lower()
        if arg in ("on", "off"):
            self.config.auto = arg == "on"
            print(f"torchcheck: automatic checking {'on' if self.config.auto else 'off'}")
        elif arg in ("", "status"):
            state = "on (every cell)" if self.config.auto else "off (only %%torchcheck cells)"
            last = f"; last report: cell {self.last.execution_count}" if self.last else ""
            print(f"torchcheck: automatic checking {state}; display={self.config.display}{last}")
        else:
            print("usage: %torchcheck on|off|status", file=sys.stderr)

    # ---- the cell lifecycle ---------------------------------------------------------------
    def pre_run_cell(self, info: Any) -> None:
        try:
            raw = info.raw_cell or ""
            line = _magic_line(raw)
            if line is None and not (self.config.auto and raw.strip() and not _is_control_cell(raw)):
                return
            self._begin(raw, line or "", getattr(info, "cell_id", None))
        except Exception as e:
            self.run = None
            _warn(f"internal error before the cell ({type(e).__name__}: {e}); the cell runs unchecked")

    def post_run_cell(self, result: Any) -> None:
        run = self.run
        if run is None:
            return
        self.run = None
        self._end(run, getattr(result, "execution_count", None))

    def _end(self, run: CellRun, execution_count: int | None) -> None:
        """Stop the collectors first, whatever happens after: no hook outlives its cell."""
        run.report.elapsed_s = time.perf_counter() - run.started
        self._stop_collectors(run)
        try:
            self._finish(run, execution_count)
        except Exception as e:
            _warn(
                f"internal error after the cell ({type(e).__name__}: {e}); the cell's own result is unaffected"
            )

    def _begin(self, raw: str, line: str, cell_id: str | None) -> CellRun:
        opts = CellOptions(self.config, line)
        run = CellRun(self.shell, opts, raw, cell_id=cell_id, execution_count=self.shell.execution_count)
        if opts.problem:
            run.report.errors.append(opts.problem)
        self.options = opts
        self.run = run
        for c in self.collectors:  # each reads its own switches (trace_shapes, ...) from run.config
            try:
                c.start(run)
            except Exception as e:
                run.report.errors.append(f"{c.name} could not start: {type(e).__name__}: {e}")
        run.started = time.perf_counter()
        return run

    def _stop_collectors(self, run: CellRun) -> None:
        for c in reversed(self.collectors):
            try:
                c.stop(run)
            except Exception as e:
                run.report.errors.append(f"{c.name} failed: {type(e).__name__}: {e}")

    def _finish(self, run: CellRun, execution_count: int | None) -> Report:
        report = run.report
        t0 = time.perf_counter()
        opts: CellOptions = run.config
        report.cell_id = run.cell_id
        report.execution_count = execution_count if execution_count is not None else run.execution_count
        try:
            result = lint(run.raw_cell, self.shell.user_ns, select=opts.select, ignore=opts.ignore)
            report.findings[:0] = [f for f in result.findings if f.rule != "TM000"]
            report.errors.extend(result.errors)
        except Exception as e:
            report.errors.append(f"lint failed: {type(e).__name__}: {e}")
        for a in self.analyzers:
            try:
                a.analyze(run)
            except Exception as e:
                report.errors.append(f"{a.name} failed: {type(e).__name__}: {e}")
        report.findings = self._filter(report.findings, run.raw_cell, opts)
        report.check_s = time.perf_counter() - t0
        report.finished = time.time()
        self.last = report
        self._show(report, opts.display, opts.max_rows)
        if self.channel is not None:
            try:
                self.channel.send(report)
            except Exception as e:
                _warn(f"could not update the sidebar ({type(e).__name__}: {e})")
        return report

    @staticmethod
    def _filter(findings: list[Finding], raw_cell: str, opts: CellOptions) -> list[Finding]:
        """Suppression comments, select/ignore and dedup for findings of every source."""
        sup = prepare(raw_cell).suppressions
        out: list[Finding] = []
        seen: set[tuple[str, int | None, str | None, str]] = set()
        for f in findings:
            if sup.silenced(f.rule, f.line) or not selected(f.rule, opts.select, opts.ignore):
                continue
            key = (f.rule, f.line, f.object, f.message)
            if key in seen:
                continue
            seen.add(key)
            out.append(f)
        return out

    # ---- display ---------------------------------------------------------------------------
    def _show(self, report: Report, display: str, max_rows: int) -> None:
        if display == "none":
            return
        if display == "auto":
            display = "widget" if self._in_kernel() else "text"
        if display == "text":
            from .views.terminal import print_rich

            print_rich(report)
            return
        from IPython.display import display as ipy_display

        if display == "widget":
            try:
                from .views.widget import render_widget

                ipy_display(render_widget(report, max_rows=max_rows))
                return
            except ImportError:
                pass
        from .views.html import HTMLReport

        ipy_display(HTMLReport(report))

    def _in_kernel(self) -> bool:
        return getattr(self.shell, "kernel", None) is not None

    # ---- %%torchcheck called as a function (run_cell_magic) ---------------------------------
    def run_body(self, line: str, cell: str) -> Any:
        """Run a body passed to the magic explicitly (`get_ipython().run_cell_magic(...)`).

        Typed cells never get here: the input transformer lets IPython run them natively.
        """
        __tracebackhide__ = True  # noqa: F841  (IPython hides this frame in tracebacks)
        outer = self.run
        if outer is not None:
            return self._exec(cell)  # already inside a checked cell: its run sees this body too
        run = self._begin(f"{_PREFIX} {line}\n{cell}", line, None)
        self.run = None
        try:
            return self._exec(cell)
        finally:
            self._end(run, self.shell.execution_count)

    def _exec(self, cell: str) -> Any:
        __tracebackhide__ = True  # noqa: F841
        sh = self.shell
        source = "\n" + cell  # the magic line is line 1 of what the user sees
        filename = sh.compile.cache(source, sh.execution_count)
        tree = ast.parse(source, filename=filename)
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, filename, "exec", dont_inherit=True), sh.user_global_ns, sh.user_ns)
        if last is not None:
            return eval(compile(last, filename, "eval", dont_inherit=True), sh.user_global_ns, sh.user_ns)
        return None


_loaded: dict[int, TorchMagic] = {}


def load(shell: Any) -> TorchMagic:
    ext = _loaded.get(id(shell))
    if ext is not None:
        return ext  # loading twice is harmless
    ext = TorchMagic(shell)
    ext.register()
    _loaded[id(shell)] = ext
    return ext


def unload(shell: Any) -> None:
    ext = _loaded.pop(id(shell), None)
    if ext is not None:
        ext.unregister()


def last_report() -> Report | None:
    """The most recent report of any loaded shell in this process."""
    reports = [e.last for e in _loaded.values() if e.last is not None]
    return max(reports, key=lambda r: r.finished) if reports else None
