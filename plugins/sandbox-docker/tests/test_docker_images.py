"""Layered images: tags follow the inputs, unchanged layers are never rebuilt, and
the sandbox uses the image `rgym image build` makes."""

from __future__ import annotations

import subprocess
import sys

import pytest
from docker_testlib import base_image, client_or_skip
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
