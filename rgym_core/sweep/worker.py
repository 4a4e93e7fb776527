"""One sweep episode in another process: the function Ray tasks and Slurm jobs run.

:func:`run_job` loads the registry once per worker process (with the plugins the
sweep's own process loaded), runs the episode with the same runner as ``rgym
run``, and returns a small summary.  With ``ship=True`` (a worker that may not
share the sweep's file system: Ray) the run directory is written to a private
temporary folder and returned as a tar archive, which the sweep's process
unpacks next to the sweep folder and moves into place in one rename
(:func:`unpack_run`); otherwise (Slurm, whose jobs share the file system) it is
written in place.
"""

from __future__ import annotations

import io
import os
import shutil
import socket
import tarfile
import tempfile
import threading
import traceback
from pathlib import Path
from typing import Any

import attrs

_REGISTRIES: dict[tuple[str, ...], Any] = {}
_LOCK = threading.Lock()
#: The run directory's name inside a shipped archive.
ARCHIVE_ROOT = "run"
#: Environment variables of the sweep's process a worker gets too (``--price``).
SHIPPED_ENV = ("RGYM_PRICE",)


def plugin_names(registry: Any) -> list[str]:
    """The plugins ``registry`` loaded (what a worker must load too)."""
    return sorted(p.name for p in getattr(registry, "plugins", []) if getattr(p, "loaded", False))


def worker_registry(plugins: list[str] | None) -> Any:
    """This process's registry with ``plugins`` (cached: loaded once per worker)."""
    from rgym_core.registry import load_registry

    key = tuple(plugins or ())
    with _LOCK:
        if key not in _REGISTRIES:
            _REGISTRIES[key] = load_registry(only=list(plugins) if plugins else None, lazy=True)
        return _REGISTRIES[key]


def job_payload(config: Any, *, plugins: list[str], ship: bool, cell: str) -> dict[str, Any]:
    """What a worker needs: the RunConfig's fields (plain data), the plugins, where to
    write, and the :data:`SHIPPED_ENV` variables set here (a worker may not inherit them)."""
    fields = {a.name: getattr(config, a.name) for a in attrs.fields(type(config))}
    for name, value in list(fields.items()):
        if isinstance(value, Path):
            fields[name] = str(value)
    env = {name: os.environ[name] for name in SHIPPED_ENV if os.environ.get(name)}
    return {"config": fields, "plugins": plugins, "ship": ship, "cell": cell, "env": env}


def _config(fields: dict[str, Any]) -> Any:
    from rgym_core.runner import RunConfig

    values = dict(fields)
    for name in ("runs_dir", "data_dir", "run_dir"):
        if values.get(name) is not None:
            values[name] = Path(values[name])
    return RunConfig(**values)


def run_job(payload: dict[str, Any]) -> dict[str, Any]:
    """Run one episode here; returns ``{status, cost_usd, error, host, archive?}``."""
    from rgym_core.runner import Episode, RunError
    from rgym_core.sweep.executors import preparing

    config = _config(payload["config"])
    os.environ.update({k: str(v) for k, v in dict(payload.get("env") or {}).items() if k in SHIPPED_ENV})
    scratch: Path | None = None
    if payload.get("ship"):
        scratch = Path(tempfile.mkdtemp(prefix="rgym-sweep-job-"))
        config.run_dir = scratch / ARCHIVE_ROOT
    out: dict[str, Any] = {"cell": payload.get("cell"), "host": socket.gethostname(), "pid": os.getpid()}
    try:
        try:
            registry = worker_registry(payload.get("plugins"))
            episode = Episode(config, registry)
            with preparing(episode):
                episode.prepare()
            result = episode.run()
            out.update(status=result.status.value, cost_usd=result.cost_usd, error=result.error)
        except RunError as exc:
            out.update(status=None, error=str(exc))
        except Exception as exc:  # noqa: BLE001 - reported to the sweep
            out.update(status=None, error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc())
        if scratch is not None and (scratch / ARCHIVE_ROOT).is_dir():
            out["archive"] = pack_run(scratch / ARCHIVE_ROOT)
        return out
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def pack_run(run_dir: Path) -> bytes:
    """A run directory as an uncompressed tar (its workspace archive is compressed already)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(run_dir, arcname=ARCHIVE_ROOT)
    return buffer.getvalue()


def unpack_run(archive: bytes, folder: Any, cell: Any) -> Path:
    """Unpack a shipped run directory beside the sweep folder, then move it to the
    cell's place in one rename (so a kill never leaves half a run there)."""
    incoming = folder.incoming(cell)
    incoming.mkdir(parents=True)
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as tar:
            for member in tar.getmembers():
                top = member.name.split("/", 1)[0]
                if top != ARCHIVE_ROOT or not (member.isfile() or member.isdir() or member.issym()):
                    raise ValueError(f"unexpected entry in a shipped run directory: {member.name!r}")
            tar.extractall(incoming, filter="data")
        return folder.place(cell, incoming / ARCHIVE_ROOT)
    finally:
        shutil.rmtree(incoming, ignore_errors=True)


__all__ = ["ARCHIVE_ROOT", "SHIPPED_ENV", "job_payload", "pack_run", "plugin_names", "run_job", "unpack_run",
           "worker_registry"]
