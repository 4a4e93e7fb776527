"""The sweep folder: a manifest, one run directory per cell, and the sweep's own state.

::

    SWEEP_DIR/
      sweep.json                     the manifest: the matrix, the shared options, every cell
      rgym__demo/baseline/seed-1/    one run directory per cell (Cell.key), read by rgym score
      .sweep/lock                    held (flock) by the process driving the sweep
      .sweep/events.jsonl            every event of every invocation, one JSON line each
      .sweep/attempts/<cell>/<n>-<reason>/   earlier attempts of a cell, kept, never scored

Run directories are only ever created by the runner in their final place
(``RunConfig.run_dir``) or moved there whole by an executor that ran them
elsewhere, and an attempt that must be repeated is moved away (``rename``)
before its cell runs again.  So whatever kills the sweep, each cell's folder is
either a finished run (``result.json``, written atomically), a run still being
written, or a leftover of a killed one: :meth:`SweepFolder.state` tells which.
Hidden folders are skipped by :func:`rgym_core.rundir.iter_run_dirs`, so
``rgym score SWEEP_DIR`` sees exactly one run per cell.
"""

from __future__ import annotations

import enum
import fcntl
import json
import os
import shutil
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from attrs import define

from rgym_core import __version__
from rgym_core.records import EpisodeResult
from rgym_core.rundir import RunDir, RunDirError, RunState, is_run_dir
from rgym_core.sweep.matrix import Cell, SweepError, SweepSpec

MANIFEST = "sweep.json"
STATE_DIR = ".sweep"
FORMAT = 1
#: Statuses after which a re-run of the sweep runs the cell again without counting
#: the attempt against ``--retry-errors`` (the sweep itself was stopped).
INTERRUPTED = ("cancelled", "ungraded")


class SweepLocked(SweepError):
    """Another process drives this sweep folder."""


class CellState(enum.StrEnum):
    """Where one cell stands in the sweep folder."""

    #: No run directory: the cell has not run (or its attempt was moved away).
    MISSING = "missing"
    #: A result with a status the agent earned (submitted, autosubmitted...).
    DONE = "done"
    #: A result the infrastructure ended (error, sandbox error, killed...): retried
    #: while ``--retry-errors`` allows.
    FAILED = "failed"
    #: A result the sweep's own stop ended (cancelled, ungraded): run again.
    INTERRUPTED = "interrupted"
    #: No result yet, and its writer lives (or runs on another host).
    RUNNING = "running"
    #: No result and its writer is gone (the sweep was killed), or the folder holds no
    #: run, or an unreadable result: run again.
    LEFTOVER = "leftover"


@define
class CellStatus:
    """A cell's state, with its result when it has one."""

    state: CellState
    result: EpisodeResult | None = None
    detail: str = ""


def _atomic_json(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, sort_keys=False, default=str)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


class SweepFolder:
    """Typed access to one sweep folder (see the module's documentation)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._lock_fd: int | None = None

    # -- layout -------------------------------------------------------------------
    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST

    @property
    def state_dir(self) -> Path:
        return self.path / STATE_DIR

    @property
    def events_path(self) -> Path:
        return self.state_dir / "events.jsonl"

    @property
    def attempts_dir(self) -> Path:
        return self.state_dir / "attempts"

    def cell_dir(self, cell: Cell) -> Path:
        return self.path / cell.key

    def create(self) -> None:
        """Create the folder (and its state folder); refuses a folder that is a run directory."""
        if is_run_dir(self.path):
            raise SweepError(f"{self.path}: this is a run directory, not a sweep folder; choose "
                             "another --sweep-dir")
        if self.path.exists() and not self.path.is_dir():
            raise SweepError(f"{self.path}: not a folder")
        self.state_dir.mkdir(parents=True, exist_ok=True)

    # -- lock ---------------------------------------------------------------------
    @contextmanager
    def locked(self) -> Iterator[SweepFolder]:
        """Hold the sweep's lock (an ``flock``: a killed holder frees it) for the block."""
        self.create()
        lock = self.state_dir / "lock"
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                holder = os.pread(fd, 200, 0).decode(errors="replace").strip()
            finally:
                os.close(fd)
            raise SweepLocked(f"{self.path}: another rgym sweep is running on this folder"
                              + (f" ({holder})" if holder else "") + "; wait for it or stop it") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
        self._lock_fd = fd
        try:
            yield self
        finally:
            self._lock_fd = None
            os.close(fd)

    # -- manifest -----------------------------------------------------------------
    def read_manifest(self) -> dict[str, Any] | None:
        """The manifest, or ``None`` when the folder has none yet."""
        try:
            text = self.manifest_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise SweepError(f"{self.manifest_path}: cannot read: {exc.strerror}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SweepError(f"{self.manifest_path}: invalid JSON (line {exc.lineno}): {exc.msg}") from None
        if not isinstance(data, dict) or "spec" not in data:
            raise SweepError(f"{self.manifest_path}: not a sweep manifest")
        return data

    def manifest_spec(self) -> SweepSpec:
        manifest = self.read_manifest()
        if manifest is None:
            raise SweepError(f"{self.path}: no {MANIFEST} here; name tasks to start a sweep")
        return SweepSpec.from_data(manifest["spec"], where=str(self.manifest_path))

    def manifest_cells(self) -> list[Cell]:
        manifest = self.read_manifest() or {}
        return [Cell.from_data(c) for c in manifest.get("cells", [])]

    def write_manifest(self, spec: SweepSpec, cells: list[Cell], *, executor: str,
                       settings: dict[str, Any] | None = None) -> list[Cell]:
        """Record ``spec`` and ``cells`` (joined to the cells already recorded: a sweep
        may grow) and return every cell of the folder.  Refuses shared options that
        differ from those the folder's runs were made with."""
        old = self.read_manifest()
        known: list[Cell] = []
        if old is not None:
            old_spec = SweepSpec.from_data(old["spec"], where=str(self.manifest_path))
            if old_spec.fingerprint() != spec.fingerprint():
                raise SweepError(self._mismatch(old_spec, spec))
            known = [Cell.from_data(c) for c in old.get("cells", [])]
        every = known + [c for c in cells if c not in known]
        if old is not None and every == known and old.get("spec") == spec.to_data() \
                and old.get("settings") == dict(settings or {}) and old.get("executor") == executor:
            return every  # nothing new: the folder stays as it is
        data = {
            "format": FORMAT,
            "name": spec.name or self.path.name,
            "rgym_version": __version__,
            "created": (old or {}).get("created", time.time()),
            "updated": time.time(),
            "executor": executor,
            "settings": dict(settings or {}),
            "fingerprint": spec.fingerprint(),
            "spec": spec.to_data(),
            "cells": [c.to_data() for c in every],
        }
        _atomic_json(self.manifest_path, data)
        return every

    def _mismatch(self, old: SweepSpec, new: SweepSpec) -> str:
        a, b = old.effective_run(), new.effective_run()
        diffs = [f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
        return (f"{self.path}: its runs were made with other options ({'; '.join(diffs)}); give the "
                "same options to continue this sweep, or choose another --sweep-dir")

    # -- cells --------------------------------------------------------------------
    def state(self, cell: Cell) -> CellStatus:
        """Where ``cell`` stands (see :class:`CellState`)."""
        path = self.cell_dir(cell)
        if not path.exists():
            return CellStatus(CellState.MISSING)
        if not is_run_dir(path):
            return CellStatus(CellState.LEFTOVER, detail="no run files")
        run = RunDir(path)
        state = run.state()
        if state is RunState.RUNNING:
            return CellStatus(CellState.RUNNING)
        if state is RunState.INCOMPLETE:
            return CellStatus(CellState.LEFTOVER, detail="killed before it finished")
        if state is RunState.CORRUPT:
            return CellStatus(CellState.LEFTOVER, detail="unreadable result.json")
        try:
            result = run.result()
        except RunDirError as exc:
            return CellStatus(CellState.LEFTOVER, detail=str(exc))
        status = result.status.value
        if status in INTERRUPTED:
            return CellStatus(CellState.INTERRUPTED, result, detail=status)
        if result.status.infrastructure:
            return CellStatus(CellState.FAILED, result, detail=status)
        return CellStatus(CellState.DONE, result, detail=status)

    def attempts(self, cell: Cell) -> list[tuple[int, str]]:
        """Earlier attempts of ``cell`` moved aside: (number, reason), oldest first."""
        folder = self.attempts_dir / cell.key
        out = []
        if folder.is_dir():
            for entry in folder.iterdir():
                number, _, reason = entry.name.partition("-")
                if number.isdigit():
                    out.append((int(number), reason))
        return sorted(out)

    def failed_attempts(self, cell: Cell) -> int:
        """How many earlier attempts the infrastructure ended (they count against --retry-errors)."""
        return sum(1 for _, reason in self.attempts(cell) if reason.startswith("failed"))

    def retire(self, cell: Cell, reason: str) -> Path | None:
        """Move the cell's run directory aside (kept, never scored) so the cell can run
        again; returns where it went (``None`` when there was nothing)."""
        path = self.cell_dir(cell)
        if not path.exists():
            return None
        folder = self.attempts_dir / cell.key
        folder.mkdir(parents=True, exist_ok=True)
        number = max((n for n, _ in self.attempts(cell)), default=0) + 1
        target = folder / f"{number}-{_reason_slug(reason)}"
        os.rename(path, target)
        return target

    def place(self, cell: Cell, source: Path) -> Path:
        """Move a run directory made elsewhere (same file system) into the cell's place."""
        target = self.cell_dir(cell)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.rename(source, target)
        return target

    def incoming(self, cell: Cell) -> Path:
        """A fresh private folder on the sweep's file system, for a run directory that
        arrives from another machine (moved into place with :meth:`place`)."""
        folder = self.state_dir / "incoming"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{cell.key.replace('/', '__')}-{os.getpid()}-{time.monotonic_ns()}"
        if path.exists():
            shutil.rmtree(path)
        return path


def _reason_slug(reason: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in reason)[:60] or "retired"


__all__ = ["CellState", "CellStatus", "INTERRUPTED", "MANIFEST", "STATE_DIR", "SweepFolder",
           "SweepLocked"]
