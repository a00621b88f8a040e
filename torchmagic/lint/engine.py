"""cell source -> Findings: prepare the text, parse once, walk once with every rule."""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
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
    # findings that speak of a GPU about values whose place is unknown: they stand only where
    # the code has a path to an accelerator (this source, or the rest of its notebook)
    gpu_findings: list[Finding] = field(default_factory=list)
    accelerator: bool = False  # this source (or the hint it was given) moves something to one
    # GPU findings of code that runs as the source runs (outside functions and classes): a
    # notebook cell's top level runs before the later cells, so only this cell and earlier
    # ones can have put its values on an accelerator
    top_level_gpu_findings: list[Finding] = field(default_factory=list)

    def resolved(self, accelerator: bool | None = None) -> list[Finding]:
        """The findings, with the GPU ones kept when there is an accelerator path (`accelerator`
        overrides this source's own answer, e.g. with the whole notebook's, for the code in
        functions, which a later cell may call)."""
        keep = self.accelerator if accelerator is None else accelerator
        keep_top = self.accelerator and accelerator is not False
        kept = [
            *(self.gpu_findings if keep else ()),
            *(self.top_level_gpu_findings if keep_top else ()),
        ]
        return merge_findings([*self.findings, *kept]) if kept else self.findings


def check_source(
    code: str,
    namespace: dict[str, Any] | None = None,
    *,
    path: str | None = None,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
) -> list[Finding]:
    """Lint one cell or file. Never raises on bad input: a syntax error gives one TM000 (and
    the lines that do parse are still checked)."""
    return lint(code, namespace, path=path, select=select, ignore=ignore).resolved()


def lint(
    code: str,
    namespace: dict[str, Any] | None = None,
    *,
    path: str | None = None,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    carry: Carry | None = None,
    post_run: bool = False,
    accelerator_hint: bool = False,
    document: str | None = None,
    project_cuda_only: bool = False,
) -> LintResult:
    """`check_source`, also telling which rules failed internally. `carry` is what earlier
    cells of the same notebook established (imports, classes, what names hold); `post_run`:
    `namespace` holds what this source bound when it ran (a checked cell, after it ran);
    `accelerator_hint`: something outside this source already uses an accelerator;
    `document`: the whole notebook the source is a cell of (fixes look there for other uses);
    `project_cuda_only`: the project the source belongs to runs on CUDA only."""
    prep = prepare(code)
    if not prep.is_python:
        return LintResult(carry=carry)
    broken: list[Finding] = []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(prep.python, filename=path or "<cell>")
    except SyntaxError as e:
        tree = _parse_unrewritten(code, prep.python, path)
        if tree is None:
            broken = [syntax_error(e.msg, e.lineno, e.offset, _line_text(prep.python, e.lineno))]
            tree = _parse_around_errors(prep.python, path)
            if tree is None:
                return LintResult(broken, carry=carry)
    except (ValueError, RecursionError, MemoryError) as e:
        what = str(e) if isinstance(e, ValueError) else "source nested too deeply to parse"
        return LintResult([syntax_error(what, None, None)], carry=carry)
    checks = static_checks(select, ignore)
    ctx = Context(prep.lines, namespace, post_run=post_run, accelerator_hint=accelerator_hint)
    if document is not None:
        ctx.use_document(document)
    ctx.project_cuda_only = project_cuda_only
    if carry is not None:
        carry.into(ctx)
        ctx.feeds_later_cells = True
    try:
        Walker(ctx, checks).run(tree)
    except RecursionError:
        return LintResult([syntax_error("expression nested too deeply to analyse", None, None)], carry=carry)

    editable = _editable_lines(code, prep.python)

    def shown(findings: list[Finding]) -> list[Finding]:
        kept = (f for f in findings if not prep.suppressions.silenced(f.rule, f.line))
        return merge_findings(_checked_fix(f, editable) for f in kept)

    return LintResult(
        shown([*broken, *ctx.findings]),
        ctx.errors,
        # Only a caller that passed a carry (a notebook, cell after cell) pays for the next one.
        Carry.of(ctx) if carry is not None else None,
        shown(ctx.gpu_findings),
        ctx.accelerator_seen or accelerator_hint or (carry is not None and carry.accelerator),
        shown(ctx.top_level_gpu_findings),
    )


# Characters `str.splitlines` breaks lines at but Python's tokenizer does not: with one of
# them in the source, AST line numbers and the lines fixes are written against could differ.
_ODD_BREAKS = frozenset("\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")


def _editable_lines(code: str, python: str) -> frozenset[int] | None:
    """The lines (1-based) that parse exactly as written, where a fix's positions are the
    user's positions; None when there are none to trust (odd line breaks, a lone CR)."""
    if _ODD_BREAKS.intersection(code) or "\r" in code.replace("\r\n", ""):
        return None
    raw = code.replace("\r\n", "\n").split("\n")
    return frozenset(i for i, (a, b) in enumerate(zip(raw, python.split("\n")), start=1) if a == b)


def _checked_fix(f: Finding, editable: frozenset[int] | None) -> Finding:
    """`f` without its fix when an edit touches a line the IPython rewrite changed."""
    if f.fix is None:
        return f
    if editable is not None and all(
        n in editable for e in f.fix.edits for n in range(e.line, e.end_line + 1)
    ):
        return f
    return replace(f, fix=None)


MAX_REPAIRS = 20


def _parse_around_errors(python: str, path: str | None) -> ast.Module | None:
    """A tree of what parses when the lines that do not are blanked: an exercise cell with
    `lr = ` or `criterion = # TODO` still gets its other lines checked. A broken block header
    becomes `if True:` so that its body stays a body; line numbers never move."""
    lines = python.split("\n")
    for _ in range(MAX_REPAIRS):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return ast.parse("\n".join(lines), filename=path or "<cell>")
        except SyntaxError as e:
            n = (e.lineno or 0) - 1
            if not 0 <= n < len(lines) or lines[n].strip() in ("pass", "if True:"):
                return None
            line = lines[n]
            indent = line[: len(line) - len(line.lstrip())]
            following = next((ln for ln in lines[n + 1 :] if ln.strip()), "")
            opens_block = len(following) - len(following.lstrip()) > len(indent)
            lines[n] = indent + ("if True:" if opens_block else "pass")
        except (ValueError, RecursionError, MemoryError):
            return None
    return None


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


# `x.cuda(async=True)`: the keyword PyTorch renamed when `async` became reserved (Python 3.7)
_ASYNC_KEYWORD = re.compile(r"[(,]\s*async\s*=(?!=)")


# the blanks of a course exercise: `< YOUR CODE HERE >`, `lr = ` or `loss_fn = # TODO`
_PLACEHOLDER = re.compile(r"<[^<>]*\b(?:your|code|here|todo|implement|fill)\b[^<>]*>", re.IGNORECASE)
_EMPTY_ASSIGNMENT = re.compile(r"^\s*[\w.]+(?:\[[^\]]*\])?\s*=\s*(?:#.*)?$")


def syntax_error(msg: str, line: int | None, col: int | None, text: str = "") -> Finding:
    where = f"Line {line}" if line else "This code"
    blank = _PLACEHOLDER.search(text)
    if blank is not None or _EMPTY_ASSIGNMENT.match(text):
        shown = blank.group(0) if blank is not None else text.strip()
        if len(shown) > 40:
            shown = shown[:34].rstrip() + " … >"
        return SYNTAX_ERROR.finding(
            f"{where} is an exercise blank (`{shown}`): the code does not parse until it is filled in.",
            "Fill in the blank; the lines that parse were still checked.",
            line=line,
            col=(col - 1) if col else None,
            severity="info",
        )
    if _ASYNC_KEYWORD.search(text):
        return SYNTAX_ERROR.finding(
            f"{where} does not parse as Python: `async` is a reserved word since Python 3.7, so"
            " `async=True` is no longer an argument.",
            "PyTorch renamed it `non_blocking`: `.cuda(non_blocking=True)`, `.to(device,"
            " non_blocking=True)`; the lines that parse were still checked.",
            line=line,
            col=(col - 1) if col else None,
        )
    return SYNTAX_ERROR.finding(
        f"{where} does not parse as Python: {msg}.",
        "Fix the syntax error; the lines that parse were still checked.",
        line=line,
        col=(col - 1) if col else None,
    )


def _line_text(source: str, line: int | None) -> str:
    lines = source.splitlines()
    return lines[line - 1] if line and 0 < line <= len(lines) else ""


SYNTAX_ERROR = catalog.RULES["TM000"]
