"""Parts of the Docker backend that need no engine: container options, default
limits, labels and owners, command quoting and output capping (these run
everywhere; the hostile-archive extractor is the core's, tested there)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rgym_sandbox_docker import lifecycle, limits
from rgym_sandbox_docker.sandbox import DockerSandbox
from rgym_sandbox_docker.shell import ansi_c_quote, render_output

from rgym_core.sandbox import SandboxConfig, truncate_output
from rgym_core.specs import Resources


def test_limits_come_from_resources_and_gpus_become_device_requests() -> None:
    box = DockerSandbox(SandboxConfig(run_id="r", resources=Resources(memory_mb=512, cpus=1.5,
                                                                      pids=100, gpus=2)))
    opts = box._limits()
    assert opts["mem_limit"] == opts["memswap_limit"] == "512m"
    assert opts["nano_cpus"] == 1_500_000_000 and opts["pids_limit"] == 100
    (request,) = opts["device_requests"]
    assert request["Count"] == 2 and request["Capabilities"] == [["gpu"]]
    every = DockerSandbox(SandboxConfig(run_id="r", gpus="all"))._limits()["device_requests"][0]
    assert every["Count"] == -1
    some = DockerSandbox(SandboxConfig(run_id="r", gpus="0,3"))._limits()["device_requests"][0]
    assert some["DeviceIDs"] == ["0", "3"]


def test_an_episode_without_limits_gets_safe_defaults() -> None:
    box = DockerSandbox(SandboxConfig(run_id="r"))
    opts = box._limits()
    assert opts == {"mem_limit": f"{limits.DEFAULT_MEMORY_MB}m",
                    "memswap_limit": f"{limits.DEFAULT_MEMORY_MB}m",
                    "pids_limit": limits.DEFAULT_PIDS}
    assert box.limits.sources == {"memory_mb": "default", "pids": "default", "disk_mb": "default"}
    text = box.limits.describe("tmpfs")
    assert text["memory"].startswith(f"{limits.DEFAULT_MEMORY_MB} MB (default)")
    assert text["processes"] == f"{limits.DEFAULT_PIDS} (default)"
    assert "(default), in memory (tmpfs)" in text["workspace"]
    # the task's (or the command line's) values win over the defaults
    own = limits.episode_limits(Resources(memory_mb=300, pids=50), {"disk_mb": 99})
    assert (own.memory_mb, own.pids, own.disk_mb) == (300, 50, 99)
    assert set(own.sources.values()) == {"task"}


def test_storage_modes_bound_every_writable_place() -> None:
    box = DockerSandbox(SandboxConfig(run_id="r", options={"disk_mb": 100}))
    tmpfs = box._storage("tmpfs")
    assert tmpfs["read_only"] is True
    assert set(tmpfs["tmpfs"]) == {"/tmp", "/var/tmp", "/run/rgym", box.workspace}
    assert "size=100m" in tmpfs["tmpfs"][box.workspace]
    assert all("exec" in o and "nosuid" in o for o in tmpfs["tmpfs"].values())
    assert box._storage("quota") == {"storage_opt": {"size": "164m"}}
    with pytest.raises(ValueError, match="storage=disk"):
        DockerSandbox(SandboxConfig(run_id="r", options={"storage": "disk"}))


def test_labels_include_run_id_owner_and_env_labels(monkeypatch) -> None:
    monkeypatch.setenv("RGYM_DOCKER_LABELS", "ci=yes, team=ml,broken")
    labels = lifecycle.labels_for("abc", "episode", {"rgym.task": "t/x"})
    owner = {k: labels.pop(k) for k in list(labels) if k.startswith("rgym.owner.")}
    assert labels == {"ci": "yes", "team": "ml", "rgym.task": "t/x", "rgym.managed": "1",
                      "rgym.run_id": "abc", "rgym.role": "episode"}
    me = lifecycle.Owner.from_labels(owner)
    assert me == lifecycle.Owner.me() and me.state() == "alive"


def test_owner_states() -> None:
    done = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True, check=True)
    dead = lifecycle.Owner.me()
    import attrs

    assert attrs.evolve(dead, pid=int(done.stdout)).state() == "gone"  # exited
    assert attrs.evolve(dead, start="1").state() == "gone"  # the pid was reused
    assert attrs.evolve(dead, boot="another-boot").state() == "gone"  # rebooted
    assert attrs.evolve(dead, host="elsewhere").state() == "unknown"
    assert attrs.evolve(dead, pidns="4026531836x").state() == "unknown"  # rgym in a container
    assert lifecycle.Owner.from_labels({"rgym.managed": "1"}) is None


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
               max_size=40))
def test_ansi_c_quote_round_trips_through_bash(text: str) -> None:
    out = subprocess.run(["bash", "-c", f"printf '%s' {ansi_c_quote(text)}"],
                         capture_output=True, check=True).stdout
    assert out.decode() == text
    assert "\n" not in ansi_c_quote(text)


def test_render_output_caps_like_truncate_output() -> None:
    full = "".join(f"line {i:05d}\n" for i in range(30000))
    data = full.encode()
    keep = 4000
    head, tail, dropped = data[:keep], data[-keep:], len(data) - 2 * keep
    text, truncated = render_output(head, tail, dropped, 1000)
    assert truncated and text == truncate_output(full, 1000)[0]
    assert render_output(b"short\n", b"", 0, 1000) == ("short\n", False)
    assert render_output(data[:5000], data[5000:9000], 0, 1000) == \
        truncate_output(full[:9000], 1000)


def test_docker_setup_names_no_mirror_host() -> None:
    """.ci/docker-setup.sh leaves the mirror to debootstrap unless RGYM_DEBIAN_MIRROR says."""
    import re

    import rgym_core

    script = (Path(rgym_core.__file__).resolve().parents[1] / ".ci" / "docker-setup.sh")
    text = script.read_text()
    assert not re.search(r"[a-z]+://", text), "a URL (a host name) is written in the script"
    (line,) = [ln for ln in text.splitlines() if ln.startswith("MIRROR=")]
    show = f'{line}\nprintf "<%s>" "${{MIRROR[@]}}"; echo " ${{#MIRROR[@]}}"'
    unset = subprocess.run(["bash", "-c", show], capture_output=True, text=True, check=True,
                           env={"PATH": os.environ["PATH"]})
    assert unset.stdout.strip().endswith(" 0")  # no mirror argument: debootstrap's default
    given = subprocess.run(["bash", "-c", show], capture_output=True, text=True, check=True,
                           env={"PATH": os.environ["PATH"], "RGYM_DEBIAN_MIRROR": "file:///m"})
    assert given.stdout.strip() == "<file:///m> 1"


def test_the_registered_backend_describes_its_limits_for_rgym_show() -> None:
    """`rgym show TASK` reads `SandboxSpec.limits`: the defaults a task gets in Docker."""
    from rgym_core.registry import load_registry

    registry = load_registry()
    spec = registry.sandbox("docker")
    lines = spec.limits(registry.task("rgym/demo").resources, {})
    assert lines["memory"] == f"{limits.DEFAULT_MEMORY_MB} MB (default), no swap beyond it"
    assert lines["processes"] == f"{limits.DEFAULT_PIDS} (default)"
    assert lines["workspace"].startswith("2048 MB")
    own = spec.limits(Resources(memory_mb=512, pids=64, disk_mb=100), {})
    assert (own["memory"], own["processes"], own["workspace"]) == \
        ("512 MB, no swap beyond it", "64", "100 MB")


class _FakeEngine:
    """Just enough of the SDK's client for `DockerSandbox._create`: an engine that
    refuses `--storage-opt` the way overlay2 on ext4 does."""

    def __init__(self, quota: bool) -> None:
        self.quota = quota
        self.created: list[dict[str, object]] = []
        self.api = type("Api", (), {"base_url": f"fake://{id(self)}"})()
        self.containers = self

    def create(self, **kwargs: object) -> dict[str, object]:
        import docker.errors

        if "storage_opt" in kwargs and not self.quota:
            raise docker.errors.APIError(
                "500 Server Error: Internal Server Error (\"--storage-opt is supported only for "
                "overlay over xfs with 'pquota' mount option\")")
        self.created.append(kwargs)
        return kwargs


@pytest.mark.parametrize("quota", [True, False])
def test_storage_auto_uses_the_engines_quota_else_the_tmpfs_fallback(quota: bool) -> None:
    from rgym_core.sandbox import SandboxError

    engine = _FakeEngine(quota)
    box = DockerSandbox(SandboxConfig(run_id="r", options={"disk_mb": 100}))
    box.client, box.image = engine, "img"
    made = box._create("episode", False, caps=[], mounts=[])
    assert box.storage == ("quota" if quota else "tmpfs")
    if quota:
        assert made["storage_opt"] == {"size": "164m"} and "tmpfs" not in made
    else:
        assert made["read_only"] is True and "storage_opt" not in made
        box._create("grader", False, caps=[], mounts=[])  # the engine is remembered: one try
        assert len(engine.created) == 2 and all("storage_opt" not in c for c in engine.created)
        forced = DockerSandbox(SandboxConfig(run_id="r", options={"storage": "quota"}))
        forced.client, forced.image = _FakeEngine(False), "img"
        with pytest.raises(SandboxError, match="cannot limit a container's disk"):
            forced._create("episode", False, caps=[], mounts=[])


def test_the_backend_reads_the_merged_resources_not_the_fields_beside_them() -> None:
    from rgym_core.sandbox import merge_resources

    effective = merge_resources(Resources(memory_mb=256, gpus=1), memory_mb=640, gpus="all",
                                network=True, image="given:1")
    box = DockerSandbox(SandboxConfig(run_id="r", resources=Resources(memory_mb=128, gpus=4),
                                      effective=effective))
    opts = box._limits()
    assert opts["mem_limit"] == "640m" and opts["device_requests"][0]["Count"] == -1
    assert box._resolve_image() == "given:1" and box.config.network_enabled
