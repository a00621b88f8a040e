"""`torchmagic check --fix`: apply the findings' fixes to `.py` files and notebook cells.

A `.py` file is rewritten as text (its encoding mark and line endings kept). A notebook goes
through nbformat, read without validation (which would add ids to cells that have none) and
written by the writer of its own version: the outputs, metadata and cell ids stay as they were
and only the sources of fixed cells change, so a notebook Jupyter saved comes back byte for
byte apart from those sources.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .lint.context import Carry
from .lint.engine import lint
from .lint.fixes import fix_source, unified_diff
from .report import Finding

BOM = "\ufeff"


@dataclass
class FileFix:
    """What fixing one file did (or, with `write=False`, would do)."""

    path: str
    applied: list[tuple[str, Finding]] = field(default_factory=list)  # (unit label, finding)
    dropped: list[tuple[str, Finding]] = field(default_factory=list)  # fixes that broke parsing
    diff: str = ""
    notes: list[str] = field(default_factory=list)  # for stderr: a notebook whose layout changed
    text: str | None = None  # the new file text (None: unchanged)


def fix_file(
    path: str,
    text: str,
    *,
    select: Sequence[str] | None = None,
    ignore: Sequence[str] | None = None,
    unsafe: bool = False,
) -> FileFix:
    """Fix `text`, the contents of `path` (decoded, with a BOM if the file has one)."""
    if path.endswith(".ipynb"):
        return _fix_notebook(path, text, select, ignore, unsafe)
    bom = text.startswith(BOM)
    source = text[1:] if bom else text
    result = fix_source(
        source, lambda s: lint(s, path=path, select=select, ignore=ignore).resolved(), unsafe=unsafe
    )
    out = FileFix(path)
    out.applied = [(path, f) for f in result.applied]
    out.dropped = [(path, f) for f in result.broke_parsing]
    if result.source != source:
        out.text = (BOM if bom else "") + result.source
        out.diff = unified_diff(source, result.source, path)
    return out


def _fix_notebook(
    path: str, text: str, select: Sequence[str] | None, ignore: Sequence[str] | None, unsafe: bool
) -> FileFix:
    import nbformat

    nb = nbformat.reader.reads(text.lstrip(BOM))
    major = nb.get("nbformat", 4)
    cells = nb.get("cells") if major >= 4 else (nb.get("worksheets") or [{}])[0].get("cells")
    key = "source" if major >= 4 else "input"
    code = [(i, c) for i, c in enumerate(cells or [], start=1) if c.get("cell_type") == "code"]

    def source(cell: Any) -> str:
        src = cell.get(key, "")
        return "".join(src) if isinstance(src, list) else str(src)

    # First the notebook as it is: a model moved to the GPU in cell 9 makes the findings of
    # cell 4 GPU findings, as `torchmagic check` reports them.
    carry: Carry | None = Carry()
    accelerator = False
    document = "\n".join(source(c) for _, c in code if source(c).strip())
    for _, cell in code:
        if source(cell).strip():
            r = lint(source(cell), select=select, ignore=ignore, carry=carry, document=document)
            carry, accelerator = r.carry, accelerator or r.accelerator
    out = FileFix(path)
    carry = Carry()
    diffs = []
    for i, cell in code:
        src = source(cell)
        if not src.strip():
            continue
        label = f"{path}#cell{i}"
        before = carry

        def check(s: str, before: Carry | None = before, label: str = label) -> list[Finding]:
            return lint(
                s, path=label, select=select, ignore=ignore, carry=before, document=document
            ).resolved(accelerator)

        result = fix_source(src, check, unsafe=unsafe)
        out.applied += [(label, f) for f in result.applied]
        out.dropped += [(label, f) for f in result.broke_parsing]
        carry = lint(result.source, select=select, ignore=ignore, carry=before).carry
        if result.source != src:
            cell[key] = result.source
            diffs.append(unified_diff(src, result.source, label))
    if not diffs:
        return out
    writer = nbformat.versions[major]
    original = writer.writes_json(nbformat.reader.reads(text.lstrip(BOM))) + "\n"
    if original != text.lstrip(BOM):
        out.notes.append(f"{path}: note: written in Jupyter's own layout (the file was in another)")
    out.text = writer.writes_json(nb) + "\n"
    out.diff = "".join(diffs)
    return out
