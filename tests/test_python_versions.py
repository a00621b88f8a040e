"""The `requires-python` floor in pyproject.toml is true: every module parses with that
Python's grammar, and the half that needs neither torch nor IPython (the linter and its CLI)
runs on that interpreter when one is installed (pyenv)."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def floor() -> tuple[int, int]:
    text = (ROOT / "pyproject.toml").read_text()
    major, minor = re.search(r'requires-python = ">=(\d+)\.(\d+)"', text).groups()
    return int(major), int(minor)


def test_every_module_parses_with_the_oldest_supported_grammar() -> None:
    version = floor()
    for path in sorted((ROOT / "torchmagic").rglob("*.py")):
        ast.parse(path.read_text(), filename=str(path), feature_version=version)


def _interpreter(version: tuple[int, int]) -> str | None:
    for candidate in sorted(Path.home().glob(f".pyenv/versions/{version[0]}.{version[1]}.*/bin/python")):
        return str(candidate)
    found = shutil.which(f"python{version[0]}.{version[1]}")
    return found if found and "shims" not in found else None


def test_the_linter_runs_on_the_oldest_supported_python(tmp_path: Path) -> None:
    version = floor()
    python = _interpreter(version)
    if python is None:
        pytest.skip(f"no Python {version[0]}.{version[1]} interpreter on this machine")
    (tmp_path / "train.py").write_text("import torch\nx = torch.randn(3).cuda()\n")
    r = subprocess.run(
        [
            python,
            "-c",
            "import sys; from torchmagic.cli import main; sys.exit(main(sys.argv[1:]))",
            "check",
            "train.py",
        ],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1, r.stderr
    assert r.stdout.startswith("train.py:2:5: TM201 "), r.stdout
    assert sys.version_info >= version
