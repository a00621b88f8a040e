"""Fixes: per-rule fixtures, safety, idempotence and what the fixed programs compute.

`tests/fixtures/fixes/<ID>_fix.py` holds code the rule flags, each flagged line marked
`# fix: safe`, `# fix: unsafe` or `# fix: none` (no edit is offered); `<ID>_fix.fixed.py`
beside it is the file after `--fix --unsafe-fixes` with only that rule selected. A fixture
that sets `RESULT` is also run, before and after its safe fixes: what it computes must not
change (a fixture whose original raises must run once fixed).
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path
from typing import Any

import pytest
import torch

from torchmagic import catalog, check_source
from torchmagic.lint.engine import lint
from torchmagic.lint.fixes import apply_edits, fix_source, parses
from torchmagic.report import Edit, Finding, Fix

FIXTURES = Path(__file__).parent / "fixtures" / "fixes"
_MARK = re.compile(r"#\s*fix:\s*([a-z,\s]+)$")


def fixtures() -> list[Path]:
    """`TM404_fix.py`, `TM601_fix_loaded_back.py`, ... (not the `.fixed.py` expected outputs)."""
    return sorted(p for p in FIXTURES.glob("TM*_fix*.py") if not p.name.endswith(".fixed.py"))


def rule_of(path: Path) -> str:
    return path.name.split("_")[0]


def lint_rule(rule: str, path: Path):  # noqa: ANN201
    return lambda s: check_source(s, path=str(path), select=[rule])


def markers(code: str) -> dict[int, list[str]]:
    out = {}
    for n, line in enumerate(code.splitlines(), start=1):
        m = _MARK.search(line)
        if m:
            out[n] = [p.strip() for p in m.group(1).split(",") if p.strip()]
    return out


def test_every_rule_with_a_documented_fix_has_a_fixture_and_the_other_way_round() -> None:
    documented = {r.id for r in catalog.all_rules() if r.autofix}
    have = {rule_of(p) for p in fixtures()}
    assert documented == have, (
        f"documented without fixture: {documented - have}; fixture without doc: {have - documented}"
    )
    for p in fixtures():
        assert p.with_name(p.stem + ".fixed.py").exists(), f"{p.name} has no expected output beside it"


@pytest.mark.parametrize("path", fixtures(), ids=lambda p: p.stem)
def test_each_flagged_line_offers_the_marked_fix(path: Path) -> None:
    code = path.read_text()
    rule = rule_of(path)
    found: dict[int, list[str]] = {}
    for f in sorted(check_source(code, path=str(path), select=[rule]), key=lambda f: (f.line, f.col or 0)):
        found.setdefault(f.line, []).append(f.fix.applicability if f.fix else "none")
    assert found == markers(code)


@pytest.mark.parametrize("path", fixtures(), ids=lambda p: p.stem)
def test_fixing_gives_the_expected_file_and_is_idempotent(path: Path) -> None:
    code = path.read_text()
    rule = rule_of(path)
    result = fix_source(code, lint_rule(rule, path), unsafe=True)
    expected = path.with_name(path.stem + ".fixed.py").read_text()
    assert result.source == expected
    assert not result.broke_parsing
    again = fix_source(expected, lint_rule(rule, path), unsafe=True)
    assert again.source == expected and not again.applied
    # what is left of the rule offers no fix any more
    assert all(f.fix is None for f in check_source(expected, path=str(path), select=[rule]))


@pytest.mark.parametrize("path", fixtures(), ids=lambda p: p.stem)
def test_without_unsafe_fixes_only_the_safe_ones_apply(path: Path) -> None:
    code = path.read_text()
    result = fix_source(code, lint_rule(rule_of(path), path), unsafe=False)
    assert all(f.fix.applicability == "safe" for f in result.applied)  # type: ignore[union-attr]
    safe = sum(marks.count("safe") for marks in markers(code).values())
    assert len(result.applied) == safe
    if not safe:
        assert result.source == code


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return (
            a.dtype == b.dtype
            and a.shape == b.shape
            and bool(torch.equal(a, b))
            and a.requires_grad == b.requires_grad
        )
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if hasattr(a, "shape") and hasattr(b, "shape"):  # numpy
        return a.shape == b.shape and (a == b).all()
    return a == b


def _run(code: str, where: Path) -> tuple[Any, BaseException | None]:
    cwd = os.getcwd()
    os.chdir(where)
    try:
        ns: dict[str, Any] = {"__name__": "__fixture__"}
        exec(compile(code, "<fixture>", "exec"), ns)
        return ns.get("RESULT"), None
    except Exception as e:
        return None, e
    finally:
        os.chdir(cwd)


RUNNABLE = [p for p in fixtures() if "RESULT =" in p.read_text()]


@pytest.mark.parametrize("path", RUNNABLE, ids=lambda p: p.stem)
def test_safe_fixes_do_not_change_what_the_program_computes(path: Path, tmp_path: Path) -> None:
    code = path.read_text()
    fixed = fix_source(code, lint_rule(rule_of(path), path), unsafe=False).source
    assert fixed != code
    before, error_before = _run(code, tmp_path)
    after, error_after = _run(fixed, tmp_path)
    assert error_after is None, f"the fixed program raises: {error_after!r}"
    if error_before is None:
        assert _same(before, after), f"the safe fixes changed the result: {before!r} -> {after!r}"


def test_the_runnable_fixtures_cover_every_rule_with_safe_fixes() -> None:
    safe_rules = {rule_of(p) for p in fixtures() if any("safe" in m for m in markers(p.read_text()).values())}
    assert safe_rules <= {rule_of(p) for p in RUNNABLE}


def test_the_tm105_fix_registers_the_layers() -> None:
    code = (FIXTURES / "TM105_fix.py").read_text()
    before, _ = _run(code + "\nRESULT = len(list(model.parameters()))\n", Path.cwd())
    fixed = fix_source(code, lint_rule("TM105", FIXTURES / "TM105_fix.py")).source
    after, _ = _run(fixed + "\nRESULT = len(list(model.parameters()))\n", Path.cwd())
    # 3 layers, 2 heads, 2 blocks (weight + bias each); ReLU/Tanh have none; the list of
    # Parameters is an unsafe fix (a ParameterList is no list for `torch.stack`)
    assert (before, after) == (0, 3 * 2 + 2 * 2 + 2 * 2)


# ---- applying edits -------------------------------------------------------------------------------


def _finding(line: int, edits: list[Edit], applicability: str = "safe", rule: str = "TM902") -> Finding:
    return catalog.RULES[rule].finding("m", "h", line=line, fix=Fix("t", tuple(edits), applicability))  # type: ignore[arg-type]


def test_a_fix_that_breaks_parsing_is_dropped_and_reported() -> None:
    code = "x = 1\ny = 2\n"
    bad = _finding(1, [Edit(1, 4, 1, 5, "(")])
    good = _finding(2, [Edit(2, 4, 2, 5, "3")])
    result = fix_source(code, lambda s: [bad, good] if s == code else [], unsafe=False)
    assert result.source == "x = 1\ny = 3\n"
    assert result.broke_parsing == [bad] and result.applied == [good]
    assert parses(result.source)


def test_a_source_that_does_not_parse_is_left_alone() -> None:
    code = "x = (\n"
    result = fix_source(code, lambda s: [_finding(1, [Edit(1, 0, 1, 1, "y")])])
    assert result.source == code and not result.applied


def test_overlapping_fixes_wait_for_the_next_round() -> None:
    code = "a = f(g(x))\n"
    outer = _finding(1, [Edit(1, 4, 1, 11, "h(x)")])
    inner = _finding(1, [Edit(1, 6, 1, 10, "x")], rule="TM903")
    calls = []

    def check(s: str) -> list[Finding]:
        calls.append(s)
        return [outer, inner] if s == code else []

    result = fix_source(code, check)
    assert len(result.applied) == 1 and len(calls) == 2  # the other fix is re-linted, not forced


def test_edits_count_characters_not_bytes() -> None:
    code = 'print("é"); nn.init.normal(w)\n'
    finding = next(f for f in check_source("import torch.nn as nn\n" + code) if f.rule == "TM902")
    edit = finding.fix.edits[0]  # type: ignore[union-attr]
    line = ("import torch.nn as nn\n" + code).splitlines()[edit.line - 1]
    assert line[edit.col : edit.end_col] == "normal"
    assert apply_edits("import torch.nn as nn\n" + code, finding.fix.edits).endswith("nn.init.normal_(w)\n")  # type: ignore[union-attr]


def test_crlf_sources_keep_their_line_endings() -> None:
    code = "import torch.nn as nn\r\nnn.init.normal(w)\r\nx = 1\r\n"
    result = fix_source(code, lambda s: check_source(s))
    assert result.source == "import torch.nn as nn\r\nnn.init.normal_(w)\r\nx = 1\r\n"


def test_no_fix_on_a_line_the_ipython_rewrite_changed() -> None:
    cell = "import torch.nn as nn\nw = nn.Parameter(torch.ones(2))\nx = !ls; nn.init.normal(w)\n"
    found = [f for f in lint(cell).findings if f.rule == "TM902"]
    assert all(f.fix is None for f in found)


def test_magic_lines_keep_their_numbers_in_a_cell() -> None:
    cell = "%%torchcheck\nimport torch.nn as nn\nw = nn.Linear(2, 2).weight\nnn.init.normal(w)\n"
    result = fix_source(cell, lambda s: check_source(s))
    assert result.source == cell.replace("normal(", "normal_(")


def test_fix_texts_use_the_sources_own_import_names() -> None:
    code = (
        "import torch\nfrom torch import nn as tnn\n\nclass M(tnn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.l = [tnn.Linear(2, 2)]\n"
    )
    result = fix_source(code, lambda s: check_source(s))
    assert "self.l = tnn.ModuleList([tnn.Linear(2, 2)])" in result.source
    # without a name for torch.nn in the source, no fix (it would add an undefined name)
    bare = (
        "from torch.nn import Module, Linear\n\nclass M(Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.l = [Linear(2, 2)]\n"
    )
    found = [f for f in check_source(bare) if f.rule == "TM105"]
    assert found and all(f.fix is None for f in found)
    spelled = ast.parse(result.source)  # and it parses
    assert spelled is not None


def test_what_the_tm105_fix_assumes_of_the_nn_containers_holds_in_torch() -> None:
    from torch import nn

    from torchmagic.lint.rules.modules import _CONTAINER_ATTRS, _METHODS

    for name, methods in _METHODS.items():
        missing = {m for m in methods if not hasattr(getattr(nn, name), m)}
        assert not missing, f"nn.{name} has no {missing}"
    attrs = {n for c in (nn.ModuleDict, nn.ParameterDict) for n in dir(c) if not n.startswith("_")}
    attrs |= {n for n in vars(nn.ModuleDict()) if not n.startswith("_")}
    assert attrs <= _CONTAINER_ATTRS, f"keys that would clash, unknown to the fix: {attrs - _CONTAINER_ATTRS}"


def test_fixing_reaches_a_fixed_point_with_several_findings_on_one_statement() -> None:
    code = (
        "import torch\nfrom torch.autograd import Variable\n"
        "a, b = Variable(torch.ones(1)), Variable(torch.zeros(1))\n"
        "c = [Variable(t) for t in (a, b)]\n"
    )
    result = fix_source(code, lambda s: check_source(s))
    assert "Variable(" not in result.source.split("\n", 2)[2]
    assert len(result.applied) == 3
    again = fix_source(result.source, lambda s: check_source(s))
    assert not again.applied and again.source == result.source


def test_a_py_file_whose_continuation_line_starts_with_percent_is_still_fixed() -> None:
    # the cell rewrite takes a line starting with `%` for a magic; as a file it is plain Python
    code = "import torch.nn as nn\nw = nn.Linear(2, 2).weight\nk = (7\n     % 3)\nnn.init.normal(w)\n"
    assert parses(code)
    assert fix_source(code, lambda s: check_source(s)).source.endswith("nn.init.normal_(w)\n")
