"""Fixtures for live and runtime rules, run in a real IPython shell under `%torchcheck on`.

`tests/fixtures/cells/<ID>_flag*.py` and `<ID>_ok*.py` are notebooks in the percent format:
a line starting with `# %%` begins a cell. Every cell runs in a fresh namespace, checked,
and every finding of every rule (static, live and runtime alike) is compared with the
`# expect: TMxxx` markers, as the static fixtures are. A finding about a live object with no
line is expected on its cell's `# %%` line. A fixture whose first line says
`# requires: cuda` is skipped without a CUDA device.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from test_rule_fixtures import expected

import torchmagic
from torchmagic import catalog
from torchmagic.live.registry import live_checks
from torchmagic.runtime.registry import runtime_rules

CELLS = Path(__file__).parent / "fixtures" / "cells"
_CELL = re.compile(r"^# %%")


def cell_files() -> list[Path]:
    return sorted(CELLS.glob("TM*.py"))


def split_cells(code: str) -> list[tuple[int, str]]:
    """`(first line number, cell source)`; the `# %%` line is the cell's line 1."""
    lines = code.splitlines()
    starts = [i for i, line in enumerate(lines) if _CELL.match(line)]
    return [(a + 1, "\n".join(lines[a:b]) + "\n") for a, b in zip(starts, [*starts[1:], len(lines)])]


def run_cells(shell, code: str) -> tuple[set[tuple[int, str]], list[str]]:
    found: set[tuple[int, str]] = set()
    errors: list[str] = []
    for start, source in split_cells(code):
        before = torchmagic.last_report()
        shell.run_cell(source, store_history=True)
        report = torchmagic.last_report()
        if report is None or report is before:
            continue  # a control cell (`%config TorchCheck...`): not checked
        errors.extend(report.errors)
        for f in report.findings:
            found.add((start + (f.line or 1) - 1, f.rule))
    return found, errors


@pytest.fixture
def fresh(shell):
    names = set(shell.user_ns)
    shell.run_cell("%torchcheck on", store_history=False)
    yield shell
    for name in set(shell.user_ns) - names:
        shell.user_ns.pop(name, None)


@pytest.mark.parametrize("path", cell_files(), ids=lambda p: p.stem)
def test_cell_fixture(fresh, path: Path) -> None:
    code = path.read_text()
    if code.startswith("# requires: cuda") and not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    found, errors = run_cells(fresh, code)
    assert not errors, errors
    want = expected(code)
    assert found == want, f"missing: {sorted(want - found)}  unexpected: {sorted(found - want)}"
    if path.stem.split("_")[1] == "flag":
        assert want, "a _flag fixture must expect at least one finding"


def test_every_live_and_runtime_rule_has_flag_and_ok_cell_fixtures() -> None:
    stems = {p.stem for p in cell_files()}
    ids = {c.rule.id for c in live_checks()} | {r.rule.id for r in runtime_rules()}
    missing = [
        f"{rid}_{kind}"
        for rid in sorted(ids)
        for kind in ("flag", "ok")
        if not any(s == f"{rid}_{kind}" or s.startswith(f"{rid}_{kind}_") for s in stems)
    ]
    assert not missing, f"live/runtime rules without cell fixtures: {missing}"
    assert ids <= set(catalog.RULES)
