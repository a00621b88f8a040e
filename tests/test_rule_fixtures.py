"""Golden fixtures: every `# expect: TMxxx` marker must be found, and nothing else.

`tests/fixtures/rules/<ID>_flag*.py` hold code a rule must flag, `<ID>_ok*.py` code it must
not flag (the catalog's "must not flag" column). Findings of *every* rule are compared, so a
fixture also proves that other rules stay quiet on it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from torchmagic import catalog, check_source
from torchmagic.lint.engine import lint
from torchmagic.lint.registry import static_checks
from torchmagic.live.registry import live_checks
from torchmagic.runtime.registry import runtime_rules

FIXTURES = Path(__file__).parent / "fixtures" / "rules"
_EXPECT = re.compile(r"#\s*expect:\s*([A-Z0-9,\s]+)$")


def expected(code: str) -> set[tuple[int, str]]:
    out: set[tuple[int, str]] = set()
    for n, line in enumerate(code.splitlines(), start=1):
        m = _EXPECT.search(line)
        if m:
            out |= {(n, r.strip()) for r in m.group(1).split(",") if r.strip()}
    return out


def fixture_files() -> list[Path]:
    return sorted(FIXTURES.glob("TM*.py"))


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: p.stem)
def test_fixture(path: Path) -> None:
    code = path.read_text()
    found = {(f.line, f.rule) for f in check_source(code, path=str(path))}
    want = expected(code)
    assert found == want, f"missing: {sorted(want - found)}  unexpected: {sorted(found - want)}"
    assert not lint(code, path=str(path)).errors, "a rule crashed (the user sees an internal error)"
    if path.stem.split("_")[1] == "flag":
        assert want, "a _flag fixture must expect at least one finding"


def test_every_static_check_has_flag_and_ok_fixtures() -> None:
    stems = {p.stem for p in fixture_files()}
    missing = []
    for c in static_checks():
        for kind in ("flag", "ok"):
            if not any(s == f"{c.id}_{kind}" or s.startswith(f"{c.id}_{kind}_") for s in stems):
                missing.append(f"{c.id}_{kind}")
    assert not missing, f"rules without fixtures: {missing}"


def test_every_catalog_rule_has_a_unit_for_each_kind_of_its_evidence() -> None:
    units = {
        "static": {c.id for c in static_checks()},
        "live": {c.rule.id for c in live_checks()},
        "runtime": {r.rule.id for r in runtime_rules()},
    }
    for r in catalog.all_rules():
        for evidence in r.evidence:
            if r.id == "TM000":
                continue  # the engine itself reports sources that do not parse
            assert r.id in units[evidence], f"{r.id} declares {evidence} evidence but has no {evidence} unit"
    for evidence, ids in units.items():
        for rid in ids:
            assert evidence in catalog.RULES[rid].evidence, (
                f"{rid} has a {evidence} unit the catalog does not list"
            )


def test_every_rule_is_documented_like_ruff() -> None:
    for r in catalog.all_rules():
        for section in ("## What it does", "## Why is this bad?", "## Example", "## Use instead"):
            assert section in r.doc, (r.id, section)
        assert r.what and r.why and r.example and r.fix, r.id
        assert r.severity in ("error", "warning", "info"), r.id
        compile(r.example, f"{r.id} example", "exec", dont_inherit=True) if r.id != "TM000" else None
        compile(r.fix, f"{r.id} fix", "exec", dont_inherit=True)


def test_fixture_messages_name_code_and_give_a_fix() -> None:
    for path in fixture_files():
        for f in check_source(path.read_text()):
            assert f.message.endswith(".") and "`" in f.message, (path.name, f.message)
            assert f.hint, (path.name, f.rule)
