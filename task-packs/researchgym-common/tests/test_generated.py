"""`rgym_researchgym.generated.cached_generate`: a generated dataset is built once per
parameter set, reused while every file matches its manifest, rebuilt when a file is
changed, removed or added, and its private half is readable by its owner only."""

from __future__ import annotations

import stat
from pathlib import Path

from rgym_researchgym.generated import cached_generate, problems


def make_build(calls: list[int]):
    def build(dest: Path) -> None:
        calls.append(1)
        (dest / "public" / "train.csv").write_text("x,y\n1,2\n")
        (dest / "private" / "labels.csv").write_text("y\n2\n")
    return build


def test_reused_while_intact_rebuilt_when_damaged(tmp_path: Path) -> None:
    calls: list[int] = []
    build = make_build(calls)
    entry = cached_generate(tmp_path, "pack/tiny", "v1", {"rows": 1}, build)
    assert problems(entry) == [] and len(calls) == 1
    assert cached_generate(tmp_path, "pack/tiny", "v1", {"rows": 1}, build) == entry and len(calls) == 1
    for damage in (lambda: (entry / "public" / "train.csv").write_text("x,y\n9,9\n"),
                   lambda: (entry / "private" / "labels.csv").unlink(),
                   lambda: (entry / "public" / "extra.csv").write_text("planted\n")):
        damage()
        assert problems(entry) != []
        again = cached_generate(tmp_path, "pack/tiny", "v1", {"rows": 1}, build)
        assert again == entry and problems(entry) == []
        assert (entry / "public" / "train.csv").read_text() == "x,y\n1,2\n"
        assert not (entry / "public" / "extra.csv").exists()
    assert len(calls) == 4
    other = cached_generate(tmp_path, "pack/tiny", "v1", {"rows": 2}, build)  # new params: new entry
    assert other != entry and len(calls) == 5


def test_messages_name_the_file_and_what_is_wrong(tmp_path: Path) -> None:
    entry = cached_generate(tmp_path, "pack/tiny", "v1", {}, make_build([]))
    (entry / "public" / "train.csv").write_text("changed\n")
    (entry / "private" / "labels.csv").unlink()
    (entry / "public" / "new.csv").write_text("new\n")
    found = problems(entry)
    assert any(str(entry / "public" / "train.csv") in p and "changed" in p for p in found), found
    assert any(str(entry / "private" / "labels.csv") in p and "missing" in p for p in found), found
    assert any(str(entry / "public" / "new.csv") in p and "not in the manifest" in p for p in found), found
    (entry / "manifest.json").unlink()
    assert problems(entry) == [f"{entry / 'manifest.json'}: no manifest (an unfinished build)"]


def test_private_files_are_the_owner_s_only(tmp_path: Path) -> None:
    entry = cached_generate(tmp_path, "pack/tiny", "v1", {}, make_build([]))
    assert stat.S_IMODE((entry / "private").stat().st_mode) == 0o700
    assert stat.S_IMODE((entry / "private" / "labels.csv").stat().st_mode) == 0o600
    assert stat.S_IMODE(entry.stat().st_mode) == 0o755


def test_a_failed_build_leaves_nothing(tmp_path: Path) -> None:
    def broken(dest: Path) -> None:
        (dest / "public" / "half.csv").write_text("x\n")
        raise RuntimeError("generator crashed")

    try:
        cached_generate(tmp_path, "pack/tiny", "v1", {}, broken)
    except RuntimeError:
        pass
    folder = tmp_path / "pack__tiny"
    assert [p.name for p in folder.iterdir()] == []  # no entry, no temporary folder
