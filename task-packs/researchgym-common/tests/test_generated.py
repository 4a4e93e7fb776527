"""`rgym_researchgym.generated.cached_generate`: a generated dataset is built once per
parameter set, reused while every file matches its manifest, rebuilt when a file is
changed, removed or added, and its private half is readable by its owner only; a private
half that must not be rebuildable derives from a per-machine secret (0600) and is rebuilt
when the secret changes or the entry predates it."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from rgym_researchgym.generated import (
    MANIFEST,
    SECRET_FILE,
    GraderSecret,
    cached_generate,
    grader_secret,
    problems,
    secret_path,
)


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


# -- a grader-side secret for the private half -------------------------------------------


def secret_build(calls: list[bytes]):
    def build(dest: Path, secret: GraderSecret) -> None:
        calls.append(secret.digest("test"))
        (dest / "public" / "train.csv").write_text("x,y\n1,2\n")
        (dest / "private" / "test.bin").write_bytes(secret.digest("test"))
    return build


def test_secret_is_made_once_owner_only_and_the_entry_reused(tmp_path: Path) -> None:
    calls: list[bytes] = []
    entry = cached_generate(tmp_path, "pack/tiny", "v1", {}, secret_build(calls), secret=True)
    path = secret_path(tmp_path, "pack/tiny")
    assert path.name == SECRET_FILE and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(path.read_bytes()) == 32
    key = grader_secret(tmp_path, "pack/tiny")
    assert (entry / "private" / "test.bin").read_bytes() == key.digest("test")
    manifest = json.loads((entry / MANIFEST).read_text())
    assert manifest["secret"] == key.id and key.key.hex() not in (entry / MANIFEST).read_text()
    assert cached_generate(tmp_path, "pack/tiny", "v1", {}, secret_build(calls), secret=True) == entry
    assert len(calls) == 1  # same secret: reused, the key of the entry does not hold it
    assert key.key.hex() not in repr(key)


def test_another_secret_rebuilds_and_machines_differ(tmp_path: Path) -> None:
    calls: list[bytes] = []
    entry = cached_generate(tmp_path / "a", "pack/tiny", "v1", {}, secret_build(calls), secret=True)
    other = cached_generate(tmp_path / "b", "pack/tiny", "v1", {}, secret_build(calls), secret=True)
    assert (entry / "private" / "test.bin").read_bytes() != (other / "private" / "test.bin").read_bytes()
    assert (entry / "public" / "train.csv").read_bytes() == (other / "public" / "train.csv").read_bytes()
    secret_path(tmp_path / "a", "pack/tiny").unlink()  # a new secret: the old private half goes
    old = (entry / "private" / "test.bin").read_bytes()
    again = cached_generate(tmp_path / "a", "pack/tiny", "v1", {}, secret_build(calls), secret=True)
    assert again == entry and (entry / "private" / "test.bin").read_bytes() != old and len(calls) == 3


def test_an_entry_made_before_the_secret_is_rebuilt(tmp_path: Path) -> None:
    """An upgraded machine's cache holds private data from the public seed: not reused."""
    entry = cached_generate(tmp_path, "pack/tiny", "v1", {}, make_build([]))
    assert "secret" not in json.loads((entry / MANIFEST).read_text())
    calls: list[bytes] = []
    again = cached_generate(tmp_path, "pack/tiny", "v1", {}, secret_build(calls), secret=True)
    assert again == entry and len(calls) == 1 and (entry / "private" / "test.bin").exists()
    assert not (entry / "private" / "labels.csv").exists()


def test_secret_words_seed_numpy_with_256_bits() -> None:
    key = GraderSecret(bytes(range(32)))
    words = key.words("test")
    assert len(words) == 8 and all(0 <= w < 2**32 for w in words)
    assert key.words("test") == words and key.words("eval") != words
    assert GraderSecret(bytes(32)).words("test") != words


def test_a_short_or_linked_secret_is_refused(tmp_path: Path) -> None:
    path = secret_path(tmp_path, "pack/tiny")
    path.parent.mkdir(parents=True)
    path.write_bytes(b"short")
    try:
        grader_secret(tmp_path, "pack/tiny")
    except OSError as exc:
        assert str(path) in str(exc) and "remove it" in str(exc)
    else:
        raise AssertionError("a 5-byte secret was accepted")
    path.unlink()
    (tmp_path / "elsewhere").write_bytes(bytes(32))
    path.symlink_to(tmp_path / "elsewhere")
    try:
        grader_secret(tmp_path, "pack/tiny")
    except OSError as exc:
        assert "not a plain file" in str(exc)
    else:
        raise AssertionError("a symlinked secret was accepted")
