"""The ResearchGym loader on the real pinned archive (../shared/data/researchgym) and on
hostile or edited copies."""

from __future__ import annotations

import io
import json
import os
import subprocess
import tarfile
from pathlib import Path

import pytest
from rgym_researchgym.leakage import policy_config
from rgym_researchgym.pins import TREE_HASHES, pinned_entries
from rgym_researchgym.prepare import TaskLayout, prepare_task
from rgym_researchgym.source import TaskSourceError, copy_out, find_task, verify
from rgym_researchgym.taskdir import HIDDEN, BlockedUrls
from rgym_researchgym.treehash import Entry, blob_id, tree_of_entries, tree_of_folder

DATA = Path(os.environ.get("RGYM_TEST_DATA_DIR",
                           Path(__file__).resolve().parents[3] / ".." / "shared" / "data")) / "researchgym"
needs_archive = pytest.mark.skipif(not any(DATA.glob("*.tar.gz")),
                                   reason=f"no ResearchGym archive in {DATA} (set RGYM_TEST_DATA_DIR)")


def test_tree_hash_matches_git(tmp_path: Path) -> None:
    """Our tree ids equal git's for files, executables, nested folders and names that sort
    differently as folders (``a.b`` vs ``a/``)."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.py").write_text("print(1)\n")
    (tmp_path / "a.b").write_text("dot\n")
    (tmp_path / "run.sh").write_text("#!/bin/sh\n")
    (tmp_path / "run.sh").chmod(0o755)
    (tmp_path / "a" / "__pycache__").mkdir()
    (tmp_path / "a" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"junk")
    git = subprocess.run(["git", "--version"], capture_output=True)
    if git.returncode != 0:
        pytest.skip("git is not installed")
    env = {**os.environ, "GIT_DIR": str(tmp_path / ".gitdir"), "GIT_WORK_TREE": str(tmp_path)}
    subprocess.run(["git", "init", "-q"], env=env, check=True)
    subprocess.run(["git", "add", "a/x.py", "a.b", "run.sh"], env=env, check=True, cwd=tmp_path)
    expected = subprocess.run(["git", "write-tree"], env=env, check=True, capture_output=True,
                              text=True).stdout.strip()
    import shutil
    shutil.rmtree(tmp_path / ".gitdir")
    assert tree_of_folder(tmp_path) == expected


def test_pins_hash_to_their_trees() -> None:
    for task, tree in TREE_HASHES.items():
        assert tree_of_entries(pinned_entries(task)) == tree


@needs_archive
@pytest.mark.parametrize("task", sorted(TREE_HASHES))
def test_archive_verifies(task: str) -> None:
    source = find_task(DATA, task)
    assert source.kind == "archive"
    assert verify(source) == TREE_HASHES[task]


@needs_archive
def test_edited_checkout_is_refused_naming_both_hashes(tmp_path: Path) -> None:
    task = "time-series-explanation"
    checkout = tmp_path / "ResearchGym" / "tasks" / "test" / task
    copy_out(find_task(DATA, task), checkout)
    assert verify(find_task(tmp_path, task)) == TREE_HASHES[task]
    (checkout / "real" / "main.py").write_text("print('edited')\n")
    (checkout / "extra.txt").write_text("mine\n")
    with pytest.raises(TaskSourceError) as err:
        verify(find_task(tmp_path, task))
    actual = tree_of_folder(checkout)
    message = str(err.value)
    assert TREE_HASHES[task] in message and actual in message
    assert "changed: real/main.py" in message and "added: extra.txt" in message
    # a good cached copy does not hide the edit
    layout = TaskLayout(task)
    cache = tmp_path / "cache"
    with pytest.raises(TaskSourceError, match=actual):
        prepare_task(layout, cache, tmp_path)


def _archive(tmp_path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    path = tmp_path / "data" / "evil.tar.gz"
    path.parent.mkdir()
    with tarfile.open(path, "w:gz") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _file(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


@pytest.mark.parametrize("bad", ["traversal", "symlink"])
def test_hostile_archive_is_refused(tmp_path: Path, bad: str) -> None:
    prefix = "ResearchGym/tasks/test/time-series-explanation/"
    members = [_file(prefix + "task_description.md", b"x")]
    if bad == "traversal":
        members.append(_file(prefix + "../../../../etc/owned", b"x"))
    else:
        link = tarfile.TarInfo(prefix + "link")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/shadow"
        members.append((link, None))
    _archive(tmp_path, members)
    with pytest.raises(TaskSourceError, match="unsafe member|link or special"):
        verify(find_task(tmp_path / "data", "time-series-explanation"))


def test_missing_data_dir_says_how_to_get_it(tmp_path: Path) -> None:
    with pytest.raises(TaskSourceError, match="--data-dir"):
        find_task(None, "materials-tokenization")
    with pytest.raises(TaskSourceError, match="no ResearchGym checkout or archive"):
        find_task(tmp_path, "materials-tokenization")


@needs_archive
def test_prepared_workspace_hides_grading_and_moves_labels(tmp_path: Path) -> None:
    layout = TaskLayout("materials-tokenization",
                        private_globs=("eval/classification/ner/datasets/NER_MATSCHOLAR/test.txt",))
    prepared = prepare_task(layout, tmp_path, DATA)
    workspace = {p.relative_to(prepared.workspace).as_posix()
                 for p in prepared.workspace.rglob("*") if p.is_file()}
    for hidden in HIDDEN:
        assert not any(w == hidden or w.startswith(hidden + "/") for w in workspace), hidden
    assert "eval/classification/ner/datasets/NER_MATSCHOLAR/test.txt" not in workspace
    assert (prepared.private / "eval/classification/ner/datasets/NER_MATSCHOLAR/test.txt").is_file()
    assert (prepared.private / "grading" / "grade.py").is_file()
    assert oct(prepared.private.stat().st_mode & 0o777) == "0o700"
    assert json.loads((prepared.public / "source.json").read_text())["tree"] == TREE_HASHES[
        "materials-tokenization"]
    # an intact entry is reused as it is, a damaged one is rebuilt
    entry = prepared.workspace.parent
    built = entry.stat().st_ino
    assert prepare_task(layout, tmp_path, DATA).workspace.parent.stat().st_ino == built
    victim = prepared.workspace / "code" / "train.py"
    victim.write_text("tampered")
    again = prepare_task(layout, tmp_path, DATA)
    assert (again.workspace / "code" / "train.py").read_text() != "tampered"
    assert again.workspace.parent.stat().st_ino != built


def test_blocked_urls_become_policy() -> None:
    blocked = BlockedUrls(urls=("https://www.arxiv.org/abs/2506.05035", "github.com/drumpt/TIMING"),
                          patterns=("*TIMING*ICML*",))
    config = policy_config(blocked)
    assert config["blocked_url_patterns"] == ["*arxiv.org/abs/2506.05035*",
                                              "*github.com/drumpt/TIMING*", "*TIMING*ICML*"]
    assert config["blocked_papers"] == ["2506.05035"]


def test_blob_id_is_git_blob() -> None:
    assert blob_id(b"") == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
    assert tree_of_entries([Entry("a", "100644", blob_id(b""))]) == \
        "496d6428b9cf92981dc9495211e6e1120fb6f2ba"


TASK_YAML = """
id: researchgym/materials-tokenization
name: test task
description: a task of the loader's tests
starter_files: null
metrics: [{name: f1, direction: maximize, primary: true}]
datasets: [{id: researchgym/materials-tokenization, mount: .researchgym, starter: true}]
tool_config:
  literature: {blocked_papers: ["own-id"]}
"""


@needs_archive
def test_blocked_urls_reach_the_tools_through_policy_files(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The registered spec names the prepared task's policy file in the core's shared
    ``tool_config.leakage``: before the task is prepared the tools fail closed; after, the
    verified blocked_urls.yaml and the pack's own entries both apply.  The spec is never
    changed after registration."""
    from rgym_researchgym.pack import policy_file, researchgym_task
    from rgym_researchgym.prepare import default_cache_dir

    from rgym_core.leakage import LeakageConfigError, task_policy

    monkeypatch.setenv("RGYM_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "task"
    folder.mkdir()
    (folder / "task.yaml").write_text(TASK_YAML)
    spec = researchgym_task(folder, "materials-tokenization")
    before = json.dumps(spec.tool_config, sort_keys=True)
    assert spec.tool_config["leakage"]["policy_files"] == [str(policy_file("materials-tokenization"))]
    with pytest.raises(LeakageConfigError):
        task_policy(spec.tool_config, "literature", base_dir=folder)
    prepare_task(TaskLayout("materials-tokenization"), default_cache_dir(), DATA)
    for tool in ("literature", "pdf"):
        policy = task_policy(spec.tool_config, tool, base_dir=folder)
        assert policy.url_blocked("https://arxiv.org/abs/2506.11115")
        assert policy.url_blocked("https://github.com/yerimoh/MATTER/tree/main")
        assert not policy.url_blocked("https://arxiv.org/abs/1810.04805")
    assert "own-id" in task_policy(spec.tool_config, "literature", base_dir=folder).blocked_ids
    assert json.dumps(spec.tool_config, sort_keys=True) == before


def test_task_yaml_must_take_its_starter_files_from_the_prepared_task(tmp_path: Path) -> None:
    """The prepared workspace is the starter (``starter: true``), in the task and every
    profile; a grader that imports rgym_confined includes it by module name."""
    from rgym_researchgym.pack import researchgym_task

    folder = tmp_path / "task"
    (folder / "grader").mkdir(parents=True)
    (folder / "grader" / "evaluate.py").write_text("import rgym_confined\n")
    base = TASK_YAML.replace("tool_config:", "grader: {include: {'module:rgym_confined': rgym_confined.py}}\n"
                                             "tool_config:")
    (folder / "task.yaml").write_text(base)
    spec = researchgym_task(folder, "materials-tokenization")
    assert spec.starter_dataset is not None and spec.starter_files is None
    assert spec.path("module:rgym_confined").name == "rgym_confined.py"
    no_starter = base.replace(", starter: true", "")
    (folder / "task.yaml").write_text(no_starter)
    with pytest.raises(ValueError, match=r"datasets: mount 'researchgym/materials-tokenization' with "
                                         r"'starter: true'"):
        researchgym_task(folder, "materials-tokenization")
    profile = base + ("profiles:\n  cpu:\n    datasets: [{id: researchgym/materials-tokenization, "
                      "mount: .researchgym}]\n")
    (folder / "task.yaml").write_text(profile)
    with pytest.raises(ValueError, match=r"profiles\['cpu'\]\.datasets"):
        researchgym_task(folder, "materials-tokenization")
    (folder / "task.yaml").write_text(TASK_YAML)
    with pytest.raises(ValueError, match="grader.include: add"):
        researchgym_task(folder, "materials-tokenization")
