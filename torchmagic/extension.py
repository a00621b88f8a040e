"""The IPython edge: `%%torchcheck`, `%torchcheck on|off|status`, events and configuration.

How a checked cell runs unchanged: an input transformer turns a leading `%%torchcheck ...`
line into a comment *before* IPython looks for cell magics, so the body runs natively —
`Out`, `_`/`_N`, displays and tracebacks are IPython's own, and the code's line numbers are
the editor's (the magic line stays line 1). `pre_run_cell` still sees the raw cell, so it
knows the cell is to be checked and begins a `CellCheck`; `post_run_cell` (which fires after
errors and interrupts too) ends it and shows the report. A torchmagic failure anywhere
becomes one warning line on stderr.
"""

from __future__ import annotations

import ast
import sys
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.utils.process import arg_split
from traitlets import Bool, Enum, Float, Int, List, Unicode
from traitlets.config import Configurable

from .pipeline import CellCheck
from .report import Report
from .run import DISPLAYS, CheckOptions
from .views.pending_clear import PendingClear

MAGIC = "torchcheck"
_PREFIX = f"%%{MAGIC}"
# Line magics that manage the extension itself: a cell of only these has nothing to check.
_CONTROL_MAGICS = ("%load_ext", "%reload_ext", "%unload_ext", f"%{MAGIC}", "%config TorchCheck")


class TorchCheck(Configurable):
    """torchmagic settings: `c.TorchCheck.x = ...` in ipython_config.py or `%config TorchCheck.x = ...`."""

    select = List(
        Unicode(), default_value=[], help="Only these rule IDs or prefixes (e.g. ['TM3', 'TM101'])."
    ).tag(config=True)
    ignore = List(Unicode(), default_value=[], help="Rule IDs or prefixes never reported.").tag(config=True)
    auto = Bool(False, help="Check every cell, as `%torchcheck on` does.").tag(config=True)
    display = Enum(
        list(DISPLAYS),
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
        8, min=0, help="TM901: distinct convolution input shapes tolerated with cudnn.benchmark."
    ).tag(config=True)
    max_rows = Int(30, min=1, help="Rows shown per table before 'show all'.").tag(config=True)

    def options(self) -> CheckOptions:
        return CheckOptions(
            select=tuple(self.select),
            ignore=tuple(self.ignore),
            display=self.display,
            scan=self.scan,
            trace_shapes=self.trace_shapes,
            sync_devices=tuple(self.sync_devices),
            sync_threshold_s=self.sync_threshold_s,
            sync_fraction=self.sync_fraction,
            cudnn_shape_limit=self.cudnn_shape_limit,
            max_rows=self.max_rows,
        )


def _split(spec: str | None) -> tuple[str, ...]:
    return tuple(s.strip() for s in (spec or "").split(",") if s.strip())


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


def magic_line(raw_cell: str) -> str | None:
    """The options of a `%%torchcheck` first line (blank lines before it are skipped), or
    None when the cell has none."""
    for line in raw_cell.splitlines():
        first = line.strip()
        if not first:
            continue
        if first.startswith(_PREFIX) and (len(first) == len(_PREFIX) or first[len(_PREFIX)].isspace()):
            return first[len(_PREFIX) :]
        return None
    return None


def is_control_cell(raw_cell: str) -> bool:
    """Cells that only load, configure or switch torchmagic (comments aside): nothing of the
    user's to report."""
    lines = [
        ln.strip() for ln in raw_cell.strip().splitlines() if ln.strip() and not ln.strip().startswith("#")
    ]
    return bool(lines) and all(
        any(ln == m or ln.startswith(m + " ") or ln.startswith(m + ".") for m in _CONTROL_MAGICS)
        for ln in lines
    )


def _warn(msg: str) -> None:
    print(f"torchmagic: {msg}", file=sys.stderr)


@magics_class
class TorchCheckMagics(Magics):
    def __init__(self, shell: Any, ext: TorchMagic) -> None:
        super().__init__(shell)
        self.ext = ext

    @magic_arguments()
    @argument(
        "command",
        nargs="?",
        choices=["on", "off", "status"],
        help="line magic only: check every cell from now on (on), stop (off), show the state (status)",
    )
    @argument("-d", "--display", choices=list(DISPLAYS), help="how to show this cell's report")
    @argument("--select", metavar="IDS", help="only these rule IDs or prefixes, comma-separated (TM3,TM101)")
    @argument("--ignore", metavar="IDS", help="also skip these rule IDs or prefixes, comma-separated")
    @argument("--no-scan", action="store_true", help="do not scan the namespace after the cell")
    @argument("--no-trace", action="store_true", help="do not record per-layer shapes")
    @line_cell_magic
    def torchcheck(self, line: str, cell: str | None = None) -> Any:
        """Check a cell for PyTorch anti-patterns, live tensors, shapes and GPU stalls.

        As a cell magic, runs the cell unchanged, then shows its report. As a line magic,
        `%torchcheck on` checks every cell automatically, `off` stops, `status` shows the state.
        """
        if cell is None:
            return self.ext.line_command(line)
        return self.ext.run_body(line, cell)

    @line_magic
    def torchshape(self, line: str) -> Any:
        """Per-layer shapes of a forward pass run on the meta device: nothing is computed and
        the model's parameters are never touched, moved or copied.

        %torchshape net(torch.randn(32, 3, 224, 224))

        Shows the same table as a checked cell's shape trace and, if the forward cannot run,
        which layer stopped it and why (a shape mismatch, or code that needs tensor values).
        Tensor factories in the arguments build meta tensors, so even huge inputs cost nothing.
        """
        from IPython.display import display

        from .views.dryrun import DryRunView

        result = dry_run_expression(line, self.shell.user_ns)
        if result is not None:
            display(DryRunView(result))


def dry_run_expression(line: str, namespace: dict[str, Any]) -> Any:
    """`%torchshape model(args)`: evaluate the model and (on the meta device) the arguments,
    then dry-run. Usage problems are one line on stderr, never a traceback."""
    import torch

    from .explain import dry_run_as

    text = line.strip()
    try:
        call = ast.parse(text, mode="eval").body
    except SyntaxError:
        call = None
    if not isinstance(call, ast.Call):
        print("usage: %torchshape model(example_input, ...)", file=sys.stderr)
        return None
    try:
        model = eval(compile(ast.Expression(call.func), "<torchshape>", "eval"), namespace)
        args_src = ast.Expression(ast.Tuple(elts=call.args, ctx=ast.Load()))
        kwargs_src = ast.Expression(
            ast.Dict(
                keys=[ast.Constant(k.arg) for k in call.keywords], values=[k.value for k in call.keywords]
            )
        )
        with torch.device("meta"):  # `torch.randn(32, 3, 224, 224)` costs nothing on meta
            args = eval(compile(ast.fix_missing_locations(args_src), "<torchshape>", "eval"), namespace)
            kwargs = eval(compile(ast.fix_missing_locations(kwargs_src), "<torchshape>", "eval"), namespace)
    except Exception as e:
        print(f"%torchshape: could not evaluate {text!r}: {type(e).__name__}: {e}", file=sys.stderr)
        return None
    if any(k is None for k in kwargs):
        print("%torchshape: **kwargs unpacking is not supported; name the arguments", file=sys.stderr)
        return None
    try:
        return dry_run_as(ast.unparse(call.func), model, *args, **kwargs)
    except TypeError as e:
        print(f"%torchshape: {e}", file=sys.stderr)
        return None


def cell_options(config: TorchCheck, line: str) -> tuple[CheckOptions, list[str]]:
    """The options of one checked cell: config, overridden by the `%%torchcheck` line.
    Problems with the line become report errors; the cell is checked with the rest."""
    opts = config.options()
    if not line.strip():
        return opts, []
    parser = TorchCheckMagics.torchcheck.parser
    try:
        # parse_known_args: unknown options are reported, not fatal (IPython 8 has no `partial=`)
        ns, unknown = parser.parse_known_args(arg_split(line, strict=False))
    except (UsageError, ValueError) as e:
        return opts, [f"ignored options {line.strip()!r}: {e}"]
    problems = [f"unknown options ignored: {' '.join(unknown)}"] if unknown else []
    if ns.command:
        problems.append(f"{ns.command!r} is for the line magic `%torchcheck {ns.command}`; ignored here")
    ignore = (*opts.ignore, *_split(ns.ignore))
    return (
        CheckOptions(
            select=_split(ns.select) or opts.select,
            ignore=ignore,
            display=ns.display or opts.display,
            scan=opts.scan and not ns.no_scan,
            trace_shapes=opts.trace_shapes and not ns.no_trace,
            sync_devices=opts.sync_devices,
            sync_threshold_s=opts.sync_threshold_s,
            sync_fraction=opts.sync_fraction,
            cudnn_shape_limit=opts.cudnn_shape_limit,
            max_rows=opts.max_rows,
        ),
        problems,
    )


class TorchMagic:
    """The loaded extension: one per shell."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self.config = TorchCheck(parent=shell)
        self.check = CellCheck()
        self.last: Report | None = None
        self._clears = PendingClear()
        self.channel: Any = None
        self.magics = TorchCheckMagics(shell, self)

    # ---- wiring: load and unload mirror each other -----------------------------------------
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
        self.check.abort()
        self._clears.stop()
        for name, cb in (("pre_run_cell", self.pre_run_cell), ("post_run_cell", self.post_run_cell)):
            try:
                sh.events.unregister(name, cb)
            except ValueError:
                pass
        while comment_out_magic_line in sh.input_transformers_cleanup:
            sh.input_transformers_cleanup.remove(comment_out_magic_line)
        manager = sh.magics_manager
        for kind in ("line", "cell"):
            manager.magics[kind].pop(MAGIC, None)
        manager.magics["line"].pop("torchshape", None)
        if manager.registry.get(type(self.magics).__name__) is self.magics:
            del manager.registry[type(self.magics).__name__]
        # register_magics also made the magics instance a configurable of the shell
        sh.configurables[:] = [c for c in sh.configurables if c is not self.magics and c is not self.config]
        if self.channel is not None:
            try:
                self.channel.close()
            except Exception:
                pass
            self.channel = None
        self.last = None

    # ---- %torchcheck on|off|status --------------------------------------------------------
    def line_command(self, line: str) -> None:
        try:
            args = TorchCheckMagics.torchcheck.parser.parse_argstring(line)
        except UsageError as e:
            print(f"usage: %torchcheck on|off|status ({e})", file=sys.stderr)
            return
        if args.command in ("on", "off"):
            self.config.auto = args.command == "on"
            print(f"torchcheck: automatic checking {'on' if self.config.auto else 'off'}")
        else:
            state = "on (every cell)" if self.config.auto else "off (only %%torchcheck cells)"
            last = f"; last report: cell {self.last.execution_count}" if self.last else ""
            print(f"torchcheck: automatic checking {state}; display={self.config.display}{last}")

    # ---- the cell lifecycle ---------------------------------------------------------------
    def pre_run_cell(self, info: Any) -> None:
        try:
            raw = info.raw_cell or ""
            line = magic_line(raw)
            if line is None and not (self.config.auto and raw.strip() and not is_control_cell(raw)):
                return
            self._begin(raw, line or "", getattr(info, "cell_id", None))
        except Exception as e:
            self.check.abort()
            _warn(f"internal error before the cell ({type(e).__name__}: {e}); the cell runs unchecked")

    def post_run_cell(self, result: Any) -> None:
        if self.check.run is None:
            return
        self._end(getattr(result, "execution_count", None))

    def _begin(self, raw: str, line: str, cell_id: str | None) -> None:
        sh = self.shell
        opts, problems = cell_options(self.config, line)
        hidden = getattr(sh, "user_ns_hidden", None)
        compiler = getattr(sh, "compile", None)
        self.check.begin(
            sh.user_ns,
            raw,
            options=opts,
            cell_id=cell_id,
            execution_count=sh.execution_count,
            hidden=hidden if isinstance(hidden, dict) else None,
            known_files=(lambda: compiler._filename_map) if hasattr(compiler, "_filename_map") else None,
            problems=problems,
        )
        self._clears.start(sh)

    def _end(self, execution_count: int | None) -> None:
        running = self.check.run
        opts = running.options if running is not None else self.config.options()
        clear_pending = self._clears.stop()
        try:
            report = self.check.end(execution_count)
            if report is None:
                return
            self.last = report
            # a pending clear_output(wait=True) would let the report erase the cell's last
            # output: then the report goes to the sidebar (and `%torchcheck` keeps it) only
            if not clear_pending:
                self._show(report, opts.display, opts.max_rows)
            if self.channel is not None:
                try:
                    self.channel.send(report)
                except Exception as e:
                    _warn(f"could not update the sidebar ({type(e).__name__}: {e})")
        except Exception as e:
            _warn(
                f"internal error after the cell ({type(e).__name__}: {e}); the cell's own result is unaffected"
            )

    # ---- display ---------------------------------------------------------------------------
    def _fixer(self, report: Report) -> Any:
        """What the widget's Apply fix buttons call, when a panel that can edit is attached."""
        channel = self.channel
        if channel is None or not channel.can_edit or not report.cell_id:
            return None
        return lambda finding, done: channel.apply_fix(report.cell_id, report.code, finding, done)

    def _show(self, report: Report, display: str, max_rows: int) -> None:
        if display == "none":
            return
        if display == "auto":
            display = "widget" if getattr(self.shell, "kernel", None) is not None else "text"
        if display == "text":
            from .views.terminal import print_rich

            print_rich(report)
            return
        from IPython.display import display as ipy_display

        if display == "widget":
            from .views.html import has_news

            if not has_news(report):
                # nothing to show: one quiet line (the tables fold away), no widget to build
                from .views.html import QuietReport

                ipy_display(QuietReport(report))
                return
            from .views.widget import render_widget

            ipy_display(render_widget(report, max_rows=max_rows, apply_fix=self._fixer(report)))
            return
        from .views.html import HTMLReport

        ipy_display(HTMLReport(report))

    # ---- %%torchcheck called as a function (run_cell_magic) ---------------------------------
    def run_body(self, line: str, cell: str) -> Any:
        """Run a body passed to the magic explicitly (`get_ipython().run_cell_magic(...)`).

        Typed cells never get here: the input transformer lets IPython run them natively.
        """
        __tracebackhide__ = True  # noqa: F841  (IPython hides this frame in tracebacks)
        if self.check.run is not None:
            return self._exec(cell)  # already inside a checked cell: its run sees this body too
        try:
            self._begin(f"{_PREFIX} {line}\n{cell}", line, None)
        except Exception as e:
            self.check.abort()
            _warn(f"internal error before the cell ({type(e).__name__}: {e}); the cell runs unchecked")
            return self._exec(cell)
        try:
            return self._exec(cell)
        finally:
            self._end(self.shell.execution_count)

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
