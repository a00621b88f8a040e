"""The one data model: findings and records that join in a `Report`.

Renderers (HTML, widget, rich, the sidebar comm) and the CLI read these; nothing here knows
how it is shown.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import Any, Literal

Severity = Literal["error", "warning", "info"]
Evidence = Literal["static", "live", "runtime"]

SEVERITY_ORDER: dict[str, int] = {"error": 0, "warning": 1, "info": 2}

_GETTERS: dict[type, tuple[tuple[str, ...], Any]] = {}


def record_dict(record: Any) -> dict[str, Any]:
    """A record's fields as a JSON-ready dict (lists shared with the record, not copied).
    `dataclasses.asdict` deep-copies through `copy.deepcopy`, ~10 µs a record: too slow for
    10,000 tensors after every cell."""
    tp = type(record)
    entry = _GETTERS.get(tp)
    if entry is None:
        names = tuple(f.name for f in fields(record))
        entry = _GETTERS[tp] = (names, attrgetter(*names))
    names, getter = entry
    return dict(zip(names, getter(record)))


def human_bytes(n: float) -> str:
    """Binary units, as the sidebar shows them: 12.3 KiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def _first_changed(rows: list[Any], limit: int) -> list[Any]:
    """At most `limit` rows, those the cell created or changed first, order kept otherwise."""
    if len(rows) <= limit:
        return rows
    changed = [r for r in rows if getattr(r, "changed", False)]
    if len(changed) >= limit:
        return changed[:limit]
    keep = {id(r) for r in changed}
    rest = [r for r in rows if id(r) not in keep][: limit - len(changed)]
    keep |= {id(r) for r in rest}
    return [r for r in rows if id(r) in keep]


@dataclass(frozen=True)
class Edit:
    """Replace the text from (line, col) to (end_line, end_col) with `text`. Lines are 1-based
    as the editor shows them (a `%%torchcheck` first line is line 1), columns 0-based
    characters (not bytes) within the line."""

    line: int
    col: int
    end_line: int
    end_col: int
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "col": self.col,
            "end_line": self.end_line,
            "end_col": self.end_col,
            "text": self.text,
        }


Applicability = Literal["safe", "unsafe"]


@dataclass(frozen=True)
class Fix:
    """Text edits that resolve a finding. `safe`: the program computes the same thing (applied
    by `torchmagic check --fix`); `unsafe`: likely right, but it changes behaviour in some
    cases (applied only with `--unsafe-fixes`, otherwise shown as a suggestion)."""

    title: str
    edits: tuple[Edit, ...]
    applicability: Applicability = "safe"

    def to_dict(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "applicability": self.applicability,
            "edits": [e.to_dict() for e in self.edits],
        }


@dataclass(frozen=True)
class Finding:
    """One problem: a rule that fired at a cell line or on a live object."""

    rule: str
    name: str
    severity: Severity
    line: int | None
    col: int | None
    message: str
    hint: str
    object: str | None = None
    source: Evidence = "static"
    # every kind of evidence behind this finding (the merge of a static finding and its live
    # confirmation has both), and the sentences the other evidence added
    evidence: tuple[Evidence, ...] = ()
    notes: tuple[str, ...] = ()
    fix: Fix | None = None  # edits that resolve it, when one is clearly right

    def to_dict(self) -> dict[str, Any]:
        d = record_dict(self)
        d["evidence"] = list(self.evidence or (self.source,))
        d["notes"] = list(self.notes)
        d["fix"] = self.fix.to_dict() if self.fix is not None else None
        return d


@dataclass(slots=True)
class SyncRecord:
    """CPU-GPU synchronisations observed at one cell line."""

    line: int
    count: int
    seconds: float
    ops: dict[str, int] = field(default_factory=dict)
    code: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "count": self.count,
            "seconds": self.seconds,
            "ops": dict(self.ops),
            "code": self.code,
        }


@dataclass(slots=True)
class TensorRecord:
    """Metadata of one live tensor; never its values."""

    name: str
    shape: tuple[int, ...]  # as read (a torch.Size is a tuple); lists in to_dict()
    dtype: str
    device: str
    nbytes: int
    requires_grad: bool
    grad_fn: str | None
    is_view: bool
    changed: bool
    strides: tuple[int, ...] | None = None
    contiguous: bool | None = None
    kind: str = "tensor"
    storage_key: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d = record_dict(self)
        d["shape"] = list(self.shape)
        if self.strides is not None:
            d["strides"] = list(self.strides)
        return d


@dataclass(slots=True)
class ModuleRecord:
    """Summary of one live `nn.Module` in the namespace."""

    name: str
    type: str
    params: int
    trainable: int
    devices: list[str]
    dtypes: list[str]
    training: bool
    nbytes: int
    changed: bool = False
    submodules: int = 0

    def to_dict(self) -> dict[str, Any]:
        return record_dict(self)


@dataclass(slots=True)
class ShapeRecord:
    """Forward calls of one submodule during the cell, in first-call order."""

    module: str
    type: str
    calls: int
    inputs: list[list[int]]
    outputs: list[list[int]]
    device: str | None
    dtype: str | None = None
    depth: int = 0

    def to_dict(self) -> dict[str, Any]:
        return record_dict(self)


@dataclass(slots=True)
class CompileRecord:
    """One function (or module) that `torch.compile` compiled while the cell ran: what
    Dynamo did to it in this cell. A graph break splits a call into several graphs with
    Python in between; a recompilation compiles the function again for new inputs."""

    name: str  # as the user calls it: `step`, `model`, `Net.forward`
    location: str  # where it is defined: "line 3", "cell [4], line 2", "model.py:12", "torch.nn"
    line: int | None  # the checked cell's line that compiled it first in this cell
    graphs: int = 0  # graphs compiled in this cell
    breaks: int = 0  # graph breaks Dynamo met while compiling it in this cell
    recompiles: int = 0  # compilations again for new inputs, in this cell
    compile_s: float = 0.0  # time spent compiling it in this cell (forward and backward)
    limit_hit: bool = False  # the recompile limit was reached: new inputs run uncompiled
    reasons: list[str] = field(default_factory=list)  # why it recompiled, in user terms

    def to_dict(self) -> dict[str, Any]:
        d = record_dict(self)
        d["reasons"] = list(self.reasons)
        return d


@dataclass
class MemoryRecord:
    device: str = "cpu"
    allocated_before: int | None = None
    allocated_after: int | None = None
    peak: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return record_dict(self)


@dataclass
class Report:
    """Everything torchmagic learnt about one checked cell."""

    cell_id: str | None = None
    execution_count: int | None = None
    elapsed_s: float = 0.0
    sync_s: float = 0.0
    findings: list[Finding] = field(default_factory=list)
    syncs: list[SyncRecord] = field(default_factory=list)
    tensors: list[TensorRecord] = field(default_factory=list)
    modules: list[ModuleRecord] = field(default_factory=list)
    shape_trace: list[ShapeRecord] = field(default_factory=list)
    memory: MemoryRecord = field(default_factory=MemoryRecord)
    compile: list[CompileRecord] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    check_s: float = 0.0
    finished: float = 0.0  # wall-clock time the report was completed (for "most recent")
    # the cell's source as it was checked: what finding lines and fix edits refer to (a
    # frontend applies a fix only while the cell still reads exactly this)
    code: str = ""

    def sorted_findings(self) -> list[Finding]:
        return sorted(
            self.findings,
            key=lambda f: (
                f.line if f.line is not None else 10**9,
                SEVERITY_ORDER.get(f.severity, 3),
                f.rule,
            ),
        )

    def counts(self) -> dict[str, int]:
        out = {"error": 0, "warning": 0, "info": 0}
        for f in self.findings:
            out[f.severity] = out.get(f.severity, 0) + 1
        return out

    def compile_s(self) -> float:
        """Seconds spent compiling (`torch.compile`) in this cell."""
        return sum(c.compile_s for c in self.compile)

    def sync_count(self) -> int:
        return sum(s.count for s in self.syncs)

    def memory_by_device(self) -> dict[str, int]:
        """Bytes of live tensors per device, each storage counted once."""
        totals: dict[str, int] = {}
        seen: set[str] = set()
        for t in self.tensors:
            if t.storage_key is not None:
                if t.storage_key in seen:
                    continue
                seen.add(t.storage_key)
            totals[t.device] = totals.get(t.device, 0) + t.nbytes
        return totals

    def to_dict(self, max_rows: int | None = None) -> dict[str, Any]:
        """The contract's JSON shape. With `max_rows`, the tensors, modules and shape trace
        keep that many rows (rows the cell changed first) and `truncated` gives the counts."""
        tensors, modules, trace = self.tensors, self.modules, self.shape_trace
        truncated: dict[str, int] = {}
        if max_rows is not None:
            for key, rows in (("tensors", tensors), ("modules", modules), ("shape_trace", trace)):
                if len(rows) > max_rows:
                    truncated[key] = len(rows)
            tensors = _first_changed(tensors, max_rows)
            modules = _first_changed(modules, max_rows)
            trace = trace[:max_rows]
        out = {
            "cell_id": self.cell_id,
            "execution_count": self.execution_count,
            "elapsed_s": self.elapsed_s,
            "sync_s": self.sync_s,
            "check_s": self.check_s,
            "findings": [f.to_dict() for f in self.sorted_findings()],
            "syncs": [s.to_dict() for s in self.syncs],
            "tensors": [t.to_dict() for t in tensors],
            "modules": [record_dict(m) for m in modules],
            "shape_trace": [record_dict(s) for s in trace],
            "memory": self.memory.to_dict(),
            "compile": [c.to_dict() for c in self.compile],
            "memory_by_device": self.memory_by_device(),
            "errors": list(self.errors),
            "code": self.code,
        }
        if truncated:
            out["truncated"] = truncated
        return out
