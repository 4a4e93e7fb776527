"""Errors before the run: one line, exit 2, no traceback, no run folder.

Every test runs the real ``rgym`` CLI in a fresh interpreter (``run_cli``).  The
names come from the dev install (``requirements-dev.txt`` installs every pack of
the checkout), so a missing pack fails these tests rather than skipping them.
The last tests read the packs' ``pyproject.toml`` files and the README: what
each pack declares it provides, how it pins torch, and how it is installed.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement

from rgym_core.testing import run_cli

REPO = Path(__file__).resolve().parents[1]
PACKS = sorted(p.parent for pattern in ("plugins/*/pyproject.toml", "agents/*/pyproject.toml",
                                        "task-packs/*/pyproject.toml") for p in REPO.glob(pattern))


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    """The single line ``rgym`` printed on stderr, after checking it exited 2 without a traceback."""
    assert proc.returncode == 2, f"exit {proc.returncode}; stderr:\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one line, got {len(lines)}:\n{proc.stderr}"
    assert lines[0].startswith("error: "), lines[0]
    return lines[0]


# --------------------------------------------------------------------------- did you mean


@pytest.mark.parametrize(("args", "expected"), [
    (["mlgym/blottto"], "did you mean mlgym/blotto?"),
    (["rgym/demo", "--agent", "basline"], "did you mean baseline/baseline?"),
    (["rgym/demo", "--tool", "literatur"], "did you mean literature?"),
    (["rgym/demo", "--sandbox", "dokcer"], "did you mean docker/docker?"),
])
def test_a_typo_gets_one_line_with_did_you_mean(tmp_path: Path, args: list[str], expected: str) -> None:
    runs = tmp_path / "runs"
    line = one_error_line(run_cli("run", *args, "--runs-dir", str(runs), cwd=REPO))
    assert expected in line, line
    assert not runs.exists(), "a run folder was created for a run that never started"


def test_a_name_far_from_any_gets_the_installed_list_not_a_guess(tmp_path: Path) -> None:
    line = one_error_line(run_cli("run", "zz/qqqqqq", "--runs-dir", str(tmp_path / "r"), cwd=REPO))
    assert "did you mean" not in line and "installed: " in line and "rgym/demo" in line


# --------------------------------------------------------------------------- --runs-dir / --sweep-dir


@contextlib.contextmanager
def unwritable_folder(path: Path) -> Iterator[Path]:
    """A folder that refuses new entries, even to root (``chattr +i``), else by its mode."""
    path.mkdir()
    if os.geteuid() == 0:
        subprocess.run(["chattr", "+i", str(path)], check=True, capture_output=True)
    else:
        path.chmod(0o555)
    try:
        with pytest.raises(OSError):
            (path / "probe").mkdir()
        yield path
    finally:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(path)], check=True, capture_output=True)
        else:
            path.chmod(0o755)


def test_runs_dir_that_is_a_file(tmp_path: Path) -> None:
    target = tmp_path / "runs"
    target.write_text("not a folder\n")
    line = one_error_line(run_cli("run", "rgym/demo", "--runs-dir", str(target), "-q", cwd=REPO))
    assert str(target) in line and "is a file" in line and "--runs-dir" in line
    assert target.read_text() == "not a folder\n"


def test_runs_dir_under_a_file(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("")
    target = tmp_path / "afile" / "runs"
    line = one_error_line(run_cli("run", "rgym/demo", "--runs-dir", str(target), "-q", cwd=REPO))
    assert str(tmp_path / "afile") in line and "is a file" in line


def test_runs_dir_with_a_missing_parent(tmp_path: Path) -> None:
    target = tmp_path / "no-such-parent" / "runs"
    line = one_error_line(run_cli("run", "rgym/demo", "--runs-dir", str(target), "-q", cwd=REPO))
    assert str(tmp_path / "no-such-parent") in line and "does not exist" in line and "mkdir -p" in line
    assert not (tmp_path / "no-such-parent").exists()


def test_runs_dir_that_cannot_be_written(tmp_path: Path) -> None:
    with unwritable_folder(tmp_path / "runs") as target:
        line = one_error_line(run_cli("run", "rgym/demo", "--runs-dir", str(target), "-q", cwd=REPO))
        assert str(target) in line and "cannot write" in line and "--runs-dir" in line
        assert list(target.iterdir()) == []


def test_runs_dir_that_does_not_exist_yet_is_created(tmp_path: Path) -> None:
    target = tmp_path / "runs"
    proc = run_cli("run", "rgym/demo", "--runs-dir", str(target), "-q", cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert list(target.rglob("trajectory.jsonl"))


def test_json_run_reports_the_folder_error_as_json(tmp_path: Path) -> None:
    target = tmp_path / "runs"
    target.write_text("")
    proc = run_cli("run", "rgym/demo", "--runs-dir", str(target), "--json", cwd=REPO)
    assert proc.returncode == 2 and "is a file" in proc.stdout and "Traceback" not in proc.stderr


@pytest.mark.parametrize("kind", ["file", "missing-parent", "unwritable"])
def test_sweep_dir_that_cannot_be_used(tmp_path: Path, kind: str) -> None:
    with contextlib.ExitStack() as stack:
        if kind == "file":
            target = tmp_path / "sweep"
            target.write_text("")
        elif kind == "missing-parent":
            target = tmp_path / "nope" / "sweep"
        else:
            target = stack.enter_context(unwritable_folder(tmp_path / "sweep"))
        proc = run_cli("sweep", "rgym/demo", "--agent", "scripted", "--sweep-dir", str(target), "--quiet",
                       cwd=REPO)
        line = one_error_line(proc)
        assert "--sweep-dir" in line and str(target.parent if kind == "missing-parent" else target) in line
        assert target.is_file() or not target.exists() or list(target.iterdir()) == []


# --------------------------------------------------------------------------- packs that did not load


def test_a_task_of_a_disabled_pack_names_the_pack(tmp_path: Path) -> None:
    proc = run_cli("--disable-plugin", "rgym-task-tabular", "run", "mlgym/titanic",
                   "--runs-dir", str(tmp_path / "r"), cwd=REPO)
    line = one_error_line(proc)
    assert "it comes with the rgym-task-tabular pack, which is installed but disabled" in line


def write_failing_pack(root: Path) -> Path:
    """An installed distribution (a ``.dist-info`` on ``PYTHONPATH``) whose
    ``rgym_register_tasks`` raises."""
    (root / "rgym_failpack").mkdir(parents=True)
    (root / "rgym_failpack" / "__init__.py").write_text(
        "from rgym_core import hookimpl\n\n\n"
        "@hookimpl\ndef rgym_register_tasks():\n    raise RuntimeError('the task table is corrupt')\n")
    info = root / "rgym_failpack-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rgym-failpack\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[rgym]\nfailpack = rgym_failpack\n")
    return root


def test_unknown_task_names_a_pack_whose_hook_failed(tmp_path: Path) -> None:
    site = write_failing_pack(tmp_path / "site")
    env = {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    proc = run_cli("run", "failpack/thing", "--runs-dir", str(tmp_path / "r"), env=env, cwd=REPO)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    error = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(error) == 1, proc.stderr
    assert "unknown task 'failpack/thing'" in error[0]
    assert "(pack rgym-failpack failed to load: RuntimeError: the task table is corrupt;" in error[0]
    # Without the failing pack the same miss says nothing about it.
    plain = run_cli("run", "failpack/thing", "--runs-dir", str(tmp_path / "r"), cwd=REPO)
    assert "rgym-failpack" not in plain.stderr


# --------------------------------------------------------------------------- pack metadata


def _project(pack: Path) -> dict[str, Any]:
    project: dict[str, Any] = tomllib.loads((pack / "pyproject.toml").read_text())["project"]
    return project


def _requirements(pack: Path) -> list[Requirement]:
    return [Requirement(d) for d in _project(pack).get("dependencies", [])]


def _shipped_ids(pack: Path) -> set[str]:
    """The ids of the tasks and datasets a pack's spec files define."""
    ids = set()
    for spec in [*pack.glob("*/tasks/*/task.yaml"), *pack.glob("*/datasets/*.yaml")]:
        data = yaml.safe_load(spec.read_text())
        if isinstance(data, dict) and isinstance(data.get("id"), str):
            ids.add(data["id"])
    return ids


@pytest.mark.parametrize("pack", PACKS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_pack_declares_what_it_provides(pack: Path) -> None:
    project = _project(pack)
    entry_points = project.get("entry-points", {})
    assert isinstance(entry_points, dict)
    if "rgym" not in entry_points:
        return  # a library pack (researchgym-common): it registers nothing
    provides = entry_points.get("rgym.provides", {})
    assert provides, f"{pack.relative_to(REPO)}/pyproject.toml: no [project.entry-points.\"rgym.provides\"]"
    missing = _shipped_ids(pack) - set(provides)
    assert not missing, f"{pack.relative_to(REPO)}/pyproject.toml: rgym.provides lacks {sorted(missing)}"


TORCH_OK, TORCH_NEWER = "2.13.0", "2.14.1"


@pytest.mark.parametrize("pack", PACKS, ids=lambda p: str(p.relative_to(REPO)))
def test_torch_is_pinned_to_the_cpu_release(pack: Path) -> None:
    """An open ``torch>=2.3`` pulls the newest torch with CUDA and GBs of nvidia wheels."""
    for req in _requirements(pack):
        if req.name == "torch":
            assert req.specifier.contains(TORCH_OK), f"{pack.name}: {req} refuses torch {TORCH_OK}"
            assert not req.specifier.contains(TORCH_NEWER), f"{pack.name}: {req} lets pip pick {TORCH_NEWER}"


def test_readme_install_lines_cover_every_pack_with_its_dependencies() -> None:
    readme = (REPO / "README.md").read_text()
    lines = [line for line in readme.splitlines() if "pip install" in line or line.lstrip().startswith("- `./")]
    names = {str(_project(p)["name"]): p for p in PACKS}
    problems = []
    for pack in PACKS:
        folder = "./" + str(pack.relative_to(REPO))
        deps = [req.name for req in _requirements(pack)]
        needed = ["./" + str(names[d].relative_to(REPO)) for d in deps if d in names]
        with_it = [line for line in lines if re.search(re.escape(folder) + r"(?![\w-])", line)]
        if not with_it:
            problems.append(f"{folder}: no install line")
        elif not any(all(re.search(re.escape(n) + r"(?![\w-])", line) for n in needed) for line in with_it):
            problems.append(f"{folder}: no install line also names {', '.join(needed)}")
    assert not problems, "README.md:\n" + "\n".join(problems)


def test_suggestions_compare_full_short_and_namespace_names() -> None:
    from rgym_core.registry import suggestions

    names = ["mlgym/blotto", "mlgym/titanic", "literature/literature_search", "rgym/local"]
    assert suggestions("mlgym/blottto", names) == ["mlgym/blotto"]
    assert suggestions("titanik", names) == ["mlgym/titanic"]  # a short name: the full one is suggested
    assert suggestions("literatur", names) == []  # namespaces only for tools
    assert suggestions("literatur", names, namespaces=True) == ["literature"]
    assert suggestions("x/blottto", names) == []  # with a slash, only full names compare
    assert suggestions("qqqq", names) == []
