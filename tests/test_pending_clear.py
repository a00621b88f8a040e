"""PendingClear in a real InteractiveShell: it sees a pending wait-clear and leaves no trace."""

from __future__ import annotations

import io
import sys

import pytest
from IPython.core.interactiveshell import InteractiveShell

from torchmagic.views.pending_clear import PendingClear


@pytest.fixture
def shell() -> InteractiveShell:
    return InteractiveShell.instance()


def test_a_clear_with_wait_is_pending_until_the_next_output(shell, monkeypatch) -> None:
    from IPython.display import clear_output, display

    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    watch = PendingClear()
    watch.start(shell)
    clear_output(wait=True)
    assert watch.pending
    print("next line")  # consumes it
    assert not watch.pending
    clear_output(wait=True)
    display("an object")  # so does a display
    assert not watch.pending
    clear_output(wait=True)
    assert watch.stop() is True
    assert "write" not in vars(out) and "clear_output" not in vars(shell.display_pub)
    assert "publish" not in vars(shell.display_pub)


def test_a_stream_with_its_own_write_gets_it_back(shell, monkeypatch) -> None:
    from IPython.display import clear_output

    out = io.StringIO()
    own = out.write
    out.write = own  # like ipykernel's OutStream, which keeps `write` on the instance
    monkeypatch.setattr(sys, "stdout", out)
    watch = PendingClear()
    watch.start(shell)
    clear_output(wait=True)
    assert vars(out)["write"] is not own
    watch.stop()
    assert vars(out)["write"] is own


def test_no_clear_or_a_clear_without_wait_is_not_pending(shell) -> None:
    from IPython.display import clear_output

    watch = PendingClear()
    watch.start(shell)
    assert watch.stop() is False
    watch.start(shell)
    clear_output(wait=False)
    assert watch.stop() is False
