from __future__ import annotations

import sys

import pytest
from IPython.core.getipython import get_ipython
from IPython.core.interactiveshell import InteractiveShell
from IPython.testing.globalipapp import start_ipython


@pytest.fixture
def shell() -> InteractiveShell:
    """A real IPython shell with torchmagic loaded fresh, unloaded again afterwards."""
    start_ipython()
    ip = get_ipython()
    ip.run_cell("%load_ext torchmagic", store_history=False)
    ip.run_cell("%config TorchCheck.display = 'none'", store_history=False)
    yield ip
    ip.run_cell("%torchcheck off", store_history=False)
    ip.run_cell("%unload_ext torchmagic", store_history=False)
    if "TorchCheck" in ip.config:  # what `%config TorchCheck.x = ...` left: the next test starts clean
        ip.config.TorchCheck.clear()


@pytest.fixture
def scratch_shell(shell):
    """`shell` with the CPU's sync-prone calls timed too; the names a test binds are removed
    after it (the shared shell's namespace is live for later tests)."""
    before = set(shell.user_ns)
    shell.run_cell("%config TorchCheck.sync_devices = ['cpu']", store_history=False)
    yield shell
    for name in set(shell.user_ns) - before:
        if not name.startswith("__"):  # Dynamo's own globals: it deletes them itself
            shell.user_ns.pop(name, None)


@pytest.fixture(autouse=True)
def fresh_dynamo():
    """Each test starts with no compiled code and none of Dynamo's counts (a test that compiles
    must not change what the next one sees: the sync probe, for one, times fewer entry points
    once something was compiled)."""
    yield
    utils = sys.modules.get("torch._dynamo.utils")
    if utils is not None:
        import torch._dynamo

        torch._dynamo.reset()
        utils.counters.clear()
        utils.clear_compilation_metrics()
