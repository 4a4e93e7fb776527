"""``rgym_sandbox_docker.testing``: what a pack's Docker tests get (base image, wheel
folder, labels) and the clear reasons they get instead when something is missing."""

from __future__ import annotations

from pathlib import Path

import pytest
from rgym_sandbox_docker import testing
from rgym_sandbox_docker.testing import DockerNotReady, episode_env


def test_no_daemon_is_a_reason_naming_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such.sock")
    with pytest.raises(DockerNotReady, match=r"docker-setup\.sh"):
        episode_env("kit-test")


def test_a_missing_wheel_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(testing, "client", lambda: _NoImages())
    monkeypatch.delenv("RGYM_DOCKER_BASE", raising=False)
    with pytest.raises(DockerNotReady, match=r"no wheel matching torch-2\.13\.0\*\.whl in .*RGYM_PIP_FIND_LINKS"):
        episode_env("kit-test", wheels=tmp_path, wheel_globs=["torch-2.13.0*.whl"])
    (tmp_path / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    env = episode_env("kit-test", wheels=tmp_path, wheel_globs=["torch-2.13.0*.whl"])
    assert env["RGYM_PIP_FIND_LINKS"] == str(tmp_path)
    assert env["RGYM_DOCKER_BASE"] == testing.images.DEFAULT_BASE  # no local base, no override
    labels = dict(item.split("=", 1) for item in env["RGYM_DOCKER_LABELS"].split(","))
    assert labels == {"rgym.test": "kit-test", "rgym.test.session": testing.session_label()}
    monkeypatch.setenv("RGYM_DOCKER_BASE", "my-base:1")
    assert episode_env("kit-test")["RGYM_DOCKER_BASE"] == "my-base:1"
    assert "RGYM_PIP_FIND_LINKS" not in episode_env("kit-test")


class _NoImages:
    """An engine client without a local base image (what the helper asks of it)."""

    class images:  # noqa: N801 - the SDK's attribute name
        @staticmethod
        def get(name: str) -> None:
            raise LookupError(name)
