"""Golden fixtures: every `# expect: TMxxx` marker must be found, and nothing else.

`tests/fixtures/rules/<ID>_flag*.py` hold code a rule must flag, `<ID>_ok*.py` code it must
not flag (the catalog's "must not flag" column). Findings of *every* rule are compared, so a
fixture also proves that other rules stay quiet on it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from torchmagic import check_source
from torchmagic.lint import all_rules

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
    if path.stem.split("_")[1] == "flag":
        assert want, "a _flag fixture must expect at least one finding"


def test_every_static_rule_has_flag_and_ok_fixtures() -> None:
    stems = {p.stem for p in fixture_files()}
    missing = []
    for r in all_rules():
        if not r.is_static:
            continue
        for kind in ("flag", "ok"):
            if not any(s == f"{r.id}_{kind}" or s.startswith(f"{r.id}_{kind}_") for s in stems):
                missing.append(f"{r.id}_{kind}")
    assert not missing, f"rules without fixtures: {missing}"


CATALOG = {
    **{f"TM10{i}": "static" for i in range(1, 8)},
    **{f"TM20{i}": "static" for i in range(1, 5)},
    "TM205": "live",
    "TM301": "static",
    "TM302": "static",
    "TM303": "runtime",
    **{f"TM40{i}": "static" for i in range(1, 7)},
    **{f"TM50{i}": "static" for i in range(1, 5)},
    "TM505": "runtime",
    "TM506": "runtime",
    "TM601": "static",
    "TM602": "static",
    **{f"TM70{i}": "static" for i in range(1, 4)},
    "TM801": "static",
    "TM901": "runtime",
    **{f"TM90{i}": "static" for i in range(2, 5)},
}


def test_every_catalog_rule_is_registered() -> None:
    rules = {r.id: r for r in all_rules()}
    assert set(CATALOG) <= set(rules)
    for rid, evidence in CATALOG.items():
        # rules with static evidence run in the walk; live/runtime-only ones are documented only
        assert rules[rid].is_static == (evidence == "static"), rid


def test_every_rule_is_documented_like_ruff() -> None:
    for r in all_rules():
        for section in ("## What it does", "## Why is this bad?", "## Example", "## Use instead"):
            assert section in r.doc, (r.id, section)
        assert r.severity in ("error", "warning", "info"), r.id


def test_fixture_messages_name_code_and_give_a_fix() -> None:
    for path in fixture_files():
        for f in check_source(path.read_text()):
            assert f.message.endswith(".") and "`" in f.message, (path.name, f.message)
            assert f.hint, (path.name, f.rule)
