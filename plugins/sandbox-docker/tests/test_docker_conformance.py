"""The core's sandbox conformance suite, run against the Docker backend."""

from __future__ import annotations

from pathlib import Path

import pytest
from docker_testlib import client_or_skip

from rgym_core.sandbox import Sandbox
from rgym_core.testing.conformance import SandboxConformance

client_or_skip()
pytestmark = pytest.mark.docker


class TestDockerConformance(SandboxConformance):
    def has_user_isolation(self) -> bool:
        return True

    def make_root_only_file(self, box: Sandbox, tmp_path: Path) -> str:
        from rgym_sandbox_docker.execstream import run_collect

        path = "/run/rgym/hidden/secret.txt"  # root-only; the root fs is read-only
        res = run_collect(box.client.api, box.container.id,  # type: ignore[attr-defined]
                          ["sh", "-c", f"mkdir -p /run/rgym/hidden && echo 'top secret' > {path} "
                                       f"&& chmod 700 /run/rgym/hidden && chmod 600 {path}"],
                          user="root", timeout=30)
        assert res.exit_code == 0, res.merged
        return path
