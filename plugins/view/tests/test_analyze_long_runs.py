"""`rgym analyze` on long runs (rgym_view.longruns): jobs that overlapped and wrote
the same file, a foreground command the per-action timeout killed while job_start
was there, results graded from a failed job, time spent after the best validation.
One real rgym/demo episode shows all four (its starter trains for real seconds);
hand-built trajectories show each one and the near misses that must not be flagged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rgym_view.longruns import LONG_RUN_NOTES, LONG_RUN_WARNINGS, job_writes, script_writes

from conftest import make_run, rgym
from rgym_core import RunDir

#: A "training" that reports a metric every 0.25 s, then writes submission.csv by a
#: fixed name; a learning rate that is not a number fails it after its epochs.
TRAIN = r'''import csv, sys, time
epochs, lr = int(sys.argv[1]), sys.argv[2]
rows = [(float(r["x"]), float(r["y"])) for r in csv.DictReader(open("data/train.csv"))]
for epoch in range(epochs):
    time.sleep(0.25)
    print(f"epoch {epoch} loss {1.0 / (epoch + 1):.4f}", flush=True)
rate = float(lr)
slope = sum(x * y for x, y in rows) / sum(x * x for x, _ in rows)
tests = [(r["id"], float(r["x"])) for r in csv.DictReader(open("data/test_x.csv"))]
with open("submission.csv", "w", newline="") as fh:
    w = csv.writer(fh)
    w.writerow(["id", "y"])
    w.writerows([(i, slope * x) for i, x in tests])
print(f"lr {rate} wrote submission.csv", flush=True)
'''

SCRIPT = [
    {"tool": "bash", "args": {"command": f"cat > train.py <<'PY'\n{TRAIN}PY"}},
    {"tool": "bash", "args": {"command": "python baseline.py"}},
    {"tool": "validate"},                                                              # 3: the best
    {"tool": "job_start", "args": {"name": "a", "command": "python train.py 8 0.1"}},  # 4
    {"tool": "job_start", "args": {"name": "b", "command": "python train.py 8 0.01"}},  # 5: beside a
    {"tool": "job_list"},
    {"tool": "job_wait", "args": {"name": "a", "timeout": 5}},
    {"tool": "job_wait", "args": {"name": "b", "timeout": 5}},
    {"tool": "job_start", "args": {"name": "c", "command": "python train.py 4 bad"}},  # 9: fails
    {"tool": "job_wait", "args": {"name": "c", "timeout": 5}},
    {"tool": "job_log", "args": {"name": "c"}},
    {"tool": "validate"},                                                              # 12: from c
    {"tool": "bash", "args": {"command": "python train.py 100 0.1"}},                  # 13: 25 s > 10 s
    {"tool": "validate"},
    {"tool": "job_start", "args": {"name": "left", "command": "sleep 300"}},           # 15: killed
    {"tool": "submit"},
]


def analyze_json(*args: str, cwd: Path) -> dict[str, Any]:
    proc = rgym("analyze", *args, "--json", "--no-plots", cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def by_name(report: dict[str, Any], name: str) -> dict[str, Any]:
    [run] = [r for r in report["runs"] if Path(r["path"]).name == name]
    return run


def found(run: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [f for f in run["findings"] if f["kind"] == kind]


@pytest.fixture(scope="module")
def episode(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real episode: rgym/demo with the jobs tools, a 10 s per-action timeout."""
    root = tmp_path_factory.mktemp("long-run")
    (root / "script.json").write_text(json.dumps(SCRIPT))
    proc = rgym("run", "rgym/demo", "--agent", "scripted", "--agent-option", f"script={root / 'script.json'}",
                "--tool", "jobs", "--action-timeout", "10", "--runs-dir", str(root / "runs"), "--json", cwd=root)
    # What is analysed is the trajectory: a grading the grader refused (exit 1) changes none of it.
    assert proc.returncode in (0, 1) and proc.stdout, proc.stderr
    result = json.loads(proc.stdout)
    assert result["steps"] == len(SCRIPT) and result["end_reason"] == "submit", result
    run_dir = Path(result["run_dir"])
    return run_dir if run_dir.is_absolute() else root / run_dir


def test_a_real_episode_shows_every_failure_mode_of_long_runs(episode: Path, tmp_path: Path) -> None:
    report = analyze_json(str(episode), "--stale-s", "0", cwd=tmp_path)
    [run] = report["runs"]
    assert report["options"]["stale_s"] == 0
    [overlap] = found(run, "job_overlap")
    assert overlap["steps"] == [4, 5] and "jobs a and b" in overlap["message"]
    assert "submission.csv" in overlap["message"]
    [timeout] = found(run, "foreground_timeout")
    assert timeout["steps"] == [13] and "python train.py 100 0.1" in timeout["message"]
    [failed] = found(run, "failed_job_used")
    assert failed["steps"] == [9, 12, 14, 16]  # the timed-out foreground run produced nothing
    assert "job c failed (exit 1" in failed["message"] and "ValueError" in failed["message"]
    [stale] = found(run, "stale_after_best")
    assert stale["steps"] == [3] and stale["severity"] == "note"
    assert run["flagged"]
    jobs = {j["name"]: j for j in run["long_run"]["jobs"]}
    assert set(jobs) == {"a", "b", "c", "left"} and run["long_run"]["archive_read"]
    assert jobs["a"]["state"] == "exited 0" and jobs["a"]["failure"] is None
    assert jobs["a"]["writes"] == ["submission.csv"]  # read from train.py in the archived workspace
    assert 1.5 < jobs["a"]["ended_at"] - jobs["a"]["started_at"] < 10
    assert jobs["c"]["exit_code"] == 1
    assert jobs["left"]["killed_at_end"] and jobs["left"]["failure"] is None
    after = run["long_run"]["after_best"]
    valid_after = [g for g in RunDir(episode).scores() if g.kind == "validate" and g.valid and g.step > 3]
    assert after["last_improvement_step"] == 3 and after["validations_after"] == len(valid_after) >= 1
    assert after["steps_after"] == len(SCRIPT) - 3 and after["after_best_s"] > 10
    # the default threshold (600 s) does not call a 30 s episode stale
    assert not found(by_name(analyze_json(str(episode), cwd=tmp_path), episode.name), "stale_after_best")
    # the tables a person reads
    proc = rgym("analyze", str(episode), "--no-plots", "--stale-s", "0", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    for line in ("warning job_overlap: jobs a and b ran at the same time",
                 "warning foreground_timeout: step 13 ran `python train.py 100 0.1`",
                 "warning failed_job_used: job c failed (exit 1",
                 "note    stale_after_best: the episode went on", "Background jobs",
                 "a: exited 0 (started at step 4", "after the last improving validation (step 3)"):
        assert line in proc.stdout, (line, proc.stdout)


def test_the_viewer_data_carries_the_jobs_and_findings(episode: Path) -> None:
    from rgym_view.data import trajectory

    from rgym_core import safe_summary

    run = RunDir(episode)
    analysis = trajectory(run, summary=safe_summary(run), with_diffs=False)["analysis"]
    assert {f["kind"] for f in analysis["findings"]} == {"job_overlap", "foreground_timeout", "failed_job_used"}
    assert [j["name"] for j in analysis["long_run"]["jobs"]] == ["a", "b", "c", "left"]
    assert analysis["long_run"]["after_best"]["last_improvement_step"] == 3


def test_the_run_page_shows_the_background_jobs_card(browser: Any, episode: Path, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from test_viewer_browser import open_page, open_run

    page = tmp_path / "view.html"
    assert rgym("view", str(episode.parent), "-o", str(page), cwd=tmp_path).returncode == 0
    open_page(browser, page.as_uri())
    open_run(browser, lambda r: True)
    card = browser.find_element(By.ID, "long-run")
    assert "submission.csv" in card.text and "python train.py 4 bad" in card.text
    assert "after the last improving validation (step 3)" in card.text
    assert "failed job used" in browser.find_element(By.ID, "failure-modes").text


#: The same training writing its predictions where it is told (its third argument).
FIT = TRAIN.replace('open("submission.csv", "w", newline="")', 'open(sys.argv[3], "w", newline="")')
CLEAN = [
    {"tool": "bash", "args": {"command": f"cat > fit.py <<'PY'\n{FIT}PY"}},
    {"tool": "job_start", "args": {"name": "a", "command": "python fit.py 6 0.1 a.csv > a.out"}},
    {"tool": "job_start", "args": {"name": "b", "command": "python fit.py 8 0.01 b.csv > b.out"}},
    {"tool": "job_list"},
    {"tool": "job_wait", "args": {"name": "a", "timeout": 5}},
    {"tool": "job_wait", "args": {"name": "b", "timeout": 5}},
    {"tool": "job_log", "args": {"name": "a"}},
    {"tool": "job_log", "args": {"name": "b"}},
    {"tool": "bash", "args": {"command": "cat a.out b.out && cp b.csv submission.csv"}},
    {"tool": "validate"},
    {"tool": "job_start", "args": {"name": "left", "command": "sleep 300"}},
    {"tool": "submit"},
]


def test_a_clean_episode_with_two_jobs_and_one_left_running_is_not_flagged(tmp_path: Path) -> None:
    (tmp_path / "script.json").write_text(json.dumps(CLEAN))
    proc = rgym("run", "rgym/demo", "--agent", "scripted", "--agent-option", f"script={tmp_path / 'script.json'}",
                "--tool", "jobs", "--action-timeout", "10", "--runs-dir", str(tmp_path / "runs"), "--json",
                cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "submitted"
    [run] = analyze_json(str(tmp_path / "runs"), "--stale-s", "0", cwd=tmp_path)["runs"]
    kinds = {f["kind"] for f in run["findings"]}
    assert not kinds & {*LONG_RUN_WARNINGS, *LONG_RUN_NOTES} and not run["flagged"], run["findings"]
    jobs = {j["name"]: j for j in run["long_run"]["jobs"]}
    assert jobs["a"]["writes"] == ["a.out"] and jobs["b"]["writes"] == ["b.out"]
    assert jobs["a"]["state"] == jobs["b"]["state"] == "exited 0"
    started, ended = (max(jobs[n]["started_at"] for n in "ab"), min(jobs[n]["ended_at"] for n in "ab"))
    assert ended - started > 1  # they did run side by side, for real seconds
    assert jobs["left"]["killed_at_end"] and jobs["left"]["state"] == "killed at the end"
    [killed] = [r for r in RunDir(Path(run["path"])).records() if r.get("type") == "processes_killed"]
    assert "sleep 300" in " ".join(killed["commands"])


# --------------------------------------------------------------------------- hand-built runs

JOBS_TOOLS = ["rgym/bash", "rgym/validate", "rgym/submit", "jobs/job_start", "jobs/job_list", "jobs/job_log",
              "jobs/job_wait", "jobs/job_stop"]
VALIDATE = {"tool": "validate", "output": "ok"}
SUBMIT = {"tool": "submit", "output": "submitted"}


def start(name: str, command: str) -> dict[str, Any]:
    return {"tool": "job_start", "args": {"name": name, "command": command}, "output": f"started job {name}",
            "info": {"job": {"name": name, "state": "running", "command": command, "elapsed_s": 0.0}}}


def seen(tool: str, name: str, state: str, elapsed: float, *, duration: float = 0.5,
         output: str = "", **args: Any) -> dict[str, Any]:
    return {"tool": tool, "args": {"name": name, **args}, "output": output, "duration": duration,
            "info": {"job": {"name": name, "state": state, "elapsed_s": elapsed}}}


def bash(command: str, *, code: int = 0, duration: float = 0.5, **extra: Any) -> dict[str, Any]:
    return {"tool": "bash", "args": {"command": command}, "exit_code": code, "error": code != 0,
            "duration": duration, **extra}


def graded(*steps: int, scores: list[float] | None = None) -> list[dict[str, Any]]:
    values = scores or [0.6] * len(steps)
    return [{"step": s, "scores": {"accuracy": v}} for s, v in zip(steps, values, strict=True)]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One hand-built run per failure mode and its near misses, analysed once."""
    runs = tmp_path_factory.mktemp("long-runs") / "runs"
    both = [start("a", "python train.py --out model.pt > a.log"), start("b", "python train.py --lr 0.1 --out model.pt"),
            {"tool": "job_list", "output": "a: running\nb: running", "info": {"jobs": [
                {"name": "a", "state": "running", "elapsed_s": 2.0}, {"name": "b", "state": "running", "elapsed_s": 1.0}]}},
            seen("job_wait", "a", "exited 0", 100.0, duration=100.0), seen("job_wait", "b", "exited 0", 120.0, duration=30.0)]
    make_run(runs / "overlap", [*both, VALIDATE, SUBMIT], tools=JOBS_TOOLS, gradings=graded(6))
    # the same output, one job after the other: no overlap
    make_run(runs / "sequential", [start("a", "python train.py --out model.pt"),
                                   seen("job_wait", "a", "exited 0", 50.0, duration=50.0),
                                   start("b", "python train.py --lr 0.1 --out model.pt"),
                                   seen("job_wait", "b", "exited 0", 50.0, duration=50.0), VALIDATE, SUBMIT],
             tools=JOBS_TOOLS, gradings=graded(5))
    # at the same time, each its own output: no overlap
    make_run(runs / "apart", [start("a", "python train.py --out a.pt"), start("b", "python train.py --out b.pt"),
                              seen("job_wait", "a", "exited 0", 60.0, duration=60.0),
                              seen("job_wait", "b", "exited 0", 61.0), VALIDATE, SUBMIT],
             tools=JOBS_TOOLS, gradings=graded(5))
    killed = bash("python train.py --epochs 90", code=124, duration=60.0, info={"timed_out": True})
    make_run(runs / "timeout", [killed, VALIDATE, SUBMIT], tools=JOBS_TOOLS, gradings=graded(2))
    make_run(runs / "timeout-no-jobs", [killed, VALIDATE, SUBMIT], gradings=graded(2))
    make_run(runs / "slept", [bash("sleep 100", code=124, duration=60.0, info={"timed_out": True}), VALIDATE,
                              SUBMIT], tools=JOBS_TOOLS, gradings=graded(2))
    make_run(runs / "failed", [start("c", "python train.py"), seen("job_wait", "c", "exited 1", 30.0, duration=30.0),
                               VALIDATE, SUBMIT], tools=JOBS_TOOLS, gradings=graded(3))
    traceback = "Traceback (most recent call last):\n  File \"train.py\", line 3\nRuntimeError: CUDA error"
    make_run(runs / "traceback", [start("c", "python train.py"),
                                  seen("job_log", "c", "exited 0", 30.0, output=traceback, duration=30.0),
                                  bash("cat notes.txt"), VALIDATE, SUBMIT], tools=JOBS_TOOLS, gradings=graded(4))
    make_run(runs / "metric-log", [start("c", "python train.py | tee log"),
                                   seen("job_log", "c", "exited 0", 30.0, output="epoch 3\nMeanSquaredError: 0.31",
                                        duration=30.0), VALIDATE, SUBMIT], tools=JOBS_TOOLS, gradings=graded(3))
    broken = make_run(runs / "broken-archive", [start("c", "python train.py"),
                                                seen("job_wait", "c", "exited 2", 30.0, duration=30.0), VALIDATE,
                                                SUBMIT], tools=JOBS_TOOLS, gradings=graded(3))
    (broken / "workspace.tar.gz").write_bytes(b"not a gzip file")
    make_run(runs / "rerun", [start("c", "python train.py"), seen("job_wait", "c", "exited 1", 30.0, duration=30.0),
                              bash("python train.py --fixed", duration=20.0), VALIDATE, SUBMIT],
             tools=JOBS_TOOLS, gradings=graded(4))
    make_run(runs / "stopped", [start("c", "python train.py"), seen("job_stop", "c", "killed", 5.0), VALIDATE,
                                SUBMIT], tools=JOBS_TOOLS, gradings=graded(3))
    make_run(runs / "unseen", [start("c", "python train.py"), bash("sleep 20", duration=20.0), VALIDATE, SUBMIT],
             tools=JOBS_TOOLS, gradings=graded(3),
             extra_records=[("processes_killed", {"when": "submit", "count": 1, "commands": ["python train.py"],
                                                  "message": "killed 1 process"})])
    plateau = [bash("python train.py"), VALIDATE, *[bash("python train.py --more", duration=900.0) for _ in range(2)],
               VALIDATE, bash("python train.py --most", duration=900.0), VALIDATE, SUBMIT]
    make_run(runs / "plateau", plateau, gradings=graded(2, 5, 7, scores=[0.7, 0.65, 0.7]))
    make_run(runs / "climbing", plateau, gradings=graded(2, 5, 7, scores=[0.6, 0.65, 0.7]))
    return {"runs": runs, "report": analyze_json(str(runs), cwd=runs.parent)}


def test_jobs_writing_the_same_file_at_the_same_time_overlap(built: dict[str, Any]) -> None:
    run = by_name(built["report"], "overlap")
    [overlap] = found(run, "job_overlap")
    assert overlap["steps"] == [1, 2] and "both write model.pt" in overlap["message"]
    assert run["flagged"]
    assert not found(by_name(built["report"], "sequential"), "job_overlap")
    assert not found(by_name(built["report"], "apart"), "job_overlap")
    jobs = by_name(built["report"], "overlap")["long_run"]["jobs"]
    assert jobs[0]["writes"] == ["a.log", "model.pt"] and not by_name(built["report"], "overlap")["long_run"]["archive_read"]


def test_a_foreground_command_killed_by_the_timeout_while_jobs_were_there(built: dict[str, Any]) -> None:
    [finding] = found(by_name(built["report"], "timeout"), "foreground_timeout")
    assert finding["steps"] == [1] and "python train.py --epochs 90" in finding["message"]
    assert not found(by_name(built["report"], "timeout-no-jobs"), "foreground_timeout")
    assert not found(by_name(built["report"], "slept"), "foreground_timeout")  # a sleep is an idle wait


def test_a_grading_after_a_failed_job_relied_on_it(built: dict[str, Any]) -> None:
    [failed] = found(by_name(built["report"], "failed"), "failed_job_used")
    assert failed["steps"] == [1, 3, 4] and "exit 1; its end was shown at step 2" in failed["message"]
    [logged] = found(by_name(built["report"], "traceback"), "failed_job_used")
    assert "RuntimeError: CUDA error" in logged["message"]  # `cat` between is no experiment
    # an exit 0 whose log has a metric named like an error is no failure
    assert not found(by_name(built["report"], "metric-log"), "failed_job_used")
    # an archive that cannot be read: the trajectory still tells, and the run says why
    broken = by_name(built["report"], "broken-archive")
    assert "exit 2" in found(broken, "failed_job_used")[0]["message"]
    assert not broken["long_run"]["archive_read"] and "workspace.tar.gz" in broken["long_run"]["archive_problem"]
    assert not found(by_name(built["report"], "rerun"), "failed_job_used")  # a run that worked came between
    assert not found(by_name(built["report"], "stopped"), "failed_job_used")  # job_stop is no failure
    unseen = by_name(built["report"], "unseen")
    assert not found(unseen, "failed_job_used")
    [job] = unseen["long_run"]["jobs"]
    assert job["killed_at_end"] and job["state"] == "killed at the end"


def test_time_after_the_last_improving_validation_is_noted(built: dict[str, Any]) -> None:
    plateau = by_name(built["report"], "plateau")
    [stale] = found(plateau, "stale_after_best")
    assert stale["steps"] == [2] and stale["severity"] == "note" and not plateau["flagged"]
    assert "2 validations after it did not improve" in stale["message"]
    after = plateau["long_run"]["after_best"]
    assert after["steps_after"] == 6 and after["after_best_s"] > 2700
    climbing = by_name(built["report"], "climbing")
    assert not found(climbing, "stale_after_best")
    assert climbing["long_run"]["after_best"]["last_improvement_step"] == 7


@pytest.mark.parametrize(("command", "writes"), [
    ("python train.py > out.log 2>&1", ["out.log"]),
    ("python train.py --output_dir ckpt/ | tee -a run.log", ["ckpt/", "run.log"]),
    ("python train.py -o ./preds.csv >/dev/null", ["preds.csv"]),
    ("python train.py data/train.csv", []),
])
def test_what_a_job_command_writes(command: str, writes: list[str]) -> None:
    assert job_writes(command) == writes


def test_what_a_script_writes_by_fixed_name() -> None:
    source = ("open('submission.csv', 'w')\nopen('data/train.csv')\ndf.to_csv(\"preds.csv\")\n"
              "torch.save(model.state_dict(), 'model.pt')\nopen(f'{out}.csv', 'w')\nplt.savefig('loss.png')\n")
    assert script_writes(source) == ["loss.png", "model.pt", "preds.csv", "submission.csv"]
    assert job_writes("python ./train.py --lr 3", {"train.py": source}) == script_writes(source)
