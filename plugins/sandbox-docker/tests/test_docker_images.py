"""Layered images: tags follow the inputs, unchanged layers are never rebuilt, and
the sandbox uses the image `rgym image build` makes."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from docker_testlib import TEST_LABELS, base_image, client_or_skip
from rgym_sandbox_docker import images

client_or_skip()
pytestmark = pytest.mark.docker


def test_layer_hash_follows_the_inputs() -> None:
    files = {"Dockerfile": b"FROM x\n", "requirements.txt": b"numpy\n"}
    first = images.layer_hash("pack", files, "sha256:aaa")
    assert first == images.layer_hash("pack", dict(files), "sha256:aaa")
    assert first != images.layer_hash("pack", {**files, "requirements.txt": b"scipy\n"},
                                      "sha256:aaa")
    assert first != images.layer_hash("pack", files, "sha256:bbb")  # a rebuilt base
    assert first != images.layer_hash("agent", files, "sha256:aaa")


def test_unchanged_layers_are_not_rebuilt(docker_client, image: str) -> None:
    base = base_image(docker_client)
    before = images.build_chain(docker_client, [], agent_requirements=[], base=base)
    again = images.build_chain(docker_client, [], agent_requirements=[], base=base)
    assert [layer.built for layer in again] == [False, False, False]
    assert [layer.tag for layer in again] == [layer.tag for layer in before]
    assert before[1].tag == image  # the sandbox's task image is the pack layer
    assert [layer.name for layer in again] == ["base", "pack", "agent"]
    ids = [docker_client.images.get(layer.tag).id for layer in again]
    assert len(set(ids)) == 3
    labels = docker_client.images.get(again[-1].tag).labels
    assert labels["rgym.layer"] == "agent"


def test_cli_builds_the_task_image_the_sandbox_uses(test_env, image: str) -> None:
    done = subprocess.run([sys.executable, "-m", "rgym_core.cli", "image", "build", "rgym/demo",
                           "--agent", "scripted", "--base", test_env["RGYM_DOCKER_BASE"]],
                          env=test_env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "cached" in done.stdout and image.split(":")[1] in done.stdout
    quiet = subprocess.run([sys.executable, "-m", "rgym_core.cli", "image", "build", "rgym/demo",
                            "-q", "--base", test_env["RGYM_DOCKER_BASE"]],
                           env=test_env, capture_output=True, text=True, timeout=300)
    assert quiet.stdout.strip() == image


def _fake_wheel(folder: Path, name: str, version: str) -> Path:
    """A tiny pure-Python wheel, byte-for-byte the same on every run (so the layer it
    goes into is built once per machine, then found by its tag)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{version}-py3-none-any.whl"
    dist = f"{name}-{version}.dist-info"
    files = {f"{name}/__init__.py": f"__version__ = {version!r}\nLOCAL_WHEEL = True\n",
             f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: rgym-tests\nRoot-Is-Purelib: true\n"
                              "Tag: py3-none-any\n"}
    files[f"{dist}/RECORD"] = "".join(f"{n},,\n" for n in files) + f"{dist}/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as zf:
        for n, text in files.items():
            info = zipfile.ZipInfo(n, date_time=(2026, 1, 1, 0, 0, 0))
            zf.writestr(info, text)
    os.utime(path, (1_767_225_600, 1_767_225_600))
    return path


def test_pack_layers_install_local_wheels_first(docker_client, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Contract 6: `torch==2.13.0` resolves to the host's local `+cpu` wheel (here a
    stand-in named torch), never to an index; the wheel files stay out of the image."""
    wheels = tmp_path / "wheels"
    _fake_wheel(wheels, "torch", "2.13.0+cpu")
    monkeypatch.setenv("RGYM_PIP_FIND_LINKS", str(wheels))
    layers = images.build_chain(docker_client, ["torch==2.13.0"], base=base_image(docker_client))
    tag = layers[-1].tag
    assert tag != images.build_chain(docker_client, [], base=base_image(docker_client))[-1].tag
    out = docker_client.containers.run(
        tag, ["sh", "-c", "python -c 'import torch; print(torch.__version__, torch.LOCAL_WHEEL)'; "
                          "ls /opt/rgym/wheels 2>&1 | head -1"],
        remove=True, network_mode="none", labels=TEST_LABELS).decode()
    assert out.splitlines()[0] == "2.13.0+cpu True", out
    assert "No such file" in out.splitlines()[1]
    # the folder is part of the layer's identity: another wheel, another image
    monkeypatch.setenv("RGYM_PIP_FIND_LINKS", str(tmp_path / "none"))
    files, linked = images._context_files("pack", ["torch==2.13.0"])
    assert files["wheels/MANIFEST.txt"] == b"" and linked == {}
