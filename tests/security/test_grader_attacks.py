"""Attacks on grading: the code a grader runs from the submission (a strategy, a
heuristic, a model) tries to forge or steal its score (issue 10 item 1 and item 3,
grader side).

Every attack goes through the real :class:`~rgym_core.grading.Grader` and the real
packs' graders, on the local sandbox, as this machine allows (root here: leased uids
and bubblewrap), and again as a normal user (a subprocess as an unprivileged uid, with
and without bubblewrap).  Each one must end as an honest score or a clear evaluation
error, never a crash, with no process of the attack left behind.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import rgym_task_gametheory
import rgym_task_sat
import yaml

import rgym_core
from rgym_core import load_task
from rgym_core.grader_confinement import host_confinement
from rgym_core.grader_protocol import install_kit
from rgym_core.grading import Grader
from rgym_core.isolation.users import kill_uid_processes
from rgym_core.records import ScoreRecord
from rgym_core.sandbox import Sandbox, SandboxConfig, WorkspaceLayout
from rgym_core.specs import PreparedDataset

GAMES = Path(rgym_task_gametheory.__file__).parent / "tasks"
SAT = Path(rgym_task_sat.__file__).parent / "tasks" / "3sat"
DEMO = Path(rgym_core.__file__).parent / "demo"
DEMO_POINTS = PreparedDataset(id="rgym/demo-points", public=DEMO / "datasets" / "points")
ROOT = os.geteuid() == 0


# -- helpers -------------------------------------------------------------------------------


def token_processes(token: str) -> list[int]:
    """Live processes with ``token`` on their command line."""
    needle = token.encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                if needle in fh.read():
                    found.append(int(name))
        except OSError:
            continue
    return found


def assert_no_survivor(token: str) -> None:
    time.sleep(0.3)
    assert token_processes(token) == [], f"processes of the attack survived grading ({token})"


class FolderSandbox(Sandbox):
    """A stand-in sandbox whose workspace is a host folder (for the normal-user runs,
    where the local sandbox's own isolation is not what is tested)."""

    workspace = "/workspace"

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def export_workspace(self, dest: Path, *, exclude: Any = (), include: Any = None,
                         quota_bytes: int | None = None) -> None:
        shutil.copytree(self.folder, dest, symlinks=True)

    def start(self, layout: WorkspaceLayout) -> None: ...
    def run(self, command: str, **kw: Any) -> Any: raise NotImplementedError
    def exec(self, argv: list[str], **kw: Any) -> Any: raise NotImplementedError
    def read_file(self, path: str) -> bytes: raise NotImplementedError
    def write_file(self, path: str, data: bytes | str) -> None: raise NotImplementedError
    def copy_in(self, src: Path, dest: str) -> None: raise NotImplementedError
    def copy_out(self, src: str, dest: Path) -> None: raise NotImplementedError
    def cleanup(self) -> None: ...


def local_sandbox(task_dir: Path, datasets: Mapping[str, PreparedDataset]) -> Sandbox:
    from rgym_core.sandboxes.local import LocalSandbox

    task = load_task(task_dir)
    box = LocalSandbox(SandboxConfig(run_id=f"grd-{uuid.uuid4().hex[:8]}"))
    box.start(WorkspaceLayout(starter=task.path(task.starter_files), datasets=dict(datasets)))
    return box


#: Makes a started sandbox for a task folder and its datasets (the Docker tests pass theirs).
SandboxMaker = Callable[[Path, Mapping[str, PreparedDataset]], Sandbox]


def grade(task_dir: Path, tmp: Path, files: Mapping[str, str] | None = None, *,
          shell: str = "", seed: int | None = None, env: Mapping[str, str] | None = None,
          datasets: Mapping[str, PreparedDataset] | None = None, folder: bool = False,
          sandbox: SandboxMaker | None = None) -> ScoreRecord:
    """Write ``files`` into a fresh workspace of the task (after running ``shell``
    there), grade it once (in a grader sandbox when ``sandbox`` makes one that can,
    and the task asks for it), and return the record."""
    datasets = dict(datasets or {})
    task = load_task(task_dir)
    if sandbox is not None:
        box: Sandbox = sandbox(task_dir, datasets)
    elif folder:
        work = tmp / "workspace"
        shutil.copytree(task.path(task.starter_files), work)
        for mount, prepared in datasets.items():
            shutil.copytree(prepared.public, work / mount)
        for name, text in (files or {}).items():
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            (work / name).write_text(text)
        if shell:
            subprocess.run(["bash", "-c", shell], cwd=work, check=True)
        box = FolderSandbox(work)
    else:
        box = local_sandbox(task_dir, datasets)
    try:
        if not folder:
            for name, text in (files or {}).items():
                box.write_file(name, text)
            if shell:
                result = box.run(shell, timeout=120)
                assert result.exit_code == 0, result.output
        grader = Grader(task, box, datasets, tmp / "run", seed=seed, env=dict(env or {}),
                        isolated=sandbox is not None)
        return grader.grade("validate", 1)
    finally:
        box.cleanup()


def confined(record: ScoreRecord) -> bool | None:
    value = getattr(record, "confined", None)
    return record.details.get("confined") if value is None else value


# -- the attacks (each returns a record; assertions follow) -----------------------------------


DETACHED_REWRITER = r'''
import json, os, sys, time
TOKEN = "@TOKEN@"
FORGED = json.dumps({"scores": {"Score": 99.0}})
LOOP = """
import glob, json, os, sys, time
forged, end = sys.argv[1], time.time() + 120
found = set()
while time.time() < end:
    if not found:
        found.update(glob.glob("/tmp/rgym-*/**/scores.json", recursive=True))
        found.update(p for p in ("/eval/scores.json",) if os.path.exists(os.path.dirname(p)))
        for pid in os.listdir("/proc"):
            try:
                env = open("/proc/%s/environ" % pid, "rb").read().split(b"\\0")
            except OSError:
                continue
            found.update(kv[17:].decode() for kv in env if kv.startswith(b"RGYM_SCORES_FILE="))
    for path in found:
        try:
            with open(path) as fh:
                if fh.read() == forged:
                    continue
        except OSError:
            pass
        try:
            with open(path, "w") as fh:
                fh.write(forged)
        except OSError:
            pass
    time.sleep(0.001)
"""
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", LOOP, FORGED, TOKEN])
    os._exit(0)
os.wait()
time.sleep(0.2)

def row_strategy(history):
    return 1
'''


def attack_detached_rewrite(tmp: Path, token: str, **kw: Any) -> ScoreRecord:
    """Prisoner's dilemma: a process detached at import rewrites scores.json."""
    strategy = DETACHED_REWRITER.replace("@TOKEN@", token)
    return grade(GAMES / "prisoners-dilemma", tmp, {"strategy.py": strategy},
                 env={"RGYM_GAMETHEORY_GAMES": "40"}, **kw)


SNOOPER = r'''
import glob, importlib.util, os
SECRETS = (b"def opponent", b"RGYM_SEED=", b"424242", b"RGYM_PRIVATE_DIR", b"_tit_for_two_tats")
leaks = []

def look(path):
    try:
        with open(path, "rb") as fh:
            data = fh.read(1 << 20)
    except OSError:
        return
    if any(s in data for s in SECRETS):
        leaks.append(path)

for pid in [str(os.getppid())] + [p for p in os.listdir("/proc") if p.isdigit()]:
    for part in ("environ", "cmdline"):
        look(f"/proc/{pid}/{part}")
    for part in ("cwd", "root"):
        for rel in ("grader/evaluate.py", "eval/grader/evaluate.py"):
            look(f"/proc/{pid}/{part}/{rel}")
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            target = f"/proc/{pid}/fd/{fd}"
            if os.path.isfile(target):
                look(target)
    except OSError:
        pass
for pattern in ("../grader/evaluate.py", "../../grader/evaluate.py", "/eval/grader/evaluate.py",
                "/tmp/rgym-*/eval/grader/evaluate.py", "/tmp/rgym-*/*/grader/evaluate.py"):
    for path in glob.glob(pattern):
        look(path)
spec = importlib.util.find_spec("rgym_task_gametheory")
if spec and spec.submodule_search_locations:
    for base in spec.submodule_search_locations:
        look(os.path.join(base, "tasks", "blotto", "grader", "evaluate.py"))

def row_strategy(history):
    if leaks:
        raise RuntimeError("LEAKED " + " ".join(leaks[:5]))
    return [20] * 6
'''


def attack_snoop_grader(tmp: Path, token: str, **kw: Any) -> ScoreRecord:
    """Blotto: read the grader's code and the seed through /proc and the file system."""
    return grade(GAMES / "blotto", tmp, {"strategy.py": SNOOPER}, seed=424242,
                 env={"RGYM_GAMETHEORY_GAMES": "20"}, **kw)


def moms_heuristic() -> str:
    spec = yaml.safe_load((SAT / "task.yaml").read_text())
    return spec["scripted_actions"][0]["args"]["command"].split("<<'PY'\n", 1)[1].rsplit("PY", 1)[0]


LABEL_THIEF = r'''
import glob, importlib.util, os
import solver
found = glob.glob("../grader/instances.json") + glob.glob("/eval/grader/instances.json") \
    + glob.glob("/tmp/rgym-*/eval/grader/instances.json")
for pid in os.listdir("/proc"):
    found += glob.glob(f"/proc/{pid}/cwd/grader/instances.json")
spec = importlib.util.find_spec("rgym_task_sat")
if spec and spec.submodule_search_locations:
    for base in spec.submodule_search_locations:
        found += glob.glob(os.path.join(base, "tasks", "3sat", "grader", "instances.json"))
readable = []
for path in found:
    try:
        readable.append(open(path).read(100) and path)
    except OSError:
        pass
if readable:
    raise RuntimeError("LEAKED " + " ".join(readable))
real_solve = solver.DPLL.solve
def solve(self):
    sat = real_solve(self)
    self.num_decisions = 0          # report that no decision was needed
    return sat
solver.DPLL.solve = solve
'''


def moms_decisions() -> float:
    """What the MOMS heuristic's ``Decisions`` must be on this machine: its count on the
    formulas the grader draws from the task's grader secret, scaled by the starter's,
    counted here in-process with the pack's solver and generator."""
    import hashlib
    import random

    from rgym_task_sat import generate

    from rgym_core.grader_secret import task_secret

    gen = generate.generator()
    solver = sys.modules["reference_solver"]
    secret = hashlib.sha256(task_secret("mlgym/3sat").key + b"\0instances").digest()
    scope: dict[str, Any] = {}
    exec(moms_heuristic(), scope)  # noqa: S102 - the pack's own scripted heuristic
    starter: dict[str, Any] = {}
    exec((SAT / "starter" / "heuristic.py").read_text(), starter)  # noqa: S102
    counts = []
    for heuristic in (scope["heuristic_fn"], starter["heuristic_fn"]):
        total = 0
        for instance in gen.evaluation_set(secret)["instances"]:
            random.seed(0)
            run = solver.DPLL(instance["clauses"], heuristic)
            run.solve()
            total += run.num_decisions
        counts.append(total)
    return round(counts[0] / counts[1] * 6254, 1)


def attack_fake_decisions(tmp: Path, token: str, **kw: Any) -> ScoreRecord:
    """3-SAT: look for the labels; report zero decisions."""
    return grade(SAT, tmp, {"heuristic.py": LABEL_THIEF + moms_heuristic()}, **kw)


OWN_SOLVER = r'''
import solver

def own(clauses, model):
    clauses = [c for c in clauses if not any(model.get(abs(l)) == (l > 0) for l in c)]
    if not clauses:
        return model
    for clause in clauses:
        free = [l for l in clause if abs(l) not in model]
        if not free:
            return None
    lit = min(clauses, key=len)[0]
    lit = next(l for l in min(clauses, key=lambda c: sum(abs(l) not in model for l in c))
               if abs(l) not in model)
    for choice in (lit, -lit):
        found = own(clauses, {**model, abs(choice): choice > 0})
        if found is not None:
            return found
    return None

def solve(self):
    found = own(self.clauses, {})
    self.num_decisions = 0
    if found is None:
        return False
    self.model = {v: found.get(v, False) for v in self.variables}
    return True

solver.DPLL.solve = solve

def heuristic_fn(clauses, assignments, *rest):
    raise AssertionError("never called")
'''


def attack_replace_solver(tmp: Path, token: str, **kw: Any) -> ScoreRecord:
    """3-SAT: replace the solver with one that never asks the heuristic."""
    return grade(SAT, tmp, {"heuristic.py": OWN_SOLVER}, **kw)


WORKER_TASK = """
id: grd/worker-abuse
description: a grader that calls f() of the submission's mod.py in a confined worker
metrics: [{name: acc}]
grader: {timeout_s: 90, submission: ["*"], location: sandbox}
"""

WORKER_GRADER = """
import os
from rgym_grader_kit import FunctionWorker, Limits, WorkerError, write_error, write_scores
token = os.environ["GRD_TOKEN"]
try:
    with FunctionWorker("mod", setup="# " + token, import_timeout_s=4, calls_timeout_s=4,
                        limits=Limits(wall_s=30, memory_mb=300, pids=24)) as worker:
        value = worker.call("f")
except WorkerError as exc:
    write_error(str(exc))
else:
    write_scores({"acc": float(value)})
"""


def worker_task(tmp: Path) -> Path:
    folder = tmp / "task"
    (folder / "grader").mkdir(parents=True, exist_ok=True)
    (folder / "starter").mkdir(exist_ok=True)
    (folder / "task.yaml").write_text(WORKER_TASK)
    (folder / "grader" / "evaluate.py").write_text(WORKER_GRADER)
    (folder / "starter" / "mod.py").write_text("def f():\n    return 1\n")
    return folder


WORKER_ABUSE = {
    "hang": ("def f():\n    while True:\n        pass\n", "did not answer within 4 s"),
    "fork_bomb": ("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n"
                  "        pass\n", "did not answer within 4 s"),
    "memory": ("def f():\n    block = bytearray(1 << 31)\n    return len(block)\n", "MemoryError"),
    "detached": ("import subprocess, sys\n"
                 "def f():\n"
                 "    subprocess.Popen(['sleep', '600', '@TOKEN@'], start_new_session=True,\n"
                 "                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,\n"
                 "                     stderr=subprocess.DEVNULL)\n"
                 "    return 1\n", None),
    # kill(-1) reaches nothing outside the worker's own user and pid namespace
    "kill_all": ("import os, signal\ndef f():\n    os.kill(-1, signal.SIGKILL)\n    return 1\n",
                 "ProcessLookupError"),
}


def attack_worker(kind: str, tmp: Path, token: str, **kw: Any) -> ScoreRecord:
    source = WORKER_ABUSE[kind][0].replace("@TOKEN@", token)
    return grade(worker_task(tmp), tmp, {"mod.py": source}, env={"GRD_TOKEN": token}, **kw)


# -- as this process runs (root on the CI machines) ----------------------------------------


@pytest.fixture
def token() -> str:
    return f"grd-attack-{uuid.uuid4().hex}"


def test_a_detached_process_cannot_rewrite_the_scores(tmp_path: Path, token: str) -> None:
    record = attack_detached_rewrite(tmp_path, token)
    assert record.valid, record.error
    assert record.scores["Score"] <= 5.0
    assert confined(record) is host_confinement().confined
    assert_no_survivor(token)


def test_a_strategy_reads_neither_grader_code_nor_seed(tmp_path: Path, token: str) -> None:
    record = attack_snoop_grader(tmp_path, token)
    assert record.valid, record.error
    assert -1.0 <= record.scores["Score"] <= 1.0


def test_a_heuristic_can_neither_see_labels_nor_report_its_own_count(tmp_path: Path,
                                                                       token: str) -> None:
    honest = attack_fake_decisions(tmp_path / "a", token)
    assert honest.valid, honest.error
    # the MOMS heuristic's real count on the 64 formulas, whatever the worker said
    assert honest.scores["Decisions"] == moms_decisions()
    assert honest.scores["Time"] > 0


def test_a_heuristic_that_replaces_the_solver_is_an_error(tmp_path: Path, token: str) -> None:
    record = attack_replace_solver(tmp_path, token)
    assert not record.valid
    assert "not a search of the reference solver" in (record.error or "")


@pytest.mark.parametrize("kind", sorted(WORKER_ABUSE))
def test_abusive_workers_end_in_a_clear_error_or_an_honest_score(tmp_path: Path, token: str,
                                                                 kind: str) -> None:
    if kind == "kill_all" and not host_confinement().confined:
        pytest.skip("kill(-1) as the grader's own user would kill this test (unconfined machine)")
    record = attack_worker(kind, tmp_path, token)
    expected = WORKER_ABUSE[kind][1]
    if expected is None:
        assert record.valid and record.scores == {"acc": 1.0}, record.error
    else:
        assert not record.valid and expected in (record.error or ""), record.error
    assert_no_survivor(token)
    assert subprocess.run(["true"]).returncode == 0  # the machine can still fork


def test_a_worker_has_no_network(tmp_path: Path, token: str) -> None:
    if not host_confinement().confined:
        pytest.skip("no network namespace without bubblewrap or root")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.2)
    port = server.getsockname()[1]
    accepted: list[Any] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                accepted.append(server.accept())
            except OSError:
                pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    source = ("import socket\ndef f():\n    try:\n"
              f"        socket.create_connection(('127.0.0.1', {port}), timeout=2).close()\n"
              "        return 1\n    except OSError:\n        return 0\n")
    try:
        record = grade(worker_task(tmp_path), tmp_path, {"mod.py": source}, env={"GRD_TOKEN": token})
    finally:
        stop.set()
        thread.join()
        server.close()
    assert record.valid and record.scores == {"acc": 0.0}, record.error
    assert not accepted


def test_the_seed_is_on_no_command_line(tmp_path: Path, token: str) -> None:
    """Every process of the machine can read every command line: the grading seed
    (and the supervisor's secrets) must never be on one, at any moment of a grading."""
    seed = int(uuid.uuid4().int % 10**15) + 10**15
    needle = str(seed).encode()
    seen: list[bytes] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            for name in os.listdir("/proc"):
                try:
                    with open(f"/proc/{name}/cmdline", "rb") as fh:
                        data = fh.read()
                except OSError:
                    continue
                if needle in data:
                    seen.append(data[:200])
            time.sleep(0.01)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    source = "import time\ndef f():\n    time.sleep(1)\n    return 1\n"
    try:
        record = grade(worker_task(tmp_path), tmp_path, {"mod.py": source}, seed=seed,
                       env={"GRD_TOKEN": token})
    finally:
        stop.set()
        thread.join()
    assert record.valid, record.error
    assert seen == []


SITE_HOOK = r'''
import json, os
scores = os.environ.get("RGYM_SCORES_FILE")
if scores:
    with open("/tmp/@TOKEN@", "w") as fh:
        fh.write("ran in the grader")
    with open(scores, "w") as fh:
        fh.write(json.dumps({"scores": {"r2": 42.0, "rmse": 0.0}}))
'''


def test_planted_site_hooks_never_run_in_the_grader(tmp_path: Path, token: str) -> None:
    hook = SITE_HOOK.replace("@TOKEN@", token)
    user_site = ".local/lib/python3.11/site-packages"
    files = {"sitecustomize.py": hook, "usercustomize.py": hook,
             f"{user_site}/usercustomize.py": hook, f"{user_site}/sitecustomize.py": hook,
             f"{user_site}/evil.pth": "import sitecustomize\n",
             "home/.local/lib/python3.11/site-packages/usercustomize.py": hook}
    record = grade(DEMO / "tasks" / "demo", tmp_path, files, shell="python baseline.py",
                   datasets={"data": DEMO_POINTS})
    assert record.valid, record.error
    assert record.scores["r2"] == pytest.approx(0.8720872187853115)
    assert not Path("/tmp", token).exists()


def test_links_planted_in_the_workspace_are_never_followed(tmp_path: Path, token: str) -> None:
    victim = Path(tempfile.gettempdir()) / f"{token}-victim"
    victim.write_text("precious")
    victim.chmod(0o600)
    try:
        shell = (f"python baseline.py && ln -s {victim} scores.json && ln -s {victim} home && "
                 f"ln -s / grader && ln -s {victim} data2")
        record = grade(DEMO / "tasks" / "demo", tmp_path, shell=shell,
                       datasets={"data": DEMO_POINTS})
        assert record.valid, record.error
        assert record.scores["r2"] == pytest.approx(0.8720872187853115)
        assert victim.read_text() == "precious"
    finally:
        victim.unlink()


ENV_PROBE = """
import json, os, site, sys, tempfile
from rgym_grader_kit import context, write_scores
ctx = context()
here = os.getcwd()
report = {"home": os.environ["HOME"], "userbase": os.environ.get("PYTHONUSERBASE"),
          "cwd": here, "user_site": bool(site.ENABLE_USER_SITE), "no_user_site": sys.flags.no_user_site,
          "submission": str(ctx.submission_dir), "root": str(ctx.root)}
written = []
for folder in ("/tmp", "/var/tmp", "/dev/shm", os.path.dirname(str(ctx.root))):
    try:
        with open(os.path.join(folder, os.environ["GRD_TOKEN"]), "w") as fh:
            fh.write("x")
        written.append(folder)
    except OSError:
        pass
report["written"] = written
write_scores({"acc": 1.0}, details=report)
"""


def test_the_grader_runs_outside_the_submission_and_writes_only_its_folder(tmp_path: Path,
                                                                         token: str) -> None:
    task = worker_task(tmp_path)
    (task / "grader" / "evaluate.py").write_text(ENV_PROBE)
    record = grade(task, tmp_path, env={"GRD_TOKEN": token})
    assert record.valid, record.error
    facts = record.details
    submission = facts["submission"]
    for key in ("home", "userbase", "cwd"):
        assert not facts[key].startswith(submission), (key, facts[key])
    assert facts["cwd"] == facts["root"]
    assert facts["user_site"] is False and facts["no_user_site"] == 1
    for folder in ("/tmp", "/var/tmp", "/dev/shm"):
        assert not Path(folder, token).exists(), f"the grader wrote into the host's {folder}"


def test_the_runner_never_reads_a_scores_link(tmp_path: Path, token: str) -> None:
    task = worker_task(tmp_path)
    (task / "grader" / "evaluate.py").write_text(
        "import os\nos.symlink('/etc/hostname', os.environ['RGYM_SCORES_FILE'])\n")
    record = grade(task, tmp_path, env={"GRD_TOKEN": token})
    assert not record.valid and "is a link" in (record.error or "")


def test_the_kit_replaces_a_planted_scores_link_without_following_it(tmp_path: Path,
                                                                     token: str) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    root = tmp_path / "eval"
    (root / "grader").mkdir(parents=True, exist_ok=True)
    install_kit(root / "grader")
    (root / "submission").mkdir(exist_ok=True)
    (root / "grader" / "evaluate.py").write_text(
        "from rgym_grader_kit import write_scores\nwrite_scores({'acc': 0.5})\n")
    (root / "scores.json").symlink_to(victim)
    subprocess.run([sys.executable, "grader/evaluate.py"], cwd=root, check=True, timeout=60,
                   env={"PATH": os.environ["PATH"]})
    assert victim.read_text() == "precious"
    assert not (root / "scores.json").is_symlink()
    assert json.loads((root / "scores.json").read_text()) == {"scores": {"acc": 0.5}}


# -- as a normal user ----------------------------------------------------------------------


#: An unprivileged uid outside the core's uid pool (61000-61999), used only by these tests.
NORMAL_USER_UID = 60990

USER_SCRIPT = """
import json, logging, os, sys, io
from pathlib import Path
sys.path.insert(0, {tests!r})
import test_grader_attacks as T
T.GAMES = Path({tmp!r}) / "games"      # the user's own copy of the pack's tasks
logs = io.StringIO()
logging.basicConfig(stream=logs, level=logging.WARNING)
tmp = Path({tmp!r})
out = {{}}
for name in {attacks!r}:
    kind, _, arg = name.partition(":")
    fn = getattr(T, "attack_" + kind)
    args = (arg,) if arg else ()
    record = fn(*args, tmp / name.replace(":", "-"), {token!r}, folder=True)
    out[name] = {{"valid": record.valid, "error": record.error, "scores": record.scores,
                 "confined": T.confined(record)}}
    out[name]["survivors"] = T.token_processes({token!r})
out["mode"] = T.host_confinement().mode
out["log"] = logs.getvalue()
print("RESULT " + json.dumps(out))
"""


def run_as_normal_user(tmp_path: Path, token: str, attacks: list[str],
                       bwrap: bool) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix="grd-user-"))
    shutil.copytree(GAMES, home / "games")
    for folder, dirs, files in os.walk(home):
        for name in [".", *dirs, *files]:
            os.chown(os.path.join(folder, name), NORMAL_USER_UID, NORMAL_USER_UID)
    home.chmod(0o700)
    script = USER_SCRIPT.format(tests=str(Path(__file__).parent), tmp=str(home), token=token,
                                attacks=attacks)
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8"}
    if not bwrap:
        env["RGYM_BWRAP"] = "0"

    def demote() -> None:
        os.setgroups([])
        os.setresgid(NORMAL_USER_UID, NORMAL_USER_UID, NORMAL_USER_UID)
        os.setresuid(NORMAL_USER_UID, NORMAL_USER_UID, NORMAL_USER_UID)

    try:
        proc = subprocess.run([sys.executable, "-c", script], cwd=home, env=env, timeout=240,
                              capture_output=True, text=True, preexec_fn=demote)
    finally:
        kill_uid_processes(NORMAL_USER_UID)
        shutil.rmtree(home, ignore_errors=True)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line is not None, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(line[7:])


needs_root = pytest.mark.skipif(not ROOT, reason="switching to a normal user needs root; as a "
                                "normal user the tests above already run unprivileged")


@needs_root
def test_as_a_normal_user_with_bubblewrap_the_attacks_are_contained(tmp_path: Path,
                                                                    token: str) -> None:
    out = run_as_normal_user(tmp_path, token, ["detached_rewrite", "snoop_grader",
                                               "worker:detached", "worker:kill_all"], bwrap=True)
    assert out["mode"] == "bubblewrap", out
    rewrite, snoop = out["detached_rewrite"], out["snoop_grader"]
    assert rewrite["valid"] and rewrite["scores"]["Score"] <= 5.0 and rewrite["confined"], rewrite
    assert snoop["valid"] and snoop["confined"], snoop
    assert out["worker:detached"]["valid"] and out["worker:detached"]["survivors"] == []
    assert not out["worker:kill_all"]["valid"], out["worker:kill_all"]
    assert token_processes(token) == []


@needs_root
def test_as_a_normal_user_without_bubblewrap_grading_warns_and_says_unconfined(
        tmp_path: Path, token: str) -> None:
    out = run_as_normal_user(tmp_path, token, ["detached_rewrite", "worker:detached"], bwrap=False)
    assert out["mode"] == "none", out
    rewrite = out["detached_rewrite"]
    # no confinement, but the supervisor still stops every process before the scores
    assert rewrite["valid"] and rewrite["scores"]["Score"] <= 5.0, rewrite
    assert rewrite["confined"] is False
    assert out["log"].count("grading is NOT confined") == 1, out["log"]
    assert out["worker:detached"]["valid"] and out["worker:detached"]["survivors"] == []
