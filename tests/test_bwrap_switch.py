"""``RGYM_BWRAP`` switches bubblewrap on and off, or names the binary."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rgym_core.isolation.bubblewrap import find_bwrap


@pytest.mark.parametrize("value", ["0", "off", "no", "false", "none", ""])
def test_off_words_disable_bubblewrap(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("RGYM_BWRAP", value)
    assert find_bwrap() is None


@pytest.mark.parametrize("value", ["1", "on", "yes", "true", "ON"])
def test_on_words_mean_the_bwrap_on_path(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("RGYM_BWRAP", value)
    assert find_bwrap() == shutil.which("bwrap")


def test_a_path_names_the_binary(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "my-bwrap"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("RGYM_BWRAP", str(fake))
    assert find_bwrap() == str(fake)
