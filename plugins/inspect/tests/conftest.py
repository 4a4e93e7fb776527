"""Fixtures of the Inspect bridge's tests: the environment of the ``inspect`` processes
they start.

Inspect's ``mockllm/model`` counts tokens with tiktoken, whose ``o200k_base`` file is
fetched from the network on first use; the tests have no network, so the processes
get a ``sitecustomize`` that gives tiktoken a rough length-based encoding instead.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

OFFLINE_TIKTOKEN = '''
import tiktoken


class _Approx:
    def encode(self, text, **_):
        return [0] * (len(text) // 4 + 1)


tiktoken.get_encoding = lambda name: _Approx()
'''


@pytest.fixture
def inspect_env(tmp_path: Path) -> dict[str, str]:
    """The environment for an ``inspect`` subprocess: offline tiktoken, Inspect's
    own files under ``tmp_path``."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(OFFLINE_TIKTOKEN)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), env.get("PYTHONPATH", "")) if p)
    env["INSPECT_LOG_DIR"] = str(tmp_path / "logs")
    env["INSPECT_DISPLAY"] = "plain"
    env["NO_COLOR"] = "1"
    return env
