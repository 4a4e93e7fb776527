"""Docker from a normal install (issue 11 item 2): the wheel and the sdist carry the
Dockerfiles (copied from the repository's ``containers/`` at build time), and a
Docker episode runs from the wheel installed into a clean virtual environment,
with no checkout in reach."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from docker_testlib import TEST_LABELS, base_image, client_or_skip

import rgym_core
from rgym_core.testing.venvs import ChildEnv, clean_env

client_or_skip()
pytestmark = pytest.mark.docker

REPO = Path(rgym_core.__file__).resolve().parents[1]
PLUGIN = REPO / "plugins" / "sandbox-docker"
LAYERS = ("base/Dockerfile", "pack/Dockerfile", "agent/Dockerfile")


def _build(kind: str, source: Path, out: Path) -> Path:
    """Build a wheel or an sdist of ``source`` with this environment's setuptools."""
    out.mkdir(parents=True, exist_ok=True)
    code = (f"import sys; from setuptools import build_meta as b; "
            f"print(b.build_{kind}(sys.argv[1]))")
    done = subprocess.run([sys.executable, "-c", code, str(out)], cwd=source,
                          capture_output=True, text=True, timeout=300, env=clean_env())
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return out / done.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build("wheel", PLUGIN, tmp_path_factory.mktemp("wheel"))


def test_the_wheel_and_the_sdist_carry_the_dockerfiles(wheel: Path, tmp_path: Path) -> None:
    source = {name: (REPO / "containers" / name).read_bytes() for name in LAYERS}
    with zipfile.ZipFile(wheel) as zf:
        for name in LAYERS:
            assert zf.read(f"rgym_sandbox_docker/containers/{name}") == source[name]
        assert "rgym_sandbox_docker/supervisor.py" in zf.namelist()
    sdist = _build("sdist", PLUGIN, tmp_path / "sdist")
    with tarfile.open(sdist) as tar:
        top = tar.getnames()[0].split("/")[0]
        for name in LAYERS:
            member = tar.extractfile(f"{top}/containers/{name}")
            assert member is not None and member.read() == source[name]
        tar.extractall(tmp_path / "unpacked", filter="data")
    # a wheel built from the sdist alone (no checkout around it) has them too
    again = _build("wheel", tmp_path / "unpacked" / top, tmp_path / "from-sdist")
    with zipfile.ZipFile(again) as zf:
        assert zf.read("rgym_sandbox_docker/containers/base/Dockerfile") == \
            source["base/Dockerfile"]


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A folder beside the running environment (pytest's own folders are root-only
    and /tmp is private to the confined host grader): the demo's host grader runs
    the venv's interpreter as another, unprivileged user."""
    folder = Path(tempfile.mkdtemp(prefix=".rgym-wheel-test-", dir=Path(sys.prefix).parent))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_docker_episode_runs_from_the_installed_wheel(wheel: Path, tmp_path: Path,
                                                        open_dir: Path, docker_client) -> None:
    env = ChildEnv.create(open_dir / "venv")
    env.pip("install", "--no-deps", "--no-index", str(wheel))
    where = env.run("-c", "import json, rgym_sandbox_docker.images as i; "
                          "print(json.dumps([i.__file__, str(i.containers_dir())]))",
                    cwd=tmp_path)
    assert where.returncode == 0, where.stderr
    module, containers = json.loads(where.stdout)
    site = str(env.site_packages)
    assert module.startswith(site) and containers.startswith(site), (module, containers)
    assert not Path(containers).is_relative_to(REPO / "containers"), containers
    run_env = {**clean_env(), "RGYM_DOCKER_BASE": base_image(docker_client),
               "RGYM_DOCKER_LABELS": ",".join(f"{k}={v}" for k, v in TEST_LABELS.items())}
    built = env.run("-m", "rgym_core.cli", "image", "build", "rgym/demo", "-q", env=run_env,
                    cwd=tmp_path, timeout=600)
    assert built.returncode == 0, built.stdout + built.stderr
    runs = tmp_path / "runs"
    done = env.run("-m", "rgym_core.cli", "run", "rgym/demo", "--agent", "scripted",
                   "--sandbox", "docker", "--quiet", "--runs-dir", str(runs), env=run_env,
                   cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (result,) = runs.rglob("result.json")
    data = json.loads(result.read_text())
    assert data["sandbox"] == "docker/docker" and data["final_scores"], data
    assert os.environ.get("RGYM_CONTAINERS_DIR") is None
