"""Host folders, owners and permissions of a local episode's workspace."""

from __future__ import annotations

import errno
import logging
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rgym_core.isolation.bubblewrap import drop_privileges_argv
from rgym_core.sandbox import SandboxError, WorkspaceLayout
from rgym_core.sandboxes.local.confinement import MODE_BUBBLEWRAP, MODE_UID, Confinement

log = logging.getLogger("rgym_core.sandboxes.local")
_reachable: set[str] = set()


def create_root(work_root: Path | None, run_id: str) -> Path:
    """A new private folder for one episode (under ``work_root`` or the temp folder)."""
    if work_root is not None:
        Path(work_root).mkdir(parents=True, exist_ok=True)
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", run_id)[:40] or "run"
    return Path(tempfile.mkdtemp(prefix=f"rgym-{slug}-",
                                 dir=str(work_root) if work_root is not None else None))


def check_mount(mount: str) -> Path:
    rel = Path(mount)
    if rel.is_absolute() or ".." in rel.parts or not rel.parts or mount.strip() in ("", "."):
        raise ValueError(f"dataset mount '{mount}' must be a relative folder inside the "
                         "workspace, without '..'")
    return rel


#: In :func:`lay_out`'s result: cover this mount with an empty folder.
COVER = Path("/dev/null/rgym-cover")


def lay_out(conf: Confinement, layout: WorkspaceLayout) -> dict[str, Path]:
    """Copy the starter files and place the datasets; return the dataset folders
    bubblewrap binds read-only (mount -> public folder, or :data:`COVER` for a
    private part found inside a public folder), empty in other modes."""
    ws = conf.host_workspace
    assert ws is not None
    chown = conf.separate_user
    if layout.starter is not None:
        shutil.copytree(layout.starter, ws, symlinks=True, dirs_exist_ok=True)
    if chown:
        chown_tree(ws, conf.uid, conf.gid)
    binds: dict[str, Path] = {}
    for mount, prepared in layout.datasets.items():
        rel = check_mount(mount)
        public = Path(prepared.public)
        if not public.is_dir():
            raise FileNotFoundError(errno.ENOENT, "dataset folder not found", str(public))
        # Parents (and, under bubblewrap, the mount point) belong to the agent.
        last = rel.parts if conf.mode == MODE_BUBBLEWRAP else rel.parts[:-1]
        folder = ws
        for part in last:
            folder = folder / part
            if not folder.exists():
                folder.mkdir()
                if chown:
                    os.chown(folder, conf.uid, conf.gid)
        if conf.mode == MODE_BUBBLEWRAP:
            binds[rel.as_posix()] = public
            private = Path(prepared.private) if prepared.private is not None else None
            if private is not None and private.resolve().is_relative_to(public.resolve()):
                # A private part inside the public folder: covered inside the sandbox.
                inner = private.resolve().relative_to(public.resolve())
                binds[f"{rel.as_posix()}/{inner.as_posix()}"] = COVER
        else:
            private = Path(prepared.private) if prepared.private is not None else None
            place_dataset_copy(public, ws / rel, root_owned=conf.mode == MODE_UID, skip=private)
    return binds


def chown_tree(top: Path, uid: int, gid: int) -> None:
    os.lchown(top, uid, gid)
    for folder, dirs, files in os.walk(top):
        for name in dirs + files:
            os.lchown(os.path.join(folder, name), uid, gid)


def place_dataset_copy(public: Path, target: Path, *, root_owned: bool,
                       skip: Path | None = None) -> None:
    """Copy a dataset into the workspace read-only: owned by root (folders 0755,
    files 0644) when rgym runs as root, else with the write bits removed.  ``skip``
    (the private part, should it lie inside the public folder) is left out."""
    hidden = skip.resolve() if skip is not None else None

    def ignore(folder: str, names: list[str]) -> list[str]:
        if hidden is None:
            return []
        return [n for n in names if Path(folder, n).resolve() == hidden]

    def place(src: str, dst: str) -> None:
        st = os.stat(src)
        if root_owned and st.st_uid == 0 and stat.S_IMODE(st.st_mode) in (0o644, 0o444):
            try:  # already root-owned and read-only for others: share the inode
                os.link(src, dst)
                return
            except OSError:
                pass
        shutil.copy2(src, dst)

    shutil.copytree(public, target, copy_function=place, dirs_exist_ok=True, ignore=ignore)
    for folder, _dirs, files in os.walk(target):
        for name in files:
            path = os.path.join(folder, name)
            if os.path.islink(path):
                continue
            if root_owned:
                os.chown(path, 0, 0)
                if stat.S_IMODE(os.stat(path).st_mode) != 0o444:
                    os.chmod(path, 0o644)
            else:
                os.chmod(path, stat.S_IMODE(os.stat(path).st_mode) & ~0o222)
        if root_owned:
            os.chown(folder, 0, 0)
            os.chmod(folder, 0o755)
    if not root_owned:  # folders last, or the walk could not list them
        for folder, _, _ in os.walk(target, topdown=False):
            os.chmod(folder, 0o555)


def ensure_interpreter_reachable(uid: int, gid: int) -> list[str]:
    """Make sure a pooled uid can run :data:`sys.executable` on the host (mode
    ``uid``).  If it cannot, grant traverse-only permission (``o+x``, never read)
    on the ancestor folders that block it, log one warning naming them, and return
    them."""
    if sys.executable in _reachable:
        return []

    def probe() -> subprocess.CompletedProcess[str]:
        return subprocess.run([*drop_privileges_argv(uid, gid), sys.executable, "-c",
                               "import site"], capture_output=True, text=True, cwd="/",
                              env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"})

    changed: list[str] = []
    ok = probe().returncode == 0
    if not ok:
        targets = {sys.executable, os.path.realpath(sys.executable), sys.prefix,
                   sys.base_prefix, sys.exec_prefix}
        for target in sorted(targets):
            for folder in reversed(Path(target).parents):
                mode = os.stat(folder).st_mode
                if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
                    os.chmod(folder, stat.S_IMODE(mode) | stat.S_IXOTH)
                    changed.append(str(folder))
        if changed:
            log.warning("rgym/local: the agent user could not run %s; granted traverse-only "
                        "permission (o+x) on: %s", sys.executable, ", ".join(changed))
        result = probe()
        if result.returncode:
            raise SandboxError(f"rgym/local: agent users cannot run {sys.executable}: "
                               f"{result.stderr.strip()}; install Python where other users "
                               "can read it, or install bubblewrap", reason="interpreter")
    _reachable.add(sys.executable)
    return changed


def remove_tree(path: Path) -> None:
    def fix(func: Callable[..., Any], name: str, exc: Any) -> None:
        parent = os.path.dirname(name)
        try:
            os.chmod(parent, stat.S_IMODE(os.lstat(parent).st_mode) | stat.S_IWUSR | stat.S_IXUSR)
            func(name)
        except OSError:
            pass

    shutil.rmtree(path, onerror=fix)
    if path.exists():
        log.warning("rgym/local: could not remove %s entirely", path)
