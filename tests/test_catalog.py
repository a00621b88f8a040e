"""The catalog is the one declaration of every rule: the reference docs and the CLI read it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from torchmagic import catalog
from torchmagic.catalog.reference import markdown

ROOT = Path(__file__).resolve().parents[1]


def test_docs_rules_md_is_generated_from_the_catalog() -> None:
    committed = (ROOT / "docs" / "rules.md").read_text()
    assert committed == markdown(), (
        "docs/rules.md is stale: run `python -m torchmagic.catalog.reference --write`"
    )


def test_every_rule_has_a_section_in_the_reference() -> None:
    text = markdown()
    for r in catalog.all_rules():
        assert f"### {r.id} {r.name}" in text
        assert r.fix in text


def test_overrides_name_known_rules_and_never_each_other() -> None:
    for r in catalog.all_rules():
        for other in r.overrides:
            assert other in catalog.RULES
            assert r.id not in catalog.RULES[other].overrides, (r.id, other)


def test_explain_prints_the_catalog_entry() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "torchmagic", "explain", "tm106"], capture_output=True, text=True, check=True
    ).stdout
    r = catalog.RULES["TM106"]
    assert out.startswith("TM106 (tensor-attribute-not-buffer) — warning, evidence: static + live")
    assert r.why.split("\n")[0] in out and r.fix.split("\n")[0] in out
