"""Layered images: base, task pack and (optional) agent, built from ``containers/``.

Each layer is tagged ``rgym-<layer>:<hash>`` where the hash covers its
Dockerfile, its build-context files and the image ID of the layer below, so an
unchanged layer is found by its tag and never rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from attrs import define

#: The public image the base layer starts from (override: ``--base`` / RGYM_DOCKER_BASE).
DEFAULT_BASE = "python:3.11-slim"
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
#: Files of a wheel folder that pip can install from.
WHEEL_SUFFIXES = (".whl", ".tar.gz", ".zip")
LAYERS = ("base", "pack", "agent")
HASH_LEN = 16

Progress = Callable[[str, str], None]


class ImageBuildError(RuntimeError):
    """A layer failed to build; the message holds the end of the build log."""


@define
class Layer:
    """One built (or found) layer."""

    name: str
    tag: str
    built: bool


def default_base() -> str:
    return os.environ.get("RGYM_DOCKER_BASE") or DEFAULT_BASE


def containers_dir() -> Path:
    """The folder of layer Dockerfiles: ``RGYM_CONTAINERS_DIR``, else the copy shipped
    inside this package (wheels and sdists carry one, made from the repository's
    ``containers/`` at build time), else the ``containers/`` folder of the checkout
    an editable install runs from."""
    env = os.environ.get("RGYM_CONTAINERS_DIR")
    if env:
        path = Path(env)
        if not (path / "base" / "Dockerfile").is_file():
            raise ImageBuildError(f"RGYM_CONTAINERS_DIR={env}: no base/Dockerfile there")
        return path
    here = Path(__file__).resolve().parent
    for candidate in (here / "containers", *(p / "containers" for p in here.parents)):
        if (candidate / "base" / "Dockerfile").is_file():
            return candidate
    raise ImageBuildError("cannot find the rgym 'containers/' folder (base/Dockerfile): this "
                          "installation of rgym-sandbox-docker has no Dockerfiles; reinstall it "
                          "(pip install rgym-sandbox-docker, or pip install "
                          "./plugins/sandbox-docker from a checkout) or set RGYM_CONTAINERS_DIR")


def _pip_find_links() -> list[str]:
    """pip's own ``find-links`` setting: ``PIP_FIND_LINKS``, else the ``[global]``
    section of pip's configuration files (``PIP_CONFIG_FILE``, site, user)."""
    if "PIP_FIND_LINKS" in os.environ:
        return os.environ["PIP_FIND_LINKS"].split()
    import configparser

    files = [os.environ.get("PIP_CONFIG_FILE", ""), "/etc/pip.conf", "/etc/xdg/pip/pip.conf",
             os.path.expanduser("~/.config/pip/pip.conf"), os.path.expanduser("~/.pip/pip.conf")]
    found: list[str] = []
    for name in files:
        if not name or not os.path.isfile(name):
            continue
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read(name)
        except configparser.Error:
            continue
        for section in ("global", "install"):
            if parser.has_option(section, "find-links"):
                found = parser.get(section, "find-links").split()  # the last file wins
    return found


def wheel_folders() -> list[Path]:
    """Local folders of wheels the pack and agent layers install from first:
    ``RGYM_PIP_FIND_LINKS`` (folders separated by ``:``), else the folders of pip's own
    ``find-links`` (``PIP_FIND_LINKS`` or pip's configuration; URLs are left out).
    Missing folders are ignored."""
    raw = os.environ.get("RGYM_PIP_FIND_LINKS")
    items = raw.split(os.pathsep) if raw is not None else _pip_find_links()
    out = []
    for item in items:
        item = item.strip()
        if item.startswith("file://"):
            item = item[len("file://"):]
        if item and "://" not in item and Path(item).is_dir():
            out.append(Path(item))
    return out


def _wheels(requirements: Sequence[str]) -> dict[str, Path]:
    """The distribution files of :func:`wheel_folders` (name -> path; the first
    folder wins a name), or none when the layer installs nothing."""
    if not any(r.strip() for r in requirements):
        return {}
    found: dict[str, Path] = {}
    for folder in wheel_folders():
        for path in sorted(folder.iterdir()):
            if path.is_file() and path.name.endswith(WHEEL_SUFFIXES) and path.name not in found:
                found[path.name] = path
    return found


def _context_files(layer: str, requirements: Sequence[str]
                   ) -> tuple[dict[str, bytes], dict[str, Path]]:
    """A layer's build context: small files by content, and local wheels by path
    (their names, sizes and times go into ``wheels/MANIFEST.txt``, which the layer
    hash covers, so a changed wheel rebuilds the layer without hashing its bytes)."""
    folder = containers_dir() / layer
    files = {"Dockerfile": (folder / "Dockerfile").read_bytes()}
    wheels: dict[str, Path] = {}
    if layer == "base":
        files["ca-certificates.crt"] = CA_BUNDLE.read_bytes() if CA_BUNDLE.is_file() else b""
    else:
        files["requirements.txt"] = "".join(f"{r}\n" for r in requirements).encode()
        wheels = _wheels(requirements)
        lines = []
        for name, path in sorted(wheels.items()):
            st = path.stat()
            lines.append(f"{name} {st.st_size} {st.st_mtime_ns}\n")
        files["wheels/MANIFEST.txt"] = "".join(lines).encode()
    return files, {f"wheels/{name}": path for name, path in wheels.items()}


def _place(path: Path, target: Path) -> None:
    """Put a wheel into the build context: a hard link when possible, else a copy."""
    try:
        os.link(path, target)
    except OSError:
        shutil.copyfile(path, target)


def _image_id(client: Any, name: str) -> str | None:
    try:
        return client.images.get(name).id
    except Exception:  # noqa: BLE001 - docker.errors.ImageNotFound and friends
        return None


def layer_hash(layer: str, files: dict[str, bytes], below: str) -> str:
    """The hash of a layer's inputs (``below``: the image ID, or name, it builds on)."""
    digest = hashlib.sha256()
    digest.update(json.dumps({"layer": layer, "below": below}, sort_keys=True).encode())
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
    return digest.hexdigest()[:HASH_LEN]


def build_layer(client: Any, layer: str, below: str, requirements: Sequence[str] = (), *,
                no_cache: bool = False, progress: Progress | None = None) -> Layer:
    """Build (or find) one layer on top of the image ``below``."""
    files, wheels = _context_files(layer, requirements)
    below_id = _image_id(client, below) or below
    tag = f"rgym-{layer}:{layer_hash(layer, files, below_id)}"
    if not no_cache and _image_id(client, tag):
        if progress:
            progress(layer, f"{tag} is up to date")
        return Layer(layer, tag, built=False)
    with tempfile.TemporaryDirectory(prefix=f"rgym-{layer}-") as ctx:
        for name, data in files.items():
            (Path(ctx) / name).parent.mkdir(parents=True, exist_ok=True)
            (Path(ctx) / name).write_bytes(data)
        for name, path in wheels.items():
            _place(path, Path(ctx) / name)
        log: list[str] = []
        stream = client.api.build(path=ctx, tag=tag, buildargs={"BASE": below}, rm=True,
                                  forcerm=True, nocache=no_cache, decode=True,
                                  labels={"rgym.layer": layer, "rgym.managed-image": "1"})
        for event in stream:
            if "error" in event:
                tail = "".join(log[-20:])
                hint = ""
                if layer == "base" and below_id == below:  # the base image is not here
                    hint = (f"\nhint: '{below}' is not present locally and could not be "
                            f"pulled; without a registry run .ci/docker-setup.sh and set "
                            f"RGYM_DOCKER_BASE=rgym-local-base:latest (or pass --base, or "
                            f"--sandbox-option base=...)")
                raise ImageBuildError(f"building the {layer} layer ({tag}) on {below} failed: "
                                      f"{event['error'].strip()}\n{tail}{hint}")
            text = event.get("stream") or event.get("status") or ""
            if text:
                log.append(text)
                if progress and text.strip():
                    progress(layer, text.strip())
    return Layer(layer, tag, built=True)


def build_chain(client: Any, requirements: Sequence[str] = (), *,
                agent_requirements: Sequence[str] | None = None, base: str | None = None,
                no_cache: bool = False, progress: Progress | None = None) -> list[Layer]:
    """Build base, pack and (when ``agent_requirements`` is given) agent layers."""
    layers = [build_layer(client, "base", base or default_base(), no_cache=no_cache,
                          progress=progress)]
    layers.append(build_layer(client, "pack", layers[-1].tag, requirements, no_cache=no_cache,
                              progress=progress))
    if agent_requirements is not None:
        layers.append(build_layer(client, "agent", layers[-1].tag, agent_requirements,
                                  no_cache=no_cache, progress=progress))
    return layers


def task_image(client: Any, requirements: Sequence[str] = (), *, base: str | None = None,
               progress: Progress | None = None) -> str:
    """The tag of a task's image (what ``rgym image build TASK`` makes), built if missing."""
    return build_chain(client, requirements, base=base, progress=progress)[-1].tag


