"""Throwaway virtual environments that see the running environment's packages.

Tests that ``pip install`` a pack must not change the environment running them.
``venv``'s ``system_site_packages=True`` does not help inside a virtual
environment: it inherits the *base* interpreter's packages, not the active
venv's (so ``rgym_core``'s dependencies are missing there).  A
:class:`ChildEnv` is an empty venv whose ``site-packages`` holds one ``.pth``
line that adds the running interpreter's site folders (editable installs
included) *after* its own, so what a test installs into it comes first, and
uninstalling it touches only the child::

    from rgym_core.testing.venvs import ChildEnv

    env = ChildEnv.create(tmp_path / "venv")
    env.pip("install", "--no-deps", "--no-build-isolation", str(PACK))
    run_cli("list", "tasks", python=env.python)
"""

from __future__ import annotations

import contextlib
import os
import shutil
import site
import subprocess
import sys
import sysconfig
import tempfile
import venv
from collections.abc import Iterator
from pathlib import Path

from attrs import define

PTH_NAME = "_rgym_parent_env.pth"


def parent_site_dirs() -> list[str]:
    """The running interpreter's site folders, in the order it reads them."""
    dirs = list(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    purelib = sysconfig.get_paths()["purelib"]
    if purelib not in dirs:
        dirs.append(purelib)
    return [d for d in dirs if os.path.isdir(d)]


@define(frozen=True)
class ChildEnv:
    """A virtual environment layered on the running one."""

    root: Path

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    @property
    def site_packages(self) -> Path:
        out = subprocess.run([str(self.python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True, env=clean_env())
        return Path(out.stdout.strip())

    @classmethod
    def create(cls, root: Path) -> ChildEnv:
        """Create the venv at ``root`` (no pip of its own: :meth:`pip` runs this
        interpreter's pip against it)."""
        venv.EnvBuilder(system_site_packages=False, with_pip=False, clear=True, symlinks=True).create(root)
        env = cls(Path(root))
        lines = "".join(f"import site; site.addsitedir({d!r})\n" for d in parent_site_dirs())
        (env.site_packages / PTH_NAME).write_text(lines)
        return env

    @classmethod
    @contextlib.contextmanager
    def temporary(cls, prefix: str = "rgym-test-venv-") -> Iterator[ChildEnv]:
        """A child environment in a new folder that other users can traverse and that
        is not under ``/tmp``, removed afterwards.

        Episodes run agents and graders as other, unprivileged users, inside sandboxes
        that put their own ``/tmp`` over the host's: the interpreter they start must be
        readable by those users and visible there.  pytest's ``tmp_path`` is neither
        (``/tmp/pytest-of-USER`` is mode 0700), so tests that run episodes in a child
        environment use this.  The folder is made under ``RGYM_TEST_VENV_DIR``, else
        ``/var/tmp``.
        """
        base = Path(os.environ.get("RGYM_TEST_VENV_DIR") or "/var/tmp")
        base.mkdir(parents=True, exist_ok=True)
        root = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
        os.chmod(root, 0o755)
        try:
            yield cls.create(root / "venv")
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def pip(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        """``pip ARGS`` into this environment (raises ``CalledProcessError`` with the output)."""
        done = subprocess.run([sys.executable, "-m", "pip", "--python", str(self.python), "--quiet",
                               "--disable-pip-version-check", "--no-input", *args],
                              capture_output=True, text=True, timeout=timeout, env=clean_env())
        if done.returncode != 0:
            raise subprocess.CalledProcessError(done.returncode, done.args, done.stdout, done.stderr)
        return done

    def run(self, *args: str, timeout: float = 300, **kwargs: object) -> subprocess.CompletedProcess[str]:
        """Run this environment's Python with ``args``."""
        env = kwargs.pop("env", None) or clean_env()
        return subprocess.run([str(self.python), *args], capture_output=True, text=True, timeout=timeout,
                              env=env, **kwargs)  # type: ignore[call-overload]


def clean_env() -> dict[str, str]:
    """This process's environment without what would leak into a child venv
    (``PYTHONHOME``, ``VIRTUAL_ENV``, pip's install targets, and rgym's plugin filters)."""
    drop = ("PYTHONHOME", "VIRTUAL_ENV", "PIP_TARGET", "PIP_PREFIX", "PIP_USER",
            "RGYM_PLUGINS", "RGYM_DISABLE_PLUGINS")
    return {k: v for k, v in os.environ.items() if k not in drop}


__all__ = ["ChildEnv", "clean_env", "parent_site_dirs"]
