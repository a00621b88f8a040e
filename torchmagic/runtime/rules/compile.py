"""TM950 and TM951 from what Dynamo did while the cell ran (`runtime/compile.py` records).

A graph break is reported at the line where it happened when that line is in the checked
cell; at the cell line that called into the compiled code when it happened in a function
from an earlier cell or a file of the user's (named: `cell [3], line 7, in forward`); and
once, as info, at the user's own line closest to it when it happened in library code.
"""

from __future__ import annotations

import linecache
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ...catalog import Rule
from ...report import Finding
from ..compile import CompiledFunction, RecordedBreak, is_library_file, short_path
from ..dynamo_messages import break_cause, break_fix, recompile_fix
from ..registry import runtime_rule

if TYPE_CHECKING:
    from ...run import CellRun

MAX_CODE = 60
MODE_VERSIONS = 3  # (train, eval) × (grad, no grad), beyond the first compilation


def _code(run: CellRun, file: str | None, line: int | None, cell_file: str | None) -> str:
    if file is None or line is None:
        return ""
    if file == cell_file:
        lines = run.lines
        text = lines[line - 1] if 0 < line <= len(lines) else ""
    else:
        text = linecache.getline(file, line)
    text = " ".join(text.split())
    return text if len(text) <= MAX_CODE else text[: MAX_CODE - 1] + "…"


def _where(run: CellRun, file: str, line: int, name: str | None) -> str:
    """`cell [3], line 7, in `forward`` or `model.py, line 12` for code outside this cell."""
    number = run.locator.cell_number(file)
    place = f"cell [{number}], line {line}" if number is not None else f"`{short_path(file)}`, line {line}"
    return f"{place}, in `{name}`" if name and not name.startswith("<") else place


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _times(n: int) -> str:
    return {1: "once", 2: "twice"}.get(n, f"{n} times")


def _owned(file: str | None, cell_file: str | None) -> bool:
    return file is not None and (file == cell_file or not is_library_file(file))


def _break_site(
    run: CellRun, rb: RecordedBreak, cell_file: str | None, fn: CompiledFunction
) -> tuple[int | None, bool, str | None, int | None, str | None]:
    """(finding line, in library code, file, line and function of the code the user owns)."""
    gb = rb.graph_break
    if gb.file == cell_file and gb.line is not None:
        return gb.line, False, gb.file, gb.line, None
    if _owned(gb.file, cell_file):
        if gb.stack and gb.stack[-1].file == gb.file:
            name = gb.stack[-1].name
        else:  # Dynamo prints the stack of a break only the first time
            name = fn.code_name if gb.file == fn.file else None
        return rb.call_line, False, gb.file, gb.line, name
    # library code: the innermost frame the user owns, in this cell if it is there
    for frame in reversed(gb.stack):
        if frame.file == cell_file:
            return frame.line, True, frame.file, frame.line, None
        if _owned(frame.file, cell_file):
            return rb.call_line, True, frame.file, frame.line, frame.name
    return rb.call_line, True, None, None, None


@runtime_rule("TM950")
def graph_break(run: CellRun, rule: Rule) -> Iterator[Finding]:
    records = run.records.compile
    if records is None:
        return
    cell_file = records.cell_file
    for fn in records.functions:
        # one finding per place and cause, at the first cell line that reached it; the count
        # is how often Dynamo broke there in this cell (once per compilation)
        groups: dict[tuple[object, ...], list[tuple[RecordedBreak, tuple]]] = {}
        for rb in fn.breaks:
            gb = rb.graph_break
            if gb.kind == "explicit" or (gb.file is None and gb.line is None):
                continue  # asked for (`torch._dynamo.graph_break()`), or counted from metrics only
            site = _break_site(run, rb, cell_file, fn)
            key = (site[1], gb.file, gb.line, gb.kind, gb.title)
            groups.setdefault(key, []).append((rb, site))
        for items in groups.values():
            rb, site = next(((r, s) for r, s in items if s[0] is not None), items[0])
            line, library, own_file, own_line, own_name = site
            yield _break_finding(
                run, rule, fn, rb, len(items), line, library, own_file, own_line, own_name, cell_file
            )


def _break_finding(
    run: CellRun,
    rule: Rule,
    fn: CompiledFunction,
    rb: RecordedBreak,
    count: int,
    line: int | None,
    library: bool,
    own_file: str | None,
    own_line: int | None,
    own_name: str | None,
    cell_file: str | None,
) -> Finding:
    gb = rb.graph_break
    cause = break_cause(gb)
    times = f"{_plural(count, 'break')} there in this cell"
    if gb.skipped_frame:
        times += "; Dynamo gave up on that frame, which runs uncompiled"
    if library:
        where = f"`{short_path(gb.file)}`, line {gb.line}" if gb.file else "library code"
        via = ""
        if own_file is not None and own_line is not None and own_file != cell_file:
            via = f", reached from {_where(run, own_file, own_line, own_name)}"
        return rule.finding(
            f"A graph break inside library code ({where}{via}) splits the compiled graph of `{fn.label}`: "
            f"{cause} ({times}).",
            "Nothing to change at your line for this one; if it costs time, compile a part of the model "
            "that avoids that code (or check for a newer version of the library).",
            line=line,
            object=fn.label if line is None else None,
            source="runtime",
            severity="info",
        )
    code = _code(run, own_file, own_line, cell_file)
    what = f"`{code}`" if code else "This line"
    if own_file is not None and own_file != cell_file and own_line is not None:
        what += f" ({_where(run, own_file, own_line, own_name)})"
    return rule.finding(
        f"{what} breaks the graph of compiled `{fn.label}`: {cause} ({times}).",
        break_fix(gb),
        line=line,
        object=fn.label if line is None else None,
        source="runtime",
    )


@runtime_rule("TM951")
def recompile(run: CellRun, rule: Rule) -> Iterator[Finding]:
    records = run.records.compile
    if records is None:
        return
    for fn in records.functions:
        recompiles = fn.recompiles
        if not fn.limit_hit:
            # train/eval and grad-mode switches: each combination is compiled once (at most
            # three more versions), then calls find it in the cache. Expected, and stable.
            switches = [r for r in recompiles if r.failure.mode_switch]
            if len(switches) <= MODE_VERSIONS:
                recompiles = [r for r in recompiles if not r.failure.mode_switch]
            if not recompiles:
                continue
        reasons = list(dict.fromkeys(r.failure.text for r in recompiles))
        why = "; ".join(reasons[:3]) + ("; …" if len(reasons) > 3 else "")
        line = next((r.call_line for r in recompiles if r.call_line is not None), fn.call_line)
        count = max(fn.recompile_count, len(recompiles)) if recompiles else fn.recompile_count
        spent = sum(r.seconds for r in fn.recompiles)
        took = f", {spent:.2f} s of compiling" if spent >= 0.01 else ""
        fix = recompile_fix({r.failure.kind for r in recompiles})
        if fn.limit_hit:
            limit = f" ({fn.limit})" if fn.limit else ""
            because = f": {why}" if why else ""
            yield rule.finding(
                f"`{fn.label}` hit Dynamo's recompile limit{limit} in this cell and is no longer compiled "
                f"for new inputs, which now run as plain Python{because}.",
                fix + " Raising `torch._dynamo.config.recompile_limit` only postpones this.",
                line=line,
                object=fn.label if line is None else None,
                source="runtime",
                severity="error",
            )
            continue
        yield rule.finding(
            f"`{fn.label}` was recompiled {_times(count)} in this cell{took}: {why}.",
            fix,
            line=line,
            object=fn.label if line is None else None,
            source="runtime",
        )
