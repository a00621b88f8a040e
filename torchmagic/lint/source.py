"""Turn a cell as the user typed it into Python that `ast` can parse, line for line.

IPython syntax (`%magic`, `!cmd`, `x = !cmd`, `obj?`, `%%cell_magic`) is rewritten in place so
that every line keeps its number: a finding on line 12 is on the editor's line 12. We do not
import IPython here: linting must work (and stay fast) in the CLI, where IPython is not needed.
"""

from __future__ import annotations

import ast
import re
import warnings
from dataclasses import dataclass, field

# Cell magics whose body is ordinary Python that runs in the user namespace.
PYTHON_BODY_CELL_MAGICS = frozenset(
    {"torchcheck", "time", "timeit", "capture", "prun", "debug", "cprofile", "memit", "lprun"}
)

_SUPPRESS = re.compile(r"#\s*torchcheck:\s*ignore(-cell)?(?:\[([A-Za-z0-9_,\s]*)\])?")
_ASSIGN_MAGIC = re.compile(r"^(\s*[\w.,\s\[\]()*]+?\s*=\s*)[%!]")
_MAGIC_AFTER_EQ = re.compile(r"=\s*[%!]")  # cheap filter before the backtracking _ASSIGN_MAGIC
_HELP = re.compile(r"^\s*[\w.\[\]()]*\?\??\s*$|^\s*\?\??[\w.]+\s*$")

ALL = "*"


@dataclass
class Suppressions:
    """Which rules are silenced where: `lines[n]` holds rule IDs (or `*`) for line n."""

    lines: dict[int, set[str]] = field(default_factory=dict)
    cell: set[str] = field(default_factory=set)

    def silenced(self, rule: str, line: int | None) -> bool:
        if _matches(self.cell, rule):
            return True
        return line is not None and _matches(self.lines.get(line, ()), rule)


def _matches(ids: set[str] | tuple, rule: str) -> bool:
    return any(i == ALL or rule.startswith(i) for i in ids)


@dataclass
class PreparedSource:
    """Python text with the user's line numbers, plus what the comments suppress."""

    python: str
    lines: list[str]
    suppressions: Suppressions
    is_python: bool = True


def prepare(code: str) -> PreparedSource:
    """Rewrite IPython syntax into same-numbered Python and collect suppression comments."""
    lines = code.splitlines()
    sup = _suppressions(lines)
    out = list(lines)
    is_python = True
    verbatim = False
    if lines and lines[0].lstrip().startswith("%%"):
        magic = lines[0].lstrip()[2:].split()
        name = magic[0] if magic else ""
        if name == "writefile" and magic[-1].endswith(".py"):
            verbatim = True  # the body is the Python file it writes: linted as that file
        elif name not in PYTHON_BODY_CELL_MAGICS:
            is_python = False
        out[0] = "#" + lines[0]
    if is_python and not verbatim and ("%" in code or "!" in code or "?" in code):
        _rewrite_line_magics(out)
    return PreparedSource("\n".join(out) + "\n", lines, sup, is_python)


def parse_cell(code: str) -> ast.Module | None:
    """The cell (or file) as an AST with the user's line numbers; None if it is not Python (a
    `%%bash` cell) or does not parse. Its own SyntaxWarnings are not shown: they are the user's."""
    try:
        prep = prepare(code)
        if not prep.is_python:
            return None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(prep.python)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _rewrite_line_magics(out: list[str]) -> None:
    """Replace magic/shell/help lines by neutral Python with the same indentation."""
    continued = False
    for i, line in enumerate(out):
        stripped = line.lstrip()
        if continued:
            # The continuation lines of a magic written with trailing backslashes.
            continued = line.rstrip().endswith("\\")
            out[i] = "#" + line
            continue
        if not stripped or stripped[0] == "#":
            continue
        indent = line[: len(line) - len(stripped)]
        if stripped[0] in "%!":
            out[i] = f"{indent}pass  #{stripped}"
            continued = line.rstrip().endswith("\\")
            if continued:
                out[i] = f"{indent}pass"
            continue
        m = _ASSIGN_MAGIC.match(line) if "=" in line and _MAGIC_AFTER_EQ.search(line) else None
        if m and "==" not in m.group(1) and not _inside_string(m.group(1)):
            out[i] = m.group(1) + "None"
            continued = line.rstrip().endswith("\\")
            continue
        if stripped.endswith("?") and _HELP.match(line):
            out[i] = f"{indent}pass"


def _inside_string(prefix: str) -> bool:
    return prefix.count('"') % 2 == 1 or prefix.count("'") % 2 == 1


def _suppressions(lines: list[str]) -> Suppressions:
    sup = Suppressions()
    for n, line in enumerate(lines, start=1):
        if "torchcheck:" not in line:
            continue
        for m in _SUPPRESS.finditer(line):
            ids = {p.strip().upper() for p in (m.group(2) or "").split(",") if p.strip()}
            if m.group(1):
                sup.cell |= ids or {ALL}
            else:
                sup.lines.setdefault(n, set()).update(ids or {ALL})
    return sup
