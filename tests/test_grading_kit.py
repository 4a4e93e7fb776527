"""The grader kit (``rgym_grader_kit``) as a grader uses it: context, scores, submission
files, and the three ways to run the agent's code (function calls, a command with
files, a process with pipes).  The graders run as subprocesses in evaluation folders,
unsupervised (the kit then starts its own supervisor), except where a test grades
through :class:`~rgym_core.grading.Grader`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from rgym_core import grader_protocol as gp
from rgym_core import load_task
from rgym_core.grading import Grader
from rgym_core.sandbox import SandboxConfig, WorkspaceLayout


def run_grader(tmp: Path, source: str, submission: dict[str, str] | None = None,
               env: dict[str, str] | None = None, timeout: float = 120) -> tuple[dict, str]:
    """Run ``source`` as grader/evaluate.py in a fresh evaluation folder; return the
    scores file and the output."""
    root = tmp / f"eval-{uuid.uuid4().hex[:6]}"
    (root / "grader").mkdir(parents=True)
    (root / "submission").mkdir()
    gp.install_kit(root / "grader")
    (root / "grader" / "evaluate.py").write_text(textwrap.dedent(source))
    for name, text in (submission or {}).items():
        (root / "submission" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "submission" / name).write_text(text)
    proc = subprocess.run([sys.executable, "grader/evaluate.py"], cwd=root, timeout=timeout,
                          capture_output=True, text=True,
                          env={"PATH": os.environ["PATH"], "RGYM_SEED": "7", **(env or {})})
    scores = root / "scores.json"
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return (json.loads(scores.read_text()) if scores.exists() else {}), proc.stdout


def test_constants_are_the_documented_contract() -> None:
    assert gp.EVAL_MOUNT == "/eval" and gp.SCORES_FILE == "scores.json"
    assert gp.ENV_SCORES_FILE == "RGYM_SCORES_FILE" and gp.ENV_SEED == "RGYM_SEED"
    assert gp.KIT_PACKAGE == "rgym_grader_kit"
    assert (gp.kit_source() / "__init__.py").is_file() and gp.supervisor_script().is_file()


def test_the_kit_imports_nothing_outside_the_standard_library(tmp_path: Path) -> None:
    """Without site-packages at all (``-I -S``), the kit imports and its supervisor runs."""
    gp.install_kit(tmp_path)
    code = (f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import rgym_grader_kit, json; "
            "print(json.dumps(sorted(rgym_grader_kit.__all__)))")
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code], text=True,
                         capture_output=True, check=True)
    assert "FunctionWorker" in json.loads(out.stdout)


def test_context_scores_and_submission_files(tmp_path: Path) -> None:
    scores, _ = run_grader(tmp_path, """
        import json
        from rgym_grader_kit import context, read_submission_file, write_scores
        ctx = context()
        text = read_submission_file("sub/answer.txt").decode()
        try:
            read_submission_file("missing.txt")
        except FileNotFoundError:
            missing = True
        try:
            read_submission_file("big.txt", max_bytes=3)
        except ValueError as exc:
            big = str(exc)
        write_scores({"acc": float(text.strip() == "42")}, subtasks={"s1": {"acc": 0.5}},
                     details={"kind": ctx.kind, "seed": ctx.seed, "confined": ctx.confined,
                              "supervised": ctx.supervised, "missing": missing, "big": big,
                              "path": str(ctx.submission_file("sub/answer.txt"))})
        """, {"sub/answer.txt": "42\n", "big.txt": "12345"})
    assert scores["scores"] == {"acc": 1.0} and scores["subtasks"] == {"s1": {"acc": 0.5}}
    details = scores["details"]
    assert details["kind"] == "submit" and details["seed"] == 7
    assert details["supervised"] is False and details["confined"] is False
    assert details["missing"] is True and "more than the 3" in details["big"]
    assert details["path"].endswith("submission/sub/answer.txt")


def test_links_in_the_submission_are_refused(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("hidden")
    root_source = """
        import os
        from rgym_grader_kit import context, read_submission_file, write_error
        sub = context().submission_dir
        os.symlink({secret!r}, sub / "answer.txt")
        os.mkdir(sub / "real")
        os.symlink(sub / "real", sub / "linked")
        (sub / "real" / "a.txt").write_text("x")
        out = []
        for name in ("answer.txt", "linked/a.txt", "../grader/evaluate.py", "/etc/hostname"):
            try:
                read_submission_file(name)
                out.append("read " + name)
            except ValueError as exc:
                out.append(str(exc))
        write_error(" | ".join(out))
        """.replace("{secret!r}", repr(str(secret)))
    scores, _ = run_grader(tmp_path, root_source)
    error = scores["error"]
    assert "read " not in error
    assert "'answer.txt' is a link" in error and "'linked' is a link" in error
    assert "not a relative path inside the submission" in error


def test_write_scores_rejects_what_is_not_a_number(tmp_path: Path) -> None:
    scores, out = run_grader(tmp_path, """
        from rgym_grader_kit import write_scores
        for bad in ({"acc": float("nan")}, {"acc": True}, {"acc": "0.5"}):
            try:
                write_scores(bad)
            except ValueError as exc:
                print("refused", exc)
        write_scores({"acc": 1})
        """)
    assert out.count("refused") == 3 and scores == {"scores": {"acc": 1.0}}


def test_function_worker_calls_batches_and_errors(tmp_path: Path) -> None:
    scores, _ = run_grader(tmp_path, """
        from rgym_grader_kit import AgentCodeError, FunctionWorker, write_scores
        notes = {}
        with FunctionWorker("mod", setup="import random; random.seed(3)") as worker:
            notes["one"] = worker.call("double", 21)
            notes["many"] = worker.map("double", [(i,) for i in range(5)])
            notes["state"] = worker.map("count", [(), (), ()])
            for fn in ("boom", "not_json", "nope"):
                try:
                    worker.call(fn)
                except AgentCodeError as exc:
                    notes[fn] = str(exc)
            notes["after"] = worker.call("double", 1)
        try:
            FunctionWorker("broken")
        except AgentCodeError as exc:
            notes["import"] = str(exc)
        write_scores({"acc": 1.0}, details=notes)
        """, {"mod.py": "import os\nN = []\n"
                        "def double(x):\n    print('noise on stdout')\n    return 2 * x\n"
                        "def count():\n    N.append(1)\n    return len(N)\n"
                        "def boom():\n    raise KeyError('bad key')\n"
                        "def not_json():\n    return object()\n",
              "broken.py": "import nonexistent_module_xyz\n"})
    notes = scores["details"]
    assert notes["one"] == 42 and notes["many"] == [0, 2, 4, 6, 8] and notes["state"] == [1, 2, 3]
    assert "boom raised an exception" in notes["boom"] and "KeyError: 'bad key'" in notes["boom"]
    assert "not JSON" in notes["not_json"] and "has no function nope" in notes["nope"]
    assert notes["after"] == 2
    assert "cannot import broken.py" in notes["import"] and "ModuleNotFoundError" in notes["import"]


def test_run_worker_files_in_and_out(tmp_path: Path) -> None:
    scores, _ = run_grader(tmp_path, """
        import os
        from rgym_grader_kit import Limits, context, run_worker, write_scores
        extra = context().grader_dir / "input.txt"
        extra.write_text("from the grader")
        res = run_worker(["python", "job.py"], files={"in/a.txt": b"abc", "in/b.txt": extra},
                         outputs=["out.txt", "link.txt", "absent.txt"], input=b"stdin data",
                         limits=Limits(wall_s=30))
        slow = run_worker(["python", "-c", "import time; time.sleep(60)"], limits=Limits(wall_s=1))
        write_scores({"acc": 1.0}, details={
            "code": res.exit_code, "out": res.files.get("out.txt", b"").decode(),
            "stdout": res.stdout.decode(), "stderr": res.stderr_tail, "missing": res.missing,
            "slow": [slow.timed_out, slow.exit_code]})
        """, {"job.py": "import os, sys\n"
                        "data = open('in/a.txt').read() + '|' + open('in/b.txt').read()\n"
                        "data += '|' + sys.stdin.read()\n"
                        "open('out.txt', 'w').write(data)\n"
                        "os.symlink('/etc/hostname', 'link.txt')\n"
                        "print('printed'); print('warned', file=sys.stderr)\n"
                        "sys.exit(3)\n"})
    details = scores["details"]
    assert details["code"] == 3
    assert details["out"] == "abc|from the grader|stdin data"
    assert details["stdout"] == "printed\n" and "warned" in details["stderr"]
    assert "link" in details["missing"]["link.txt"] and "does not exist" in details["missing"]["absent.txt"]
    assert details["slow"][0] is True


def test_start_worker_timeouts_and_oversized_lines(tmp_path: Path) -> None:
    scores, _ = run_grader(tmp_path, """
        from rgym_grader_kit import (WorkerExited, WorkerProtocolError, WorkerTimeout,
                                     start_worker, write_scores)
        notes = {}
        with start_worker(["python", "-c", "import sys, time\\n"
                           "print(sys.stdin.readline().strip().upper(), flush=True)\\n"
                           "time.sleep(60)"]) as w:
            w.write_line("hello")
            notes["echo"] = w.read_line(10)
            try:
                w.read_line(0.5)
            except WorkerTimeout as exc:
                notes["timeout"] = str(exc)
            notes["killed"] = w.poll() is not None
        with start_worker(["python", "-c", "import sys\\nsys.stdout.write('x' * 5000)\\n"
                           "sys.stdout.flush()\\nimport time; time.sleep(60)"]) as w:
            try:
                w.read_line(10, max_bytes=1000)
            except WorkerProtocolError as exc:
                notes["long"] = str(exc)
        with start_worker(["python", "-c", "import sys; print('dying', file=sys.stderr); "
                           "sys.exit(5)"]) as w:
            try:
                w.read_line(10)
            except WorkerExited as exc:
                notes["exited"] = [str(exc), exc.exit_code]
        write_scores({"acc": 1.0}, details=notes)
        """)
    notes = scores["details"]
    assert notes["echo"] == "HELLO" and "did not answer within 0.5 s" in notes["timeout"]
    assert notes["killed"] is True
    assert "longer than 1000 bytes" in notes["long"]
    assert notes["exited"][1] == 5 and "dying" in notes["exited"][0]


def test_a_grader_timeout_ends_the_grader_and_its_workers(tmp_path: Path) -> None:
    token = f"grd-kit-{uuid.uuid4().hex}"
    folder = tmp_path / "task"
    (folder / "grader").mkdir(parents=True)
    (folder / "starter").mkdir()
    (folder / "task.yaml").write_text("id: t/timeout\ndescription: d\nmetrics: [{name: acc}]\n"
                                      "grader: {timeout_s: 4}\n")
    (folder / "grader" / "evaluate.py").write_text(textwrap.dedent(f"""
        import time
        from rgym_grader_kit import start_worker
        worker = start_worker(["sleep", "600", "{token}"])
        time.sleep(600)
        """))
    from rgym_core.sandboxes.local import LocalSandbox

    box = LocalSandbox(SandboxConfig(run_id="grd-kit-timeout"))
    box.start(WorkspaceLayout(starter=folder / "starter"))
    try:
        started = time.monotonic()
        record = Grader(load_task(folder), box, {}, tmp_path / "run").grade("submit", 1)
        assert time.monotonic() - started < 30
    finally:
        box.cleanup()
    assert not record.valid and "timed out after 4 s" in (record.error or "")
    survivors = []
    for name in os.listdir("/proc"):
        try:
            if name.isdigit() and token.encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                survivors.append(name)
        except OSError:
            pass
    assert survivors == []


def test_score_records_say_whether_grading_was_confined(tmp_path: Path) -> None:
    from rgym_core.grader_confinement import host_confinement

    folder = tmp_path / "task"
    (folder / "grader").mkdir(parents=True)
    (folder / "starter").mkdir()
    (folder / "task.yaml").write_text("id: t/flag\ndescription: d\nmetrics: [{name: acc}]\n")
    (folder / "grader" / "evaluate.py").write_text(
        "from rgym_grader_kit import context, write_scores\n"
        "write_scores({'acc': 1.0}, details={'seen': context().confined})\n")
    from rgym_core.sandboxes.local import LocalSandbox

    box = LocalSandbox(SandboxConfig(run_id="grd-kit-flag"))
    box.start(WorkspaceLayout(starter=folder / "starter"))
    try:
        record = Grader(load_task(folder), box, {}, tmp_path / "run").grade("validate", 2)
    finally:
        box.cleanup()
    expected = host_confinement().confined
    assert record.valid and record.details["seen"] is expected
    flag = getattr(record, "confined", None)
    assert (record.details.get("confined") if flag is None else flag) is expected
    saved = json.loads((tmp_path / "run" / "grader" / "0002-validate.json").read_text())
    assert saved.get("confined", saved["details"].get("confined")) is expected


@pytest.mark.parametrize("name", ["../escape", "/abs", "a/../../b", ""])
def test_worker_file_names_stay_inside_its_folder(tmp_path: Path, name: str) -> None:
    scores, _ = run_grader(tmp_path, f"""
        from rgym_grader_kit import ConfinementError, start_worker, write_error
        try:
            start_worker(["python", "-c", "pass"], files={{{name!r}: b"x"}})
        except ConfinementError as exc:
            write_error(str(exc))
        """)
    assert "not a relative path inside the worker's folder" in scores["error"]
