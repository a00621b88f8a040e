"""What the browser tests do when their requirements are missing: skip outside CI, fail in CI."""

from __future__ import annotations

import pytest

from . import conftest


def test_missing_requirement_skips_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conftest, "IN_CI", False)
    with pytest.raises(pytest.skip.Exception, match="Chromium not found"):
        conftest.unavailable("Chromium not found at /usr/bin/chromium")


def test_missing_requirement_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conftest, "IN_CI", True)
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        conftest.unavailable("Chromium not found at /usr/bin/chromium")


def test_chromium_override(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    fake = tmp_path / "chromium"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("TORCHMAGIC_CHROMIUM", str(fake))
    assert conftest.find_chromium() == str(fake)
