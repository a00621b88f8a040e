"""The sidebar's TypeScript types (labextension/src/types.ts) against the report contract.

Everything on the Python side is derived from `torchmagic/report.py`: the fields and
annotations of its dataclasses and the keys `Report.to_dict()` produces. A field added to a
record (or renamed, or retyped) without the matching change in `types.ts` fails here, naming
the field. The correspondence:

    int, float -> number      str, Literal['a', 'b'] -> string (or those literals)
    bool -> boolean            list[X], tuple[X, ...] -> X[]
    dict[str, V] -> { [key: string]: V }       a record dataclass R -> IR
    X | None -> X | null, and the TS property is optional (`name?:`)

A Python field with a default may be missing from an older kernel's JSON, so its TS
property must be optional too; a field without a default may be either.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import re
import types
import typing
from pathlib import Path

import pytest

from torchmagic import report as report_module
from torchmagic.report import (
    CompileRecord,
    Edit,
    Finding,
    Fix,
    MemoryRecord,
    ModuleRecord,
    Report,
    ShapeRecord,
    SyncRecord,
    TensorRecord,
)

TYPES_TS = Path(__file__).resolve().parents[1] / "labextension" / "src" / "types.ts"

RECORDS = [
    Finding,
    Fix,
    Edit,
    SyncRecord,
    TensorRecord,
    ModuleRecord,
    ShapeRecord,
    MemoryRecord,
    CompileRecord,
]

# TS properties that run ahead of the kernel: declared in types.ts (the panel already renders
# them) before report.py has the field. Once report.py gains the field, the test below fails
# and asks for the entry to be removed, so from then on the field is checked like any other.
# Example: ("IFinding", "fix"): "str | None, the autofix".
PENDING_IN_PYTHON: dict[tuple[str, str], str] = {}

# `Report.to_dict()` keys the sidebar does not find in `report`: views/comm.py moves
# `truncated` to the message around it (`IReportMessage.truncated`).
MOVED_TO_MESSAGE = {"truncated"}


# ---- a small parser for the TS declarations in types.ts ---------------------------------------
class TSProperty(typing.NamedTuple):
    name: str
    optional: bool
    type: str


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def _split_top(text: str, seps: str) -> list[str]:
    """Split at separator characters outside brackets, braces, parentheses and quotes."""
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        elif depth == 0 and ch in seps:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _block(text: str, open_at: int) -> tuple[str, int]:
    """The text inside the braces that open at `open_at`, and the index after the close."""
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[open_at + 1 : i], i + 1
    raise ValueError("unbalanced braces in types.ts")


def _properties(body: str) -> dict[str, TSProperty]:
    props: dict[str, TSProperty] = {}
    for member in _split_top(body, ";\n,"):
        m = re.fullmatch(r"(readonly\s+)?([A-Za-z_$][\w$]*)(\?)?\s*:\s*(.+)", member, flags=re.S)
        if m is None:
            raise ValueError(f"cannot parse the TS member {member!r}")
        props[m.group(2)] = TSProperty(m.group(2), bool(m.group(3)), " ".join(m.group(4).split()))
    return props


class TSModule:
    def __init__(self, source: str) -> None:
        text = _strip_comments(source)
        self.interfaces: dict[str, dict[str, TSProperty]] = {}
        for m in re.finditer(r"export\s+interface\s+(\w+)(?:\s+extends\s+[\w\s,<>]+)?\s*\{", text):
            body, _ = _block(text, m.end() - 1)
            self.interfaces[m.group(1)] = _properties(body)
        self.aliases: dict[str, str] = {}
        for m in re.finditer(r"export\s+type\s+(\w+)\s*=\s*([^;]+);", text):
            self.aliases[m.group(1)] = " ".join(m.group(2).split())

    def canonical(self, ts_type: str, *, literals: bool = True) -> frozenset[str]:
        """A TS type as a set of union members in one spelling: aliases expanded, `T[]` and
        `Array<T>` alike, `{ [k: string]: V }` as `{[string]: V}`; with `literals=False`
        string literals read as `string`, at any depth."""
        out: set[str] = set()
        for member in _split_top(ts_type, "|"):
            out |= self._member(member, literals)
        return frozenset(out)

    def _member(self, t: str, literals: bool) -> set[str]:
        t = t.strip()
        if t.endswith("[]"):
            inner = t[:-2].strip()
            if inner.startswith("(") and inner.endswith(")"):
                inner = inner[1:-1]
            return {_array(self.canonical(inner, literals=literals))}
        m = re.fullmatch(r"(?:Readonly)?Array<(.+)>", t)
        if m:
            return {_array(self.canonical(m.group(1), literals=literals))}
        m = re.fullmatch(r"\{\s*\[\s*\w+\s*:\s*string\s*\]\s*:\s*(.+?)\s*;?\s*\}", t, flags=re.S)
        if m is None:
            m = re.fullmatch(r"Record<\s*string\s*,\s*(.+)>", t)
        if m:
            return {_map(self.canonical(m.group(1), literals=literals))}
        if t.startswith("(") and t.endswith(")"):
            return set(self.canonical(t[1:-1], literals=literals))
        if t in self.aliases:
            return set(self.canonical(self.aliases[t], literals=literals))
        if not literals and _is_literal(t):
            return {"string"}
        return {t}


def _py(annotation: typing.Any) -> str:
    """`int`, `list[int] | None`: an annotation as it is written in report.py."""
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _union(members: frozenset[str]) -> str:
    return " | ".join(sorted(members))


def _array(members: frozenset[str]) -> str:
    return f"({_union(members)})[]" if len(members) > 1 else f"{_union(members)}[]"


def _map(members: frozenset[str]) -> str:
    return f"{{[string]: {_union(members)}}}"


def _is_literal(member: str) -> bool:
    return len(member) >= 2 and member[0] == member[-1] and member[0] in "'\""


# ---- Python annotations in the same spelling ----------------------------------------------------
def ts_of(annotation: typing.Any, *, literals: bool = True) -> frozenset[str]:
    """The TS union members a Python annotation corresponds to (string literals as `'x'`, or
    as `string` with `literals=False`)."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is type(None):
        return frozenset({"null"})
    if annotation is bool:
        return frozenset({"boolean"})
    if annotation in (int, float):
        return frozenset({"number"})
    if annotation is str:
        return frozenset({"string"})
    if dataclasses.is_dataclass(annotation):
        return frozenset({f"I{annotation.__name__}"})
    if origin is typing.Literal:
        if not all(isinstance(a, str) for a in args):
            raise TypeError(f"no TS spelling for {annotation!r}")
        return frozenset(f"'{a}'" if literals else "string" for a in args)
    if origin in (typing.Union, types.UnionType):
        return frozenset().union(*(ts_of(a, literals=literals) for a in args))
    if origin in (list, tuple, collections.abc.Sequence):
        items = [a for a in args if a is not Ellipsis]
        if not items or (origin is tuple and len(set(items)) != 1):
            raise TypeError(f"no TS spelling for {annotation!r}")
        return frozenset({_array(ts_of(items[0], literals=literals))})
    if origin is dict:
        key, value = args
        if key is not str:
            raise TypeError(f"JSON object keys are strings: {annotation!r}")
        return frozenset({_map(ts_of(value, literals=literals))})
    raise TypeError(f"no TS spelling for {annotation!r}")


def mismatch(
    where: str, annotation: typing.Any, has_default: bool, prop: TSProperty, ts: TSModule
) -> str | None:
    """Why the TS property does not correspond to the Python annotation, or None."""
    want = ts_of(annotation)
    got = ts.canonical(prop.type)
    nullable = "null" in want
    if nullable and "null" not in got:
        return f"{where}: Python allows None ({_py(annotation)}), so the TS type needs `| null` (got `{prop.type}`)"
    if not nullable and "null" in got:
        return f"{where}: Python never sends None ({_py(annotation)}), but the TS type has `null` (`{prop.type}`)"
    if (nullable or has_default) and not prop.optional:
        why = "may be None" if nullable else "has a default, so an older kernel may not send it"
        return f"{where}: the field {why}; declare it optional (`{prop.name}?:`)"
    # Literal strings: the TS side may say `string`, list some of the literals, or both.
    want_literals = {m for m in want if _is_literal(m)}
    got_literals = {m for m in got if _is_literal(m)}
    if want_literals and not got_literals <= want_literals:
        extra = ", ".join(sorted(got_literals - want_literals))
        return f"{where}: the TS type allows {extra}, which Python's {_py(annotation)} does not"
    plain_want = ts_of(annotation, literals=False) - {"null"}
    plain_got = ts.canonical(prop.type, literals=False) - {"null"}
    if plain_want != plain_got:
        return (
            f"{where}: TS type `{prop.type}` does not correspond to the Python annotation {_py(annotation)} "
            f"(expected `{_union(want)}`)"
        )
    return None


@pytest.fixture(scope="module")
def ts() -> TSModule:
    return TSModule(TYPES_TS.read_text(encoding="utf-8"))


def _fields(cls: type) -> dict[str, tuple[typing.Any, bool]]:
    hints = typing.get_type_hints(cls)
    return {
        f.name: (
            hints[f.name],
            f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING,
        )
        for f in dataclasses.fields(cls)
    }


def _compare(interface: str, expected: dict[str, tuple[typing.Any, bool]], ts: TSModule) -> list[str]:
    props = ts.interfaces.get(interface)
    if props is None:
        return [f"types.ts has no `export interface {interface}`"]
    problems = []
    for name, (annotation, has_default) in expected.items():
        prop = props.get(name)
        if prop is None:
            problems.append(f"{interface}.{name}: in report.py ({_py(annotation)}) but missing in types.ts")
            continue
        problem = mismatch(f"{interface}.{name}", annotation, has_default, prop, ts)
        if problem:
            problems.append(problem)
    for name in props:
        if name not in expected and (interface, name) not in PENDING_IN_PYTHON:
            problems.append(f"{interface}.{name}: in types.ts but report.py has no such field")
    return problems


# ---- sample data built from the annotations, to see what to_dict() really produces -----------
def sample(annotation: typing.Any) -> typing.Any:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if dataclasses.is_dataclass(annotation):
        hints = typing.get_type_hints(annotation)
        return annotation(**{f.name: sample(hints[f.name]) for f in dataclasses.fields(annotation)})
    if origin is typing.Literal:
        return args[0]
    if origin in (typing.Union, types.UnionType):
        return sample(next(a for a in args if a is not type(None)))
    if origin in (list, tuple):
        return origin([sample(args[0])])
    if origin is dict:
        return {sample(args[0]): sample(args[1])}
    return {bool: True, int: 1, float: 1.5, str: "x"}[annotation]


def sample_report() -> Report:
    hints = typing.get_type_hints(Report)
    return Report(**{f.name: sample(hints[f.name]) for f in dataclasses.fields(Report)})


# ---- the tests -----------------------------------------------------------------------------------
@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.__name__)
def test_record_interface_matches_dataclass(record: type, ts: TSModule) -> None:
    problems = _compare(f"I{record.__name__}", _fields(record), ts)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.__name__)
def test_record_to_dict_sends_every_field(record: type) -> None:
    """A hand-written to_dict that forgets a new field would hide it from the sidebar."""
    keys = set(sample(record).to_dict())
    names = {f.name for f in dataclasses.fields(record)}
    assert keys == names, f"{record.__name__}.to_dict() keys differ from its fields: {keys ^ names}"


def test_report_interface_matches_to_dict(ts: TSModule) -> None:
    report = sample_report()
    keys = set(report.to_dict()) | set(report.to_dict(max_rows=0))
    assert "truncated" in keys  # the sample has rows to cut, so every key shows up
    fields = _fields(Report)
    expected: dict[str, tuple[typing.Any, bool]] = {}
    for key in sorted(keys - MOVED_TO_MESSAGE):
        if key in fields:
            # Every key of the report dict may be absent from an older kernel's report.
            expected[key] = (fields[key][0], True)
        else:
            # Computed keys come from the method of that name (`memory_by_device()`).
            method = getattr(Report, key, None)
            assert callable(method), f"Report.to_dict() key {key!r} is neither a field nor a method"
            expected[key] = (typing.get_type_hints(method)["return"], True)
    problems = _compare("IReport", expected, ts)
    assert not problems, "\n".join(problems)


def test_report_message_interface_matches_the_comm_payload(ts: TSModule) -> None:
    from torchmagic.views.comm import report_message

    msg = report_message(sample_report(), channel="c", seq=3, max_rows=0)
    props = ts.interfaces.get("IReportMessage")
    assert props is not None, "types.ts has no `export interface IReportMessage`"
    assert set(msg) == set(props), (
        f"IReportMessage keys differ from the comm payload: {set(msg) ^ set(props)}"
    )
    assert ts.canonical(props["type"].type) == {"'report'"}
    assert ts.canonical(props["report"].type) == {"IReport"}
    for key in MOVED_TO_MESSAGE:
        annotation = dict[str, int]
        problem = mismatch(f"IReportMessage.{key}", annotation, True, props[key], ts)
        assert problem is None, problem


def _json_type(value: typing.Any) -> frozenset[str] | None:
    """The TS spelling of a JSON value's type, or None where a value cannot tell (empty lists)."""
    if isinstance(value, bool):
        return frozenset({"boolean"})
    if isinstance(value, (int, float)):
        return frozenset({"number"})
    if isinstance(value, str):
        return frozenset({"string"})
    if isinstance(value, (list, tuple)) and value:
        items = {_json_type(v) for v in value}
        if len(items) == 1 and None not in items:
            return frozenset({_array(next(iter(items)))})
    return None


def _check_message_keys(interface: str, data: dict[str, typing.Any], ts: TSModule) -> list[str]:
    """Keys a kernel message has must be declared with a type that fits their values; the TS
    side may declare more (optional) keys, which older kernels do not send."""
    props = ts.interfaces.get(interface)
    if props is None:
        return [f"types.ts has no `export interface {interface}`"]
    problems = []
    for key, value in data.items():
        prop = props.get(key)
        if prop is None:
            problems.append(f"{interface}.{key}: the kernel sends it, types.ts does not declare it")
            continue
        want = _json_type(value)
        got = ts.canonical(prop.type, literals=False) - {"null"}
        if want is not None and not want <= got:
            problems.append(f"{interface}.{key}: the kernel sends {value!r}, types.ts says `{prop.type}`")
    return problems


def test_hello_message_matches_IHelloMessage(ts: TSModule) -> None:
    """`hello` (and, from kernels that send it, each rule of its `catalog`) as types.ts has it."""
    from torchmagic.views.comm import SidebarChannel

    hello = SidebarChannel(shell=None)._hello()  # no kernel: the channel sends nothing
    problems = _check_message_keys("IHelloMessage", hello, ts)
    assert ts.canonical(ts.interfaces["IHelloMessage"]["type"].type) == {"'hello'"}
    catalog = hello.get("catalog")
    if catalog is not None:
        assert isinstance(catalog, list) and catalog, "hello's catalog is a non-empty list of rules"
        for rule in catalog:
            problems += _check_message_keys("IRuleDoc", rule, ts)
            missing = {"id", "name", "severity", "what", "why", "fix"} - set(rule)
            if missing:
                problems.append(f"catalog rule {rule.get('id')}: no {', '.join(sorted(missing))}")
    assert not problems, "\n".join(dict.fromkeys(problems))


def test_pending_fields_are_still_pending() -> None:
    """Once report.py has a field types.ts declared ahead of it, drop its PENDING_IN_PYTHON
    entry here so the field is checked like the others."""
    for (interface, name), what in PENDING_IN_PYTHON.items():
        record = next(r for r in RECORDS if f"I{r.__name__}" == interface)
        assert name not in {f.name for f in dataclasses.fields(record)}, (
            f"report.py now has {record.__name__}.{name} ({what}): remove "
            f"({interface!r}, {name!r}) from PENDING_IN_PYTHON in {Path(__file__).name}"
        )


# ---- the checker checks --------------------------------------------------------------------------
TS_SAMPLE = """
export type Kind = 'a' | 'b';
/** doc with a { brace */
export interface IThing {
  n: number;              // int
  maybe?: number | null;
  kinds?: Kind[];
  map?: { [op: string]: number };
  nested: number[][];
}
"""


@pytest.mark.parametrize(
    ("annotation", "has_default", "prop", "ok"),
    [
        (int, False, "n", True),
        (float, False, "n", True),
        (str, False, "n", False),
        (typing.Optional[int], True, "maybe", True),
        (int, False, "maybe", False),  # TS has null, Python never sends it
        (list[typing.Literal["a", "b", "c"]], True, "kinds", True),
        (typing.Literal["a"], True, "kinds", False),
        (list[int], True, "kinds", False),
        (tuple[str, ...], True, "kinds", True),
        (dict[str, int], True, "map", True),
        (dict[str, str], True, "map", False),
        (list[list[int]], False, "nested", True),
        (list[list[int]], True, "nested", False),  # has a default: must be optional
        (typing.Optional[list[list[int]]], False, "nested", False),
    ],
)
def test_mismatch_detects(annotation: typing.Any, has_default: bool, prop: str, ok: bool) -> None:
    module = TSModule(TS_SAMPLE)
    problem = mismatch(f"IThing.{prop}", annotation, has_default, module.interfaces["IThing"][prop], module)
    assert (problem is None) is ok, problem


def test_message_check_catches_a_catalog_off_the_contract(ts: TSModule) -> None:
    rule = {"id": "TM301", "name": "sync-in-loop", "severity": "warning", "evidence": "static, runtime"}
    assert _check_message_keys("IRuleDoc", rule, ts) == [
        "IRuleDoc.evidence: the kernel sends 'static, runtime', types.ts says `string[]`"
    ]
    assert _check_message_keys("IRuleDoc", {**rule, "evidence": ["static"], "see": "x"}, ts) == [
        "IRuleDoc.see: the kernel sends it, types.ts does not declare it"
    ]


def test_report_module_is_the_source() -> None:
    # The records listed here are every dataclass report.py defines besides Report.
    defined = {
        obj
        for obj in vars(report_module).values()
        if dataclasses.is_dataclass(obj)
        and isinstance(obj, type)
        and obj.__module__ == report_module.__name__
    }
    assert defined == set(RECORDS) | {Report}
