"""A real `jupyter lab` on 127.0.0.1 and headless Chromium driven by Python Playwright.

Where things are missing outside CI the tests skip with the reason; with CI=true a missing
browser, Playwright or labextension build is a failure.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
LABEXT_SRC = ROOT / "labextension"
LABEXT_BUILD = ROOT / "torchmagic" / "labextension"
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
IN_CI = os.environ.get("CI", "").lower() == "true"


def unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: the browser tests must run)")
    pytest.skip(reason)


def find_chromium() -> str | None:
    for candidate in (os.environ.get("TORCHMAGIC_CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def _newest_mtime(folder: Path) -> float:
    return max((p.stat().st_mtime for p in folder.rglob("*") if p.is_file()), default=0.0)


def _build_is_current() -> bool:
    built = LABEXT_BUILD / "package.json"
    if not built.exists():
        return False
    sources = [LABEXT_SRC / "src", LABEXT_SRC / "style", LABEXT_SRC / "schema", LABEXT_SRC / "package.json"]
    newest = max(_newest_mtime(p) if p.is_dir() else p.stat().st_mtime for p in sources)
    return built.stat().st_mtime >= newest


def _jlpm() -> list[str] | None:
    for candidate in (Path(sys.executable).parent / "jlpm", shutil.which("jlpm")):
        if candidate and os.access(candidate, os.X_OK):
            return [str(candidate)]
    return None


def _installed_labextension() -> Path | None:
    from jupyter_core.paths import jupyter_path

    for folder in jupyter_path("labextensions"):
        if (Path(folder) / "torchmagic" / "package.json").exists():
            return Path(folder) / "torchmagic"
    return None


def labextension_dir() -> Path:
    """The built extension to serve: the repository's build (rebuilt when the sources are newer)
    or, without sources, the installed one."""
    if LABEXT_SRC.is_dir():
        if _build_is_current():
            return LABEXT_BUILD
        jlpm = _jlpm()
        if jlpm and shutil.which("node"):
            env = {
                **os.environ,
                "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            }
            try:
                if not (LABEXT_SRC / "node_modules").is_dir():
                    subprocess.run(
                        [*jlpm, "install"],
                        cwd=LABEXT_SRC,
                        env=env,
                        check=True,
                        capture_output=True,
                        timeout=600,
                    )
                subprocess.run(
                    [*jlpm, "build:prod"],
                    cwd=LABEXT_SRC,
                    env=env,
                    check=True,
                    capture_output=True,
                    timeout=600,
                )
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
                out = getattr(e, "stdout", b"") or b""
                unavailable(f"building the labextension failed: {e}\n{out.decode(errors='replace')[-2000:]}")
            return LABEXT_BUILD
    installed = _installed_labextension()
    if installed is not None:
        return installed
    unavailable(
        "the torchmagic labextension is not built: run `pip install -e .` (needs node and jlpm) "
        "or `cd labextension && jlpm install && jlpm build:prod`"
    )
    raise AssertionError  # unreachable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LabServer:
    def __init__(self, base: Path, port: int, token: str, proc: subprocess.Popen, log: Path) -> None:
        self.root = base / "notebooks"
        self.settings = base / "user-settings"
        self.port = port
        self.token = token
        self.proc = proc
        self.log = log

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def lab_url(self, path: str, *, reset: bool = True) -> str:
        return f"{self.url}/lab/tree/{path}?{'reset&' if reset else ''}token={self.token}"

    def set_setting(self, plugin: str, values: dict[str, Any]) -> None:
        package, name = plugin.rsplit(":", 1)
        path = self.settings / package / f"{name}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))

    def log_tail(self, n: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-n:] if self.log.exists() else ""


@pytest.fixture(scope="module")
def chromium_path() -> str:
    path = find_chromium()
    if path is None:
        hint = (
            "apt-get install -y chromium" if os.geteuid() == 0 else "ask an administrator to install chromium"
        )
        unavailable(
            f"Chromium not found at /usr/bin/chromium ({hint}); set TORCHMAGIC_CHROMIUM to use another"
        )
    return path


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, chromium_path: str):
    try:
        import jupyterlab  # noqa: F401
    except ImportError:
        unavailable("jupyterlab is not installed: pip install -e '.[browser]'")
    ext = labextension_dir()
    base = tmp_path_factory.mktemp("lab")
    (base / "notebooks").mkdir()
    # The extension under test comes first on the labextensions path.
    share = base / "share" / "labextensions"
    share.mkdir(parents=True)
    (share / "torchmagic").symlink_to(ext, target_is_directory=True)
    port, token = free_port(), secrets.token_hex(16)
    env = {
        **os.environ,
        "JUPYTER_PATH": f"{base / 'share'}{os.pathsep}{os.environ.get('JUPYTER_PATH', '')}",
        "JUPYTER_RUNTIME_DIR": str(base / "runtime"),
        "JUPYTER_CONFIG_DIR": str(base / "config"),
        "JUPYTERLAB_SETTINGS_DIR": str(base / "user-settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(base / "workspaces"),
        # The kernel imports the working tree's torchmagic.
        "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }
    # window.jupyterapp lets the tests wait for `app.restored` (the layout put back after a
    # reload) in JupyterLab and in Notebook 7, whose app reads its own section.
    (base / "config").mkdir()
    expose = {"expose_app_in_browser": True}
    (base / "config" / "jupyter_server_config.json").write_text(
        json.dumps({"LabApp": expose, "JupyterNotebookApp": expose})
    )
    log = base / "lab.log"
    cmd = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--allow-root",
        "--ip=127.0.0.1",
        f"--port={port}",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={base / 'notebooks'}",
        "--ServerApp.port_retries=0",
        "--LabApp.news_url=",
    ]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=base)
    server = LabServer(base, port, token, proc, log)
    server.set_setting(
        "@jupyterlab/apputils-extension:notification", {"fetchNews": "false", "checkForUpdates": False}
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"jupyter lab exited with {proc.returncode}:\n{server.log_tail()}")
            try:
                with urllib.request.urlopen(f"{server.url}/api/status?token={token}", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"jupyter lab did not start in 60 s:\n{server.log_tail()}")
            time.sleep(0.2)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@pytest.fixture(scope="module")
def browser(chromium_path: str):
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("Python Playwright is not installed: pip install -e '.[browser]'")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="module")
def page(browser, lab: LabServer):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(30_000)
    ARTIFACTS.mkdir(exist_ok=True)
    try:
        yield page
    finally:
        context.close()
