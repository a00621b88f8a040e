"""Fixes: the edits a static check attaches to a finding, and applying them to a source.

Edits are built from AST positions, which count columns in UTF-8 bytes; `Edit` counts
characters, as editors and the notebook model do. Applying: from the last edit up, edits
that overlap an earlier-chosen one are left for the next round, every fix is applied on its
own and kept only if the source still parses, and rounds repeat (linting again) until no
fix is left to apply — a statement reports one finding per rule, so a second `Variable(...)`
on the same line shows up only once the first is fixed. The result is a fixed point: fixing
it again changes nothing.
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from ..report import Edit, Finding, Fix
from .nodes import is_atom
from .source import prepare

MAX_ROUNDS = 32  # a bound, not a budget: real files settle in two or three rounds


def _char_col(line_text: str, byte_col: int) -> int:
    return len(line_text.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))


class EditMaker:
    """Builds `Edit`s for one source from AST nodes (positions in bytes, per line)."""

    def __init__(self, lines: Sequence[str]) -> None:
        self.lines = lines

    def _text(self, line: int) -> str:
        return self.lines[line - 1] if 0 < line <= len(self.lines) else ""

    def span(self, line: int, byte_col: int, end_line: int, end_byte_col: int, text: str) -> Edit:
        return Edit(
            line,
            _char_col(self._text(line), byte_col),
            end_line,
            _char_col(self._text(end_line), end_byte_col),
            text,
        )

    def replace(self, node: ast.AST, text: str) -> Edit:
        """`node`'s whole source becomes `text`."""
        return self.span(node.lineno, node.col_offset, node.end_lineno, node.end_col_offset, text)  # type: ignore[attr-defined, arg-type]

    def insert_before(self, node: ast.AST, text: str) -> Edit:
        line, col = node.lineno, node.col_offset  # type: ignore[attr-defined]
        return self.span(line, col, line, col, text)

    def insert_after(self, node: ast.AST, text: str) -> Edit:
        end, col = node.end_lineno, node.end_col_offset  # type: ignore[attr-defined]
        return self.span(end, col, end, col, text)  # type: ignore[arg-type]

    def between(self, first: ast.AST, last: ast.AST, text: str) -> Edit:
        """From the end of `first` to the end of `last` becomes `text`."""
        return self.span(first.end_lineno, first.end_col_offset, last.end_lineno, last.end_col_offset, text)  # type: ignore[attr-defined, arg-type]

    def attribute_name(self, node: ast.Attribute, new: str) -> Edit:
        """Rename `x.old` to `x.new` (the attribute ends the node)."""
        end, col = node.end_lineno, node.end_col_offset
        return self.span(end, col - len(node.attr.encode("utf-8")), end, col, new)  # type: ignore[arg-type, operator]

    def add_keyword(self, call: ast.Call, text: str) -> Edit:
        """`f(a)` -> `f(a, text)`; `f()` -> `f(text)`."""
        args: list[ast.AST] = [*call.args, *call.keywords]
        if not args:
            end, col = call.end_lineno, call.end_col_offset
            return self.span(end, col - 1, end, col - 1, text)  # type: ignore[arg-type, operator]
        last = max(args, key=lambda a: (a.end_lineno, a.end_col_offset))  # type: ignore[attr-defined]
        return self.insert_after(last, f", {text}")

    def remove_argument(self, call: ast.Call, arg: ast.AST) -> Edit | None:
        """Drop one argument (an expression or an `ast.keyword`) with its comma."""
        args: list[ast.AST] = sorted(
            [*call.args, *call.keywords],
            key=lambda a: (a.lineno, a.col_offset),  # type: ignore[attr-defined]
        )
        i = next((k for k, a in enumerate(args) if a is arg), None)
        if i is None:
            return None
        if i > 0:  # from the end of the one before: `f(a, b=1)` -> `f(a)`
            return self.between(args[i - 1], arg, "")
        if len(args) > 1:  # the first of several: up to the next one
            nxt = args[1]
            return self.span(arg.lineno, arg.col_offset, nxt.lineno, nxt.col_offset, "")  # type: ignore[attr-defined]
        # the only one: everything between the parentheses
        end, col = call.end_lineno, call.end_col_offset
        return self.span(call.func.end_lineno, call.func.end_col_offset, end, col, "()")  # type: ignore[arg-type]

    def source(self, node: ast.AST) -> str:
        """The node's text as written (unlike `ast.unparse`, it keeps the user's spelling)."""
        line, col = node.lineno, node.col_offset  # type: ignore[attr-defined]
        end, end_col = node.end_lineno, node.end_col_offset  # type: ignore[attr-defined]
        if end is None or not 0 < line <= end <= len(self.lines):
            return ast.unparse(node)
        raw = [self.lines[i].encode("utf-8") for i in range(line - 1, end)]
        if line == end:
            return raw[0][col:end_col].decode("utf-8", errors="replace")
        raw[0], raw[-1] = raw[0][col:], raw[-1][:end_col]
        return "\n".join(r.decode("utf-8", errors="replace") for r in raw)

    def atom(self, node: ast.AST) -> str:
        """The node's text, in parentheses where a trailing `.attr` would bind to less than it."""
        text = self.source(node)
        if is_atom(node):
            return text
        return f"({text})"


# ---- applying ------------------------------------------------------------------------------------


def apply_edits(source: str, edits: Iterable[Edit]) -> str:
    """`source` with the (non-overlapping) edits applied, last first."""
    lines = source.split("\n")
    for e in sorted(edits, key=lambda e: (e.line, e.col), reverse=True):
        if (
            not (1 <= e.line <= e.end_line <= len(lines))
            or e.col > len(lines[e.line - 1])
            or e.end_col > len(lines[e.end_line - 1])
        ):
            raise ValueError(f"edit {e} is outside the source")
        head = lines[e.line - 1][: e.col]
        tail = lines[e.end_line - 1][e.end_col :]
        lines[e.line - 1 : e.end_line] = (head + e.text + tail).split("\n")
    return "\n".join(lines)


def _overlaps(a: Edit, b: Edit) -> bool:
    return not ((a.end_line, a.end_col) <= (b.line, b.col) or (b.end_line, b.end_col) <= (a.line, a.col))


def parses(source: str) -> bool:
    """The source parses as a cell (IPython syntax rewritten) or as plain Python (a `.py` file
    whose continuation line starts with `%`, which the cell rewrite would take for a magic)."""
    prep = prepare(source)
    if not prep.is_python:
        return True
    for text in (prep.python, source):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ast.parse(text)
            return True
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
    return False


@dataclass
class FixResult:
    source: str
    applied: list[Finding] = field(default_factory=list)
    broke_parsing: list[Finding] = field(default_factory=list)  # dropped: the result did not parse

    @property
    def changed(self) -> bool:
        return bool(self.applied)


def wanted(f: Finding, unsafe: bool) -> bool:
    return f.fix is not None and (f.fix.applicability == "safe" or unsafe)


def fix_source(source: str, lint: Callable[[str], list[Finding]], *, unsafe: bool = False) -> FixResult:
    """Apply the fixes `lint(source)` offers, round after round, until none is left to apply.
    A source that did not parse to begin with is left as it is."""
    result = FixResult(source)
    if not parses(source):
        return result
    refused: set[tuple[str, tuple[Edit, ...]]] = set()  # fixes that did not fit or broke parsing
    seen = {source}
    for _ in range(MAX_ROUNDS):
        candidates = [
            f
            for f in lint(result.source)
            if wanted(f, unsafe) and (f.rule, f.fix.edits) not in refused  # type: ignore[union-attr]
        ]
        if not candidates:
            break
        chosen: list[Edit] = []
        progress = False
        # bottom-up, so an applied fix never moves the positions of the ones still to apply
        for f in sorted(candidates, key=lambda f: max((e.line, e.col) for e in f.fix.edits), reverse=True):  # type: ignore[union-attr]
            edits = f.fix.edits  # type: ignore[union-attr]
            if any(_overlaps(e, c) for e in edits for c in chosen):
                continue  # the next round, against the source as it is then
            try:
                attempt = apply_edits(result.source, edits)
            except ValueError:
                refused.add((f.rule, edits))
                continue
            if attempt == result.source:
                refused.add((f.rule, edits))
                continue
            if not parses(attempt):
                refused.add((f.rule, edits))
                result.broke_parsing.append(f)
                continue
            result.source = attempt
            result.applied.append(f)
            chosen.extend(edits)
            progress = True
        if not progress or result.source in seen:
            break  # nothing applied, or a cycle (a fix that undoes another): stop here
        seen.add(result.source)
    return result


def unified_diff(old: str, new: str, name: str) -> str:
    import difflib

    def lines(text: str) -> list[str]:
        return [ln if ln.endswith("\n") else ln + "\n" for ln in text.splitlines(keepends=True)]

    return "".join(difflib.unified_diff(lines(old), lines(new), f"a/{name}", f"b/{name}"))


def preview(code: str, fix: Fix) -> list[str]:
    """The lines a fix changes in `code`, as `-`/`+` lines: what a frontend that cannot edit
    shows instead of an Apply button. Empty when the edits do not fit `code`."""
    import difflib

    try:
        new = apply_edits(code, fix.edits)
    except (IndexError, ValueError):
        return []
    out = []
    for line in difflib.unified_diff(code.split("\n"), new.split("\n"), n=0, lineterm=""):
        if line.startswith(("---", "+++", "@@")):
            continue
        out.append(line)
    return out


def fix_of(title: str, edits: Sequence[Edit], applicability: str = "safe") -> Fix:
    return Fix(title, tuple(edits), applicability)  # type: ignore[arg-type]
