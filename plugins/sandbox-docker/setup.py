"""Ship the repository's ``containers/`` folder (the layer Dockerfiles) inside the
package, so ``--sandbox docker`` and ``rgym image build`` work from a normal,
non-editable install.  ``containers/`` at the top of the repository stays the one
source: the wheel gets a copy at build time, and the sdist carries one (at its top
level) so a wheel built from the sdist gets it too.  Editable installs read the
checkout's folder directly."""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent
PACKAGE = "rgym_sandbox_docker"


def containers_source() -> Path:
    """The repository's containers/ (building from a checkout), else the copy an
    sdist carries."""
    for candidate in (HERE.parent.parent / "containers", HERE / "containers"):
        if (candidate / "base" / "Dockerfile").is_file():
            return candidate
    raise SystemExit("rgym-sandbox-docker: cannot find the containers/ folder (base/Dockerfile) "
                     "next to this package's checkout or in its sdist")


def _copy(src: Path, dest: Path) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".*"))


class BuildPy(build_py):
    """build_py, plus the Dockerfiles as package data."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install finds the checkout's containers/ itself
        _copy(containers_source(), Path(self.build_lib) / PACKAGE / "containers")


class Sdist(sdist):
    """sdist, plus a copy of containers/ at the top of the source tree."""

    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        _copy(containers_source(), Path(base_dir) / "containers")


setup(cmdclass={"build_py": BuildPy, "sdist": Sdist})
