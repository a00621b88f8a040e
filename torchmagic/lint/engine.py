"""cell source -> Findings: prepare the text, parse once, walk once with every rule."""

from __future__ import annotations

import ast
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .. import catalog
from ..merge import merge_findings
from ..report import Finding
from .context import Carry, Context
from .registry import static_checks
from .source import prepare
from .walker import Walker


@dataclass
class LintResult:
    findings: list[Finding] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # rules that crashed (a torchmagic bug)
    carry: Carry | None = None  # for the next cell of the same notebook


def check_source(
    code: str,
    namespace: dict[str, Any] | None = None,
    *,
    path: str | None = None,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
) -> list[Finding]:
    """Lint one cell or file. Never raises on bad input: a syntax error gives one TM000."""
    return lint(code, namespace, path=path, select=select, ignore=ignore).findings


def lint(
    code: str,
    namespace: dict[str, Any] | None = None,
    *,
    path: str | None = None,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    carry: Carry | None = None,
) -> LintResult:
    """`check_source`, also telling which rules failed internally. `carry` is what earlier
    cells of the same notebook established (imports, classes, what names hold)."""
    prep = prepare(code)
    if not prep.is_python:
        return LintResult(carry=carry)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(prep.python, filename=path or "<cell>")
    except SyntaxError as e:
        tree = _parse_unrewritten(code, prep.python, path)
        if tree is None:
            return LintResult([syntax_error(e.msg, e.lineno, e.offset)], carry=carry)
    except (ValueError, RecursionError, MemoryError) as e:
        what = str(e) if isinstance(e, ValueError) else "source nested too deeply to parse"
        return LintResult([syntax_error(what, None, None)], carry=carry)
    checks = static_checks(select, ignore)
    ctx = Context(prep.lines, namespace)
    if carry is not None:
        carry.into(ctx)
    try:
        Walker(ctx, checks).run(tree)
    except RecursionError:
        return LintResult([syntax_error("expression nested too deeply to analyse", None, None)], carry=carry)
    found = [f for f in ctx.findings if not prep.suppressions.silenced(f.rule, f.line)]
    # Only a caller that passed a carry (a notebook, cell after cell) pays for the next one.
    return LintResult(merge_findings(found), ctx.errors, Carry.of(ctx) if carry is not None else None)


def _parse_unrewritten(code: str, rewritten: str, path: str | None) -> ast.Module | None:
    """Plain Python that the IPython rewrite broke (a continuation line starting with `%` or
    `!=` inside brackets looks like a magic): parse the text as written."""
    if rewritten.rstrip("\n") == code.rstrip("\n"):
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(code, filename=path or "<cell>")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def syntax_error(msg: str, line: int | None, col: int | None) -> Finding:
    return SYNTAX_ERROR.finding(
        f"The cell could not be parsed: {msg}.",
        "Fix the syntax error; no other rule ran on this cell.",
        line=line,
        col=(col - 1) if col else None,
    )


SYNTAX_ERROR = catalog.RULES["TM000"]
