"""Runs the labextension's jest tests (rendering, escaping, tables, comm client) under pytest,
so `make test` covers them too. Needs node and labextension/node_modules, which
`pip install -e .` leaves behind (the build hook runs `jlpm install` there)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from .conftest import LABEXT_SRC, unavailable


def test_jest_suite_passes() -> None:
    jlpm = Path(sys.executable).parent / "jlpm"
    if not jlpm.exists():
        jlpm = Path(shutil.which("jlpm") or "jlpm")
    if not shutil.which("node") or not os.access(jlpm, os.X_OK):
        unavailable("node or jlpm is missing: the labextension's jest tests cannot run")
    if not (LABEXT_SRC / "node_modules" / ".bin" / "jest").exists():
        unavailable(
            "labextension/node_modules is missing: run `pip install -e .` or `cd labextension && jlpm install`"
        )
    env = {**os.environ, "PATH": f"{jlpm.parent}{os.pathsep}{os.environ.get('PATH', '')}", "CI": "true"}
    result = subprocess.run(
        [str(jlpm), "test", "--silent"], cwd=LABEXT_SRC, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
