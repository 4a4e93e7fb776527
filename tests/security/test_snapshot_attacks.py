"""Attacks on "what is graded is what is archived".

The agent's own processes outlive its last step: a detached process swaps the
submission between the grading's copy and the archive's, rewrites files while a
``validate`` copies them, or keeps editing the workspace after rgym itself was
killed.  Every grading must grade one snapshot, the run directory must keep exactly
that snapshot, and a regrade of it must give the recorded score.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rgym_core.rundir import RunDir
from rgym_core.snapshot import archive_digest, restore_snapshot, snapshot_archive
from rgym_core.testing import run_cli

pytestmark = pytest.mark.slow

#: Waits for the final grading's copy-out (a ``tar`` of the agent's uid in its own
#: view of /proc) to start and end, then puts the innocent file back: with one copy for
#: the grading and another for the archive, the archive gets the innocent file.
SWAPPER = r'''
import os, sys, time
good, innocent = open("good.csv", "rb").read(), open("innocent.csv", "rb").read()
def put(text):
    with open(".swap.tmp", "wb") as fh:
        fh.write(text)
    os.replace(".swap.tmp", "submission.csv")
def tar_running():
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                if open(f"/proc/{pid}/comm").read().strip() == "tar":
                    return True
            except OSError:
                pass
    return False
put(good)
open("swapper.started", "w").close()
end = time.time() + 120
while not tar_running() and time.time() < end:
    time.sleep(0.0005)
while tar_running():
    time.sleep(0.0005)
put(innocent)
time.sleep(300)
'''

#: Rewrites the submission as fast as it can, between the two prepared versions.
FLIPPER = r'''
import os
good, innocent = open("good.csv", "rb").read(), open("innocent.csv", "rb").read()
open("flipper.started", "w").close()
while True:
    for text in (good, innocent):
        with open(".flip.tmp", "wb") as fh:
            fh.write(text)
        os.replace(".flip.tmp", "submission.csv")
'''

#: Keeps editing the workspace: a heartbeat, and a better submission after a while.
WRITER = r'''
import os, time
good = open("good.csv", "rb").read()
start = time.time()
n = 0
while True:
    n += 1
    with open("heartbeat.txt", "w") as fh:
        fh.write(str(n))
    if time.time() - start > 1.0:
        with open(".w.tmp", "wb") as fh:
            fh.write(good)
        os.replace(".w.tmp", "submission.csv")
    time.sleep(0.01)
'''


def _prepare(script_name: str, source: str) -> list[dict[str, object]]:
    """Actions that leave innocent.csv (the baseline) and good.csv (a real fit) and
    write ``script_name``."""
    return [
        {"tool": "bash", "args": {"command": "python baseline.py && cp submission.csv innocent.csv"}},
        {"tool": "bash", "args": {"command": (
            "python - <<'PY'\n"
            "import csv\n"
            "rows = [(float(r['x']), float(r['y'])) for r in csv.DictReader(open('data/train.csv'))]\n"
            "n = len(rows); mx = sum(x for x, _ in rows) / n; my = sum(y for _, y in rows) / n\n"
            "b = sum((x - mx) * (y - my) for x, y in rows) / sum((x - mx) ** 2 for x, _ in rows)\n"
            "a = my - b * mx\n"
            "tests = [(r['id'], float(r['x'])) for r in csv.DictReader(open('data/test_x.csv'))]\n"
            "w = csv.writer(open('good.csv', 'w', newline=''))\n"
            "w.writerow(['id', 'y']); w.writerows([(i, b * x + a) for i, x in tests])\n"
            "PY\n"
            "cp innocent.csv submission.csv")}},
        {"tool": "bash", "args": {"command": f"cat > {script_name} <<'PY'\n{source}\nPY"}},
    ]


def _detach(script_name: str, marker: str) -> dict[str, object]:
    return {"tool": "bash", "args": {"command": (
        f"setsid nohup python3 {script_name} > /dev/null 2>&1 < /dev/null &\n"
        f"for i in $(seq 1000); do [ -e {marker} ] && break; sleep 0.01; done; ls {marker}")}}


def _run(tmp_path: Path, actions: list[dict[str, object]], *extra: str,
         env: dict[str, str] | None = None) -> RunDir:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(actions))
    runs = tmp_path / "runs"
    proc = run_cli("run", "rgym/demo", "--agent", "scripted", "--agent-option",
                   f"script={script}", "--runs-dir", str(runs), *extra, env=env, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [result] = runs.rglob("result.json")
    return RunDir(result.parent)


def _records(run: RunDir, kind: str) -> list[dict[str, object]]:
    return [r for r in run.records() if r.get("type") == kind]


MODES = [pytest.param([], id="default"),
         pytest.param(["--sandbox-option", "bubblewrap=false"], id="no-bubblewrap")]


@pytest.mark.parametrize("mode", MODES)
def test_late_swap_after_the_last_step_is_graded_and_archived_as_one(tmp_path: Path,
                                                                      mode: list[str]) -> None:
    run = _run(tmp_path, [*_prepare("swapper.py", SWAPPER), _detach("swapper.py", "swapper.started"),
                          {"tool": "submit"}], *mode)
    result = run.result()
    final = result.scores[-1]
    assert final.kind == "submit" and final.valid, final.error
    assert final.snapshot is not None and final.snapshot.after_kill
    # The archive holds exactly the graded snapshot ...
    assert archive_digest(run.archive_path) == final.snapshot.sha256
    # ... the swapper was killed before the copy, and the trajectory says so ...
    [killed] = _records(run, "processes_killed")
    assert any("swapper.py" in c for c in killed["commands"]), killed  # type: ignore[union-attr]
    assert "swapper.py" in " ".join(final.snapshot.killed)
    # ... and grading the archive again gives the recorded score.
    proc = run_cli("grade", "--regrade", "--json", str(run.path), timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    again = run.result()
    assert again.final_scores == result.final_scores
    assert again.extras["rgym_grade"]["snapshot_matches"] is True
    assert result.final_scores is not None and result.final_scores["r2"] > 0.95  # good.csv


@pytest.mark.parametrize("mode", MODES)
def test_validate_snapshots_are_frozen_kept_and_regrade_exactly(tmp_path: Path,
                                                                mode: list[str]) -> None:
    from rgym_core.registry import load_registry
    from rgym_core.testing import grade

    actions = [*_prepare("flipper.py", FLIPPER), _detach("flipper.py", "flipper.started"),
               *[{"tool": "validate"} for _ in range(6)], {"tool": "submit"}]
    run = _run(tmp_path, actions, *mode)
    validates = [s for s in run.result().scores if s.kind == "validate"]
    assert len(validates) == 6 and all(s.valid for s in validates)
    task = load_registry().task("rgym/demo")
    for i, record in enumerate(validates):
        assert record.snapshot is not None and record.snapshot.frozen
        kept = snapshot_archive(run.path, record.snapshot.sha256)
        snap = restore_snapshot(kept, tmp_path / f"v{i}", expect=record.snapshot.sha256)
        files = {p.name: p.read_bytes() for p in snap.path.iterdir() if p.is_file()}
        again = grade(task, {"submission.csv": files["submission.csv"]}, starter=False)
        assert again.scores == record.scores, (i, again.scores, record.scores)
    # Both versions were seen by some validate, as the flipper ran between them.
    assert len({s.scores["r2"] for s in validates}) >= 1


def _wait_for(predicate, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.parametrize("mode", MODES)
def test_kill_9_then_rgym_grade_kills_the_leftovers_first(tmp_path: Path, mode: list[str]) -> None:
    actions = [*_prepare("writer.py", WRITER), _detach("writer.py", "heartbeat.txt"),
               {"tool": "bash", "args": {"command": "sleep 200"}}]
    script = tmp_path / "script.json"
    script.write_text(json.dumps(actions))
    runs = tmp_path / "runs"
    proc = subprocess.Popen([sys.executable, "-m", "rgym_core.cli", "run", "rgym/demo", "--agent",
                             "scripted", "--agent-option", f"script={script}", "--runs-dir",
                             str(runs), *mode], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def sandbox_record() -> dict[str, object] | None:
            for traj in runs.rglob("trajectory.jsonl"):
                for line in traj.read_text().splitlines():
                    rec = json.loads(line)
                    if rec.get("type") == "sandbox":
                        return rec
            return None

        _wait_for(lambda: sandbox_record() is not None, 60, "the sandbox to start")
        record = sandbox_record()
        assert record is not None
        workspace = Path(str(record["host_workspace"]))
        _wait_for(lambda: (workspace / "submission.csv").exists()
                  and (workspace / "heartbeat.txt").exists()
                  and b"y" in (workspace / "good.csv").read_bytes()[:10], 60, "the writer")
        _wait_for(lambda: (workspace / "submission.csv").read_bytes()
                  == (workspace / "good.csv").read_bytes(), 30, "the writer's better file")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    [traj] = runs.rglob("trajectory.jsonl")
    run = RunDir(traj.parent)
    graded = run_cli("grade", "--json", str(run.path), timeout=240)
    assert graded.returncode == 0, graded.stdout + graded.stderr
    result = run.result()
    final = result.scores[-1]
    assert final.valid and final.snapshot is not None and final.snapshot.after_kill
    assert archive_digest(run.archive_path) == final.snapshot.sha256
    # Nothing of the episode runs any more: the heartbeat stands still.
    if workspace.exists():
        beat = (workspace / "heartbeat.txt").read_bytes()
        time.sleep(0.3)
        assert (workspace / "heartbeat.txt").read_bytes() == beat, "the writer still runs"
    if mode:  # no namespace took the writer with it: rgym grade had to kill it
        [killed] = _records(run, "processes_killed")
        assert any("writer.py" in c for c in killed["commands"]), killed  # type: ignore[union-attr]
        assert "writer.py" in " ".join(final.snapshot.killed)


def test_a_background_job_at_submit_is_stopped_and_named(tmp_path: Path) -> None:
    job = "import time\nwhile True:\n    open('train.log', 'a').write('epoch\\n'); time.sleep(0.05)\n"
    run = _run(tmp_path, [
        {"tool": "bash", "args": {"command": f"cat > train.py <<'PY'\n{job}PY\n"
                                             "nohup python3 train.py > /dev/null 2>&1 &\n"
                                             "sleep 0.3; python baseline.py"}},
        {"tool": "submit"}])
    [killed] = _records(run, "processes_killed")
    assert "python3 train.py" in " ".join(killed["commands"])  # type: ignore[arg-type]
    assert str(killed["message"]).startswith("killed 1 process still running at the submission")
    assert run.result().scores[-1].snapshot.killed == killed["commands"]  # type: ignore[union-attr]
    assert os.path.exists(run.archive_path)


@pytest.mark.docker
@pytest.mark.timeout(600)
def test_kill_9_then_rgym_grade_on_docker(tmp_path: Path) -> None:
    """The container outlives rgym: ``rgym grade`` kills what it still runs, copies its
    workspace out (then removes it) and grades that snapshot."""
    from rgym_core.testing import skip_or_fail

    try:
        from rgym_sandbox_docker.testing import DockerNotReady, episode_env
        env = episode_env("snapshot-kill9")
    except (ImportError, DockerNotReady) as exc:
        skip_or_fail(str(exc))
    actions = [*_prepare("writer.py", WRITER), _detach("writer.py", "heartbeat.txt"),
               {"tool": "bash", "args": {"command": "sleep 1.5; cmp good.csv submission.csv && sleep 300"}}]
    script = tmp_path / "script.json"
    script.write_text(json.dumps(actions))
    runs = tmp_path / "runs"
    proc = subprocess.Popen([sys.executable, "-m", "rgym_core.cli", "run", "rgym/demo", "--agent",
                             "scripted", "--agent-option", f"script={script}", "--runs-dir",
                             str(runs), "--sandbox", "docker"], env={**os.environ, **env},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def detached() -> bool:
            for traj in runs.rglob("trajectory.jsonl"):
                steps = [json.loads(line) for line in traj.read_text().splitlines()]
                if sum(1 for s in steps if s.get("type") == "step") >= 4:
                    return True
            return False

        _wait_for(detached, 300, "the writer to start in the container")
        time.sleep(2.5)  # the writer has put good.csv in place (the last step checks it)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    [traj] = runs.rglob("trajectory.jsonl")
    run = RunDir(traj.parent)
    graded = run_cli("grade", "--json", str(run.path), env=env, timeout=300)
    assert graded.returncode == 0, graded.stdout + graded.stderr
    final = run.result().scores[-1]
    assert final.valid and final.snapshot is not None and final.snapshot.after_kill, final
    assert archive_digest(run.archive_path) == final.snapshot.sha256
    assert "writer.py" in " ".join(final.snapshot.killed), final.snapshot.killed
    assert run.result().final_scores["r2"] > 0.95  # type: ignore[index]


@pytest.mark.docker
@pytest.mark.timeout(600)
def test_late_swap_on_docker_is_graded_and_archived_as_one(tmp_path: Path) -> None:
    from rgym_core.testing import skip_or_fail

    try:
        from rgym_sandbox_docker.testing import DockerNotReady, episode_env
        env = episode_env("snapshot-swap")
    except (ImportError, DockerNotReady) as exc:
        skip_or_fail(str(exc))
    run = _run(tmp_path, [*_prepare("swapper.py", SWAPPER), _detach("swapper.py", "swapper.started"),
                          {"tool": "validate"}, {"tool": "submit"}], "--sandbox", "docker", env=env)
    final = run.result().scores[-1]
    assert final.valid and final.snapshot is not None and final.snapshot.after_kill
    assert archive_digest(run.archive_path) == final.snapshot.sha256
    assert "swapper.py" in " ".join(final.snapshot.killed)
    [validate] = [s for s in run.result().scores if s.kind == "validate"]
    assert validate.snapshot is not None and validate.snapshot.frozen
    restore_snapshot(snapshot_archive(run.path, validate.snapshot.sha256), tmp_path / "v",
                     expect=validate.snapshot.sha256)
