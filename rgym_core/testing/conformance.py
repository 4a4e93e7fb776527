"""The sandbox conformance suite: what every backend must do.

A backend's test module subclasses :class:`SandboxConformance` and provides a
``make_sandbox`` fixture, a factory that returns a *started* sandbox and
cleans up every sandbox it made when the test ends; :func:`sandbox_factory`
does the starting and cleaning up::

    import pytest
    from rgym_core.sandbox import SandboxConfig
    from rgym_core.testing.conformance import SandboxConformance, sandbox_factory

    @pytest.fixture
    def make_sandbox():
        with sandbox_factory(lambda **kw: MySandbox(SandboxConfig(run_id="t", **kw))) as factory:
            yield factory

    class TestMySandbox(SandboxConformance):
        pass

The tests only use the :class:`~rgym_core.sandbox.Sandbox` interface and
ordinary tools inside the sandbox (``sh``, ``cat``, ``ls``, ``id``, ``grep``,
``setsid``, ``test -O``), never host paths, except through the helpers a
backend may override: :meth:`SandboxConformance.has_user_isolation`,
:meth:`SandboxConformance.make_root_only_file` and
:meth:`SandboxConformance.leftover_processes`.  Tests that need a separate
agent user skip, with the reason, where the backend cannot provide one.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rgym_core.sandbox import Sandbox, WorkspaceLayout, truncate_output
from rgym_core.specs import PreparedDataset

MakeSandbox = Callable[..., Sandbox]


@contextlib.contextmanager
def sandbox_factory(build: Callable[..., Sandbox]) -> Iterator[MakeSandbox]:
    """Turn ``build(**config_overrides) -> Sandbox`` (not yet started) into a
    ``make_sandbox(layout=None, **config_overrides)`` factory that starts each
    sandbox with its layout; every sandbox made is cleaned up when the block ends."""
    made: list[Sandbox] = []

    def factory(layout: WorkspaceLayout | None = None, **overrides: object) -> Sandbox:
        box = build(**overrides)
        made.append(box)
        box.start(layout or WorkspaceLayout())
        return box

    try:
        yield factory
    finally:
        for box in made:
            box.cleanup()

#: Every byte value, for binary round trips.
BINARY = bytes(range(256)) * 64


def _run_ok(box: Sandbox, command: str, timeout: float = 30) -> str:
    result = box.run(command, timeout=timeout)
    assert result.exit_code == 0, f"{command!r} failed ({result.exit_code}): {result.output}"
    return result.output


def _host_tree(top: Path) -> tuple[dict[str, bytes], set[str]]:
    """The files (relative path -> content) and folders under a host folder."""
    assert top.is_dir(), f"{top} is not a folder"
    files: dict[str, bytes] = {}
    dirs: set[str] = set()
    for path in top.rglob("*"):
        rel = path.relative_to(top).as_posix()
        if path.is_dir():
            dirs.add(rel)
        else:
            files[rel] = path.read_bytes()
    return files, dirs


class SandboxConformance:
    """Behaviour every sandbox backend must show; subclass it and provide ``make_sandbox``."""

    # -- hooks a backend may override ------------------------------------------------

    def has_user_isolation(self) -> bool:
        """True when agent commands run as a user distinct from the host's root, so
        root-only files and dataset permissions are enforced.  The local backend
        has it when tests run as root; container backends always have it."""
        return os.geteuid() == 0

    def make_root_only_file(self, box: Sandbox, tmp_path: Path) -> str:
        """Create a file only root may read, outside the workspace; return its path
        as the sandbox sees it.  Container backends override this."""
        folder = tmp_path / "hidden"
        folder.mkdir(mode=0o700)
        os.chmod(folder, 0o700)
        secret = folder / "secret.txt"
        secret.write_text("top secret")
        os.chmod(secret, 0o600)
        return str(secret)

    def leftover_processes(self, token: str) -> list[int]:
        """Processes (seen from the host) whose command line contains ``token``."""
        found = []
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == os.getpid():
                continue
            try:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    cmdline = f.read()
                with open(f"/proc/{name}/stat", "rb") as f:
                    state = f.read().rsplit(b")", 1)[1].split()[0]
            except OSError:
                continue
            if token.encode() in cmdline and state not in (b"Z", b"X"):
                found.append(int(name))
        return found

    def _require_isolation(self) -> None:
        if not self.has_user_isolation():
            pytest.skip("needs an agent user distinct from root (run the tests as root, or "
                        "use a container backend); the local backend run by an ordinary "
                        "user cannot enforce this")

    # -- shell and processes ------------------------------------------------------------

    def test_run_reports_output_and_exit_code(self, make_sandbox: MakeSandbox) -> None:
        box = make_sandbox()
        result = box.run("echo hi", timeout=30)
        assert (result.exit_code, result.output, result.timed_out) == (0, "hi\n", False)
        assert result.ok
        assert box.run("false", timeout=30).exit_code == 1
        assert box.run("sh -c 'exit 7'", timeout=30).exit_code == 7
        assert box.run("printf 'no newline'", timeout=30).output == "no newline"

    def test_run_merges_stderr(self, make_sandbox: MakeSandbox) -> None:
        box = make_sandbox()
        result = box.run("echo out; echo err >&2; echo out2", timeout=30)
        assert result.output == "out\nerr\nout2\n"

    def test_run_syntax_error_keeps_session(self, make_sandbox: MakeSandbox) -> None:
        box = make_sandbox()
        result = box.run("echo 'unterminated", timeout=30)
        assert result.exit_code != 0 and not result.timed_out
        assert _run_ok(box, "echo fine") == "fine\n"

    def test_cwd_and_exports_persist(self, make_sandbox: MakeSandbox) -> None:
        box = make_sandbox()
        assert _run_ok(box, "pwd").strip() == box.workspace
        _run_ok(box, "mkdir -p sub/dir && cd sub/dir && export RGYM_T=kept && PLAIN=also")
        assert _run_ok(box, "pwd; echo $RGYM_T $PLAIN") == \
            f"{box.workspace}/sub/dir\nkept also\n"
        assert _run_ok(box, "sh -c 'echo $RGYM_T'") == "kept\n"

    def test_run_stdin_is_empty(self, make_sandbox: MakeSandbox) -> None:
        box = make_sandbox()
        result = box.run("cat; echo done", timeout=10)
        assert not result.timed_out
        assert result.output == "done\n"

    def test_unicode_output(self, make_sandbox: MakeSandbox) -> None:
        box = make_sandbox()
        text = "héllo ✓ 日本語 🙂"
        assert _run_ok(box, f"printf '%s\\n' '{text}'") == text + "\n"
        assert box.exec(["printf", "%s", text], timeout=30).output == text

    def test_run_timeout_kills_the_tree_and_session_recovers(
            self, make_sandbox: MakeSandbox) -> None:
        box = make_sandbox()
        _run_ok(box, "mkdir -p w && cd w && export KEEP=yes")
        ws = box.workspace
        result = box.run(f"echo started; (sleep 1; echo x > {ws}/child) & "
                         f"( (sleep 1; echo x > {ws}/grandchild) & ); sleep 60", timeout=0.5)
        assert result.timed_out and result.exit_code == 124
        assert not result.ok
        assert "started" in result.output
        assert _run_ok(box, "pwd; echo $KEEP") == f"{box.workspace}/w\nyes\n"
        time.sleep(1.5)  # the killed processes would have written by now
        assert _run_ok(box, f"ls -A {ws}").split() == ["w"]

    def test_stuck_shell_is_restarted_in_its_cwd(self, make_sandbox: MakeSandbox) -> None:
        box = make_sandbox()
        _run_ok(box, "mkdir -p loop && cd loop")
        result = box.run("while :; do :; done", timeout=0.5)
        assert result.timed_out and result.exit_code == 124
        assert _run_ok(box, "pwd").splitlines()[-1] == f"{box.workspace}/loop"

    def test_shell_exit_is_recovered(self, make_sandbox: MakeSandbox) -> None:
        box = make_sandbox()
        result = box.run("echo bye; exit 3", timeout=30)
        assert result.exit_code != 0 and not result.timed_out
        assert "bye" in result.output
        assert _run_ok(box, "echo back").splitlines()[-1] == "back"

    def test_output_cap_matches_truncate_output(self, make_sandbox: MakeSandbox) -> None:
        box = make_sandbox()
        command = "i=0; while [ $i -lt 3000 ]; do printf 'line %05d\\n' $i; i=$((i+1)); done"
        full = "".join(f"line {i:05d}\n" for i in range(3000))
        result = box.run(command, timeout=60, output_limit=1000)
        assert result.truncated and result.exit_code == 0
        assert result.output == truncate_output(full, 1000)[0]
        result = box.exec(["sh", "-c", command], timeout=60, output_limit=1000)
        assert result.truncated
        assert result.output == truncate_output(full, 1000)[0]

    def test_huge_output_is_capped(self, make_sandbox: MakeSandbox) -> None:
        box = make_sandbox()
        for result in (box.run("yes abcdefgh | head -c 30000000; echo; echo END", timeout=120),
                       box.exec(["sh", "-c", "yes abcdefgh | head -c 30000000; echo; echo END"],
                                timeout=120)):
            assert result.exit_code == 0 and result.truncated
            assert len(result.output) < 40_000
            assert result.output.startswith("abcdefgh\n")
            assert result.output.endswith("\nEND\n")
            assert "characters truncated" in result.output
        assert _run_ok(box, "echo still here") == "still here\n"

    def test_exec(self, make_sandbox: MakeSandbox) -> None:
        box = make_sandbox()
        assert box.exec(["pwd"], timeout=30).output.strip() == box.workspace
        _run_ok(box, "mkdir -p sub")
        assert box.exec(["pwd"], cwd="sub", timeout=30).output.strip() == f"{box.workspace}/sub"
        result = box.exec(["sh", "-c", "echo $FOO; cat; echo err >&2; exit 5"],
                          env={"FOO": "bar"}, input="from stdin\n", timeout=30)
        assert (result.exit_code, result.output) == (5, "bar\nfrom stdin\nerr\n")
        assert box.exec(["sh", "-c", "cat"], timeout=10).output == ""
        missing = box.exec(["no-such-program-rgym"], timeout=30)
        assert missing.exit_code in (126, 127)

    def test_exec_timeout_kills_its_group(self, make_sandbox: MakeSandbox) -> None:
        box = make_sandbox()
        result = box.exec(["sh", "-c", "(sleep 1; echo x > late) & sleep 60"], timeout=0.5)
        assert result.timed_out and result.exit_code == 124
        time.sleep(1.5)
        assert _run_ok(box, "ls -A").split() == []

    # -- files ------------------------------------------------------------------------

    def test_read_write_round_trip(self, make_sandbox: MakeSandbox) -> None:
        box = make_sandbox()
        box.write_file("notes.txt", "héllo\n")
        box.write_file("deep/er/blob.bin", BINARY)
        box.write_file(f"{box.workspace}/abs.txt", b"absolute")
        assert box.read_file("notes.txt") == "héllo\n".encode()
        assert box.read_file("deep/er/blob.bin") == BINARY
        assert box.read_file(f"{box.workspace}/abs.txt") == b"absolute"
        assert _run_ok(box, "cat notes.txt; test -O deep/er/blob.bin && echo mine") == \
            "héllo\nmine\n"
        box.write_file("notes.txt", "replaced")
        assert box.read_file("notes.txt") == b"replaced"

    def test_file_errors(self, make_sandbox: MakeSandbox) -> None:
        box = make_sandbox()
        _run_ok(box, "mkdir folder")
        with pytest.raises(FileNotFoundError):
            box.read_file("missing.txt")
        with pytest.raises(IsADirectoryError):
            box.read_file("folder")
        with pytest.raises(IsADirectoryError):
            box.write_file("folder", "x")

    def test_copy_in_and_out(self, make_sandbox: MakeSandbox, tmp_path: Path) -> None:
        box = make_sandbox()
        src = tmp_path / "src"
        (src / "a" / "b").mkdir(parents=True)
        (src / "top.txt").write_text("top")
        (src / "a" / "b" / "blob.bin").write_bytes(BINARY)
        box.copy_in(src, "incoming")
        box.copy_in(src / "top.txt", "single/renamed.txt")
        assert box.read_file("incoming/a/b/blob.bin") == BINARY
        assert box.read_file("single/renamed.txt") == b"top"
        _run_ok(box, "test -O incoming/a/b/blob.bin && echo more >> incoming/top.txt")
        out = tmp_path / "out"
        box.copy_out("incoming", out / "copy")
        box.copy_out(f"{box.workspace}/single/renamed.txt", out / "file.txt")
        assert (out / "copy" / "a" / "b" / "blob.bin").read_bytes() == BINARY
        assert (out / "copy" / "top.txt").read_text() == "topmore\n"
        assert (out / "file.txt").read_text() == "top"
        with pytest.raises(FileNotFoundError):
            box.copy_out("nothing-here", out / "nothing")
        with pytest.raises(FileNotFoundError):
            box.copy_in(tmp_path / "absent", "absent")

    def test_copy_out_is_reliable(self, make_sandbox: MakeSandbox, tmp_path: Path) -> None:
        """Copy folders of many sizes and shapes out again and again: every copy must
        succeed and match.  ``edge.bin`` (a tar header and 18 blocks) puts the
        end-of-archive marker across the first 20-block tar record, so a reader that
        stops at the marker while the archiver still writes its padding shows up."""
        box = make_sandbox()
        src = tmp_path / "src"
        files = {"ten_kb/ten_kb.bin": BINARY[:10_000],
                 "hundred_kb/hundred_kb.bin": (BINARY * 7)[:100_000],
                 "hundred_kb/zero.txt": b"",
                 "pkg/__init__.py": b"", "pkg/mod.py": b"X = 1\n",
                 "pkg/deep/er/leaf.txt": b"leaf\n",
                 "pkg/__pycache__/mod.cpython-311.pyc": BINARY[:777],
                 "edge.bin": BINARY[:18 * 512]}
        (src / "empty").mkdir(parents=True)
        for rel, data in files.items():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            (src / rel).write_bytes(data)
        box.copy_in(src, "tree")
        folders = ["empty", "ten_kb", "hundred_kb", "pkg", ""]  # "": the whole tree
        for round_ in range(30):
            out = tmp_path / f"round{round_}"
            folder = folders[round_ % len(folders)]
            box.copy_out(f"tree/{folder}".rstrip("/"), out / "copy")
            box.copy_out("tree/edge.bin", out / "edge.bin")
            assert _host_tree(out / "copy") == _host_tree(src / folder), \
                f"round {round_}: tree/{folder} differs"
            assert (out / "edge.bin").read_bytes() == files["edge.bin"], f"round {round_}"

    # -- layout -------------------------------------------------------------------------

    @pytest.fixture
    def layout(self, tmp_path: Path) -> WorkspaceLayout:
        starter = tmp_path / "starter"
        (starter / "src").mkdir(parents=True)
        (starter / "train.py").write_text("print('train')\n")
        (starter / "src" / "model.py").write_text("# model\n")
        public = tmp_path / "public"
        (public / "images").mkdir(parents=True)
        (public / "train.csv").write_text("x,y\n1,2\n")
        (public / "images" / "0.bin").write_bytes(BINARY)
        private = tmp_path / "private"
        private.mkdir()
        (private / "test_labels.csv").write_text("id,label\n0,RGYM_PRIVATE_LABEL\n")
        return WorkspaceLayout(starter=starter, datasets={
            "data": PreparedDataset(id="t/data", public=public, private=private),
            "more/nested": PreparedDataset(id="t/nested", public=public)})

    def test_starter_files_are_present_and_writable(self, make_sandbox: MakeSandbox,
                                                    layout: WorkspaceLayout) -> None:
        box = make_sandbox(layout)
        assert box.read_file("train.py") == b"print('train')\n"
        _run_ok(box, "test -O src/model.py && echo '# edit' >> src/model.py && touch src/new.py "
                     "&& rm train.py")
        assert box.read_file("src/model.py") == b"# model\n# edit\n"

    def test_datasets_are_read_only(self, make_sandbox: MakeSandbox,
                                    layout: WorkspaceLayout) -> None:
        box = make_sandbox(layout)
        for mount in ("data", "more/nested"):
            assert box.read_file(f"{mount}/train.csv") == b"x,y\n1,2\n"
            assert box.read_file(f"{mount}/images/0.bin") == BINARY
            for attempt in (f"echo bad > {mount}/train.csv", f"echo bad >> {mount}/train.csv",
                            f"rm -f {mount}/train.csv", f"touch {mount}/new.txt",
                            f"rm -rf {mount}/images", f"mv {mount}/train.csv moved.csv"):
                assert box.run(attempt, timeout=30).exit_code != 0, attempt
            with pytest.raises(PermissionError):
                box.write_file(f"{mount}/train.csv", "bad")
            assert box.read_file(f"{mount}/train.csv") == b"x,y\n1,2\n"
            assert box.read_file(f"{mount}/images/0.bin") == BINARY
        result = box.run("grep -r RGYM_PRIVATE_LABEL . ; ls -A data", timeout=30)
        assert "RGYM_PRIVATE_LABEL" not in result.output
        assert "test_labels.csv" not in result.output

    def test_datasets_cannot_be_chmodded(self, make_sandbox: MakeSandbox,
                                         layout: WorkspaceLayout) -> None:
        self._require_isolation()
        box = make_sandbox(layout)
        for attempt in ("chmod u+w data/train.csv", "chmod 777 data", "chmod -R u+w data/images"):
            assert box.run(attempt, timeout=30).exit_code != 0, attempt
        assert box.run("echo bad > data/train.csv", timeout=30).exit_code != 0

    # -- isolation and cleanup ------------------------------------------------------------

    def test_agent_is_not_root(self, make_sandbox: MakeSandbox) -> None:
        self._require_isolation()
        box = make_sandbox()
        assert _run_ok(box, "id -u").strip() != "0"
        assert box.exec(["id", "-u"], timeout=30).output.strip() != "0"

    def test_root_only_file_is_unreadable(self, make_sandbox: MakeSandbox,
                                          tmp_path: Path) -> None:
        self._require_isolation()
        box = make_sandbox()
        secret = self.make_root_only_file(box, tmp_path)
        result = box.run(f"cat {secret}", timeout=30)
        assert result.exit_code != 0 and "top secret" not in result.output
        # Unreadable, or not even visible (a sandbox that shows none of the host).
        with pytest.raises((PermissionError, FileNotFoundError)):
            box.read_file(secret)
        with pytest.raises((PermissionError, FileNotFoundError)):
            box.copy_out(secret, tmp_path / "leak.txt")

    def test_cleanup_kills_background_processes(self, make_sandbox: MakeSandbox) -> None:
        box = make_sandbox()
        token = f"rgymbg{uuid.uuid4().hex[:12]}"
        _run_ok(box, f"nohup sh -c 'sleep 120; : {token}a' >/dev/null 2>&1 &")
        _run_ok(box, f"(setsid sh -c 'sleep 120; : {token}b' >/dev/null 2>&1 &)")
        box.exec(["sh", "-c", f"(setsid sh -c 'sleep 120; : {token}c' >/dev/null 2>&1 &)"],
                 timeout=30)
        for _ in range(100):
            if len(self.leftover_processes(token)) >= 3:
                break
            time.sleep(0.02)
        assert len(self.leftover_processes(token)) >= 3, "the background processes did not start"
        box.cleanup()
        assert self.leftover_processes(token) == []

    def test_cleanup_is_idempotent(self, make_sandbox: MakeSandbox) -> None:
        box = make_sandbox()
        _run_ok(box, "echo x > file")
        box.cleanup()
        box.cleanup()

    # -- snapshots: freezing and killing the episode's processes ----------------------

    def _start_counter(self, box: Sandbox, token: str) -> None:
        """A detached process that rewrites ``count.txt`` every millisecond or so."""
        _run_ok(box, f"(setsid sh -c 'n=0; while :; do n=$((n+1)); echo $n > count.tmp; "
                     f"mv -f count.tmp count.txt; done; : {token}' >/dev/null 2>&1 &)")
        for _ in range(500):
            if box.run("test -s count.txt", timeout=30).exit_code == 0:
                return
            time.sleep(0.01)
        raise AssertionError("the counter did not start")

    def test_freeze_stops_every_process_until_thaw(self, make_sandbox: MakeSandbox,
                                                   tmp_path: Path) -> None:
        box = make_sandbox()
        token = f"rgymfz{uuid.uuid4().hex[:12]}"
        self._start_counter(box, token)
        try:
            box.freeze()
        except NotImplementedError:
            pytest.skip(f"not applicable: {type(box).__name__} cannot freeze its processes")
        try:
            first = box.read_file("count.txt")
            time.sleep(0.3)
            box.copy_out("count.txt", tmp_path / "a.txt")  # copies still work while frozen
            assert box.read_file("count.txt") == first == (tmp_path / "a.txt").read_bytes()
        finally:
            box.thaw()
        for _ in range(300):
            if box.read_file("count.txt") != first:
                break
            time.sleep(0.01)
        assert box.read_file("count.txt") != first, "thaw() did not let the process go on"

    def test_kill_processes_names_them_and_keeps_the_workspace(self, make_sandbox: MakeSandbox,
                                                               tmp_path: Path) -> None:
        box = make_sandbox()
        token = f"rgymkp{uuid.uuid4().hex[:12]}"
        self._start_counter(box, token)
        try:
            killed = box.kill_processes()
        except NotImplementedError:
            pytest.skip(f"not applicable: {type(box).__name__} cannot kill its processes")
        assert any(token in line for line in killed), killed
        first = box.read_file("count.txt")
        time.sleep(0.3)
        assert box.read_file("count.txt") == first
        assert self.leftover_processes(token) == []
        box.export_workspace(tmp_path / "out")
        assert (tmp_path / "out" / "count.txt").read_bytes() == first
