"""`check_source` never raises: odd input gives no findings or a single TM000."""

from __future__ import annotations

import pytest

from torchmagic import check_source


@pytest.mark.parametrize(
    "code",
    [
        "",
        "\n\n",
        "%matplotlib inline\n!pip list\nx?\n",
        "%%bash\nfor f in *; do echo $f.cuda(); done\n",
        "x = 'a\x00b'\n",
        "x = " + "a + " * 5000 + "a\n",
        "x = " + "f(" * 150 + ")" * 150 + "\n",
        "y = " + "-" * 300_000 + "1\n",
        "def f(:\n",
        "\ufeffimport torch\n",
        "class C(nn.Module):\n    def forward(self, x):\n        return x\n" * 500,
    ],
    ids=[
        "empty",
        "blank",
        "line-magics",
        "bash-cell",
        "null-byte",
        "long-binop-chain",
        "nested-calls",
        "deep-unary",
        "syntax-error",
        "bom",
        "many-classes",
    ],
)
def test_check_source_never_raises(code: str) -> None:
    found = check_source(code)
    assert all(f.rule == "TM000" for f in found) and len(found) <= 1


def test_syntax_error_is_one_TM000_with_its_line() -> None:
    (f,) = check_source("import torch\nfor x in :\n    pass\n")
    assert (f.rule, f.line, f.severity) == ("TM000", 2, "error")


def test_legacy_async_argument_names_its_replacement() -> None:
    code = "import torch\nfor x, y in loader:\n    y = y.cuda(async=True)\n    out = net(x.cuda())\n"
    [f] = [f for f in check_source(code) if f.rule == "TM000"]
    assert f.line == 3
    assert "`async` is a reserved word" in f.message and "non_blocking=True" in f.hint
    # any other syntax error keeps the parser's own words
    [g] = check_source("x = (1,\ny = 2\n")
    assert g.rule == "TM000" and "reserved" not in g.message and "non_blocking" not in g.hint


def test_exercise_blanks_are_named_and_the_rest_is_checked() -> None:
    template = (
        "import torch\nmodel = torch.nn.Linear(4, 2)\nw = model.weight.data\nopt = < YOUR CODE HERE >\n"
    )
    found = check_source(template)
    [blank] = [f for f in found if f.rule == "TM000"]
    assert (blank.line, blank.severity) == (4, "info")
    assert "exercise blank (`< YOUR CODE HERE >`)" in blank.message
    assert "TM403" in {f.rule for f in found}  # the lines that parse are still checked
    [empty] = [f for f in check_source("lr = \nprint(lr)\n") if f.rule == "TM000"]
    assert "exercise blank (`lr =`)" in empty.message and empty.severity == "info"
    # a comparison in angle brackets that is simply broken is no blank
    [broken] = [f for f in check_source("ok = a < b >\n") if f.rule == "TM000"]
    assert broken.severity == "error" and "blank" not in broken.message


def test_magics_keep_line_numbers() -> None:
    code = "%%torchcheck\n%time x = 1\nfor t in ts:\n    v = t.item()\n!nvidia-smi\nts = ts.to(device)\n"
    assert [(f.line, f.rule) for f in check_source(code)] == [(4, "TM301")]


def test_continuation_lines_that_look_like_magics_are_still_python() -> None:
    code = "import torch\nfor t in ts:\n    ok = (\n        t.sum()\n        != 0\n    )\n    v = t.item()\nts = ts.to(device)\n"
    assert [(f.line, f.rule) for f in check_source(code)] == [(7, "TM301")]


SELF_NAMED_SUBCLASS = """
import torch
from lib import Runner


class Runner(Runner):
    def run(self, xs):
        out = []
        for x in xs:
            out.append(self.predict(x).cpu())
        return out
"""


def test_a_class_named_after_the_base_it_imports_ends(tmp_path) -> None:
    # `class Runner(Runner)` over an imported `Runner`: walks up the source's class chain must
    # not take the class for its own base forever (a hang here once)
    import subprocess
    import sys

    path = tmp_path / "runner.py"
    path.write_text(SELF_NAMED_SUBCLASS)
    done = subprocess.run(
        [sys.executable, "-m", "torchmagic", "check", str(path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "1 file" in done.stderr
