from __future__ import annotations

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
