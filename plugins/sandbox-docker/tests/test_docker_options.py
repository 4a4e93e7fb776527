"""Parts of the Docker backend that need no engine: container options, labels,
command quoting and output capping (these run everywhere)."""

from __future__ import annotations

import subprocess

from hypothesis import given, settings
from hypothesis import strategies as st
from rgym_sandbox_docker import lifecycle
from rgym_sandbox_docker.sandbox import DockerSandbox
from rgym_sandbox_docker.shell import KEEP_BYTES, _Capture, ansi_c_quote

from rgym_core.sandbox import SandboxConfig, truncate_output
from rgym_core.specs import Resources


def test_limits_come_from_resources_and_gpus_become_device_requests() -> None:
    box = DockerSandbox(SandboxConfig(run_id="r", resources=Resources(memory_mb=512, cpus=1.5,
                                                                      pids=100, gpus=2)))
    limits = box._limits()
    assert limits["mem_limit"] == limits["memswap_limit"] == "512m"
    assert limits["nano_cpus"] == 1_500_000_000 and limits["pids_limit"] == 100
    (request,) = limits["device_requests"]
    assert request["Count"] == 2 and request["Capabilities"] == [["gpu"]]
    every = DockerSandbox(SandboxConfig(run_id="r", gpus="all"))._limits()["device_requests"][0]
    assert every["Count"] == -1
    some = DockerSandbox(SandboxConfig(run_id="r", gpus="0,3"))._limits()["device_requests"][0]
    assert some["DeviceIDs"] == ["0", "3"]
    assert DockerSandbox(SandboxConfig(run_id="r"))._limits() == {}


def test_labels_include_run_id_and_env_labels(monkeypatch) -> None:
    monkeypatch.setenv("RGYM_DOCKER_LABELS", "ci=yes, team=ml,broken")
    labels = lifecycle.labels_for("abc", "episode", {"rgym.task": "t/x"})
    assert labels == {"ci": "yes", "team": "ml", "rgym.task": "t/x", "rgym.managed": "1",
                      "rgym.run_id": "abc", "rgym.role": "episode"}


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
               max_size=40))
def test_ansi_c_quote_round_trips_through_bash(text: str) -> None:
    out = subprocess.run(["bash", "-c", f"printf '%s' {ansi_c_quote(text)}"],
                         capture_output=True, check=True).stdout
    assert out.decode() == text
    assert "\n" not in ansi_c_quote(text)


def test_capture_caps_huge_output_like_truncate_output() -> None:
    mark = b"__M__"
    cap = _Capture(mark)
    line = b"0123456789abcdef\n"
    total = 0
    while total < 5 * KEEP_BYTES:
        cap.add(line * 1000)
        total += len(line) * 1000
        assert cap.find() is None
    cap.add(b"END\n\n" + mark + b" 0 0 /w\n")
    before, fields = cap.find()
    assert fields == ["0", "0", "/w"]
    text, truncated = cap.text(before, 1000)
    full = (line * (total // len(line))).decode() + "END\n"
    assert truncated and text == truncate_output(full, 1000)[0]
    assert len(bytes(cap.buf)) <= 3 * KEEP_BYTES  # memory stays bounded
