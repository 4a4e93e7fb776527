"""Running the agent's code from a ResearchGym grader, confined (standard library only).

The ResearchGym packs ship this file into their graders' folders (``grader.include``).
:func:`run_python` is the one place where a grader executes agent code:

* with rgym's grader kit (``rgym_grader_kit``, contract 3: a different
  unprivileged user, bubblewrap, no network, limits, the whole process tree
  killed before scores are written) it is a thin wrapper over ``run_worker``;
* without it (an older rgym core), it copies the submission to a fresh folder
  outside the evaluation folder and runs the script there with limits
  (address space, processes, CPU time, file size), a wall-clock timeout that
  kills the whole process group, a cleared environment, and, when the grader
  runs as root, as the ``nobody`` user in new network and pid namespaces
  (``unshare --net --pid --kill-child`` + ``setpriv``): it can read neither
  ``grader/`` nor ``private/``, and every process it started dies with it.  ``confined`` says whether the user switch happened.

Only the files named in ``outputs`` come back, as bytes, read without following
links and up to ``max_output_bytes``; never unpickle them.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NOBODY = 65534


@dataclass
class Outcome:
    """What a confined run left: its exit code, output tail and the requested files."""

    exit_code: int
    timed_out: bool
    output_tail: str
    files: dict[str, bytes] = field(default_factory=dict)
    confined: bool = False

    def failure(self, what: str) -> str | None:
        """A message for the agent when the run failed, else ``None``."""
        if self.timed_out:
            return f"{what} ran past its time limit and was stopped"
        if self.exit_code != 0:
            tail = "\n".join(self.output_tail.strip().splitlines()[-20:])
            return f"{what} failed (exit code {self.exit_code}):\n{tail}"
        return None


def _kit() -> Any:
    try:
        import rgym_grader_kit
    except ImportError:
        return None
    return rgym_grader_kit


def run_python(submission: Path, script: str, files: dict[str, Path | bytes], outputs: list[str], *,
               wall_s: float = 600.0, memory_mb: int = 8192, pids: int = 256,
               max_output_bytes: int = 512 << 20, with_submission: bool = True) -> Outcome:
    """Run ``python <script>`` (``script`` is one of ``files``) in a copy of ``submission``
    with ``files`` placed on top; return ``outputs``.

    ``with_submission=False`` starts from an empty folder holding only ``files``: for
    graders that run their own code on agent-made *data* (a vocabulary, a checkpoint),
    so that no module the agent wrote can shadow an import."""
    kit = _kit()
    if kit is not None and hasattr(kit, "run_worker"):
        limits = kit.Limits(wall_s=wall_s, memory_mb=memory_mb, pids=pids)
        try:
            res = kit.run_worker(["python", script], files=files, outputs=outputs, limits=limits,
                                 max_output_bytes=max_output_bytes, name="your code",
                                 with_submission=with_submission)
        except kit.WorkerError as exc:
            return Outcome(exit_code=1, timed_out=isinstance(exc, kit.WorkerTimeout),
                           output_tail=str(exc))
        tail = (res.stdout.decode("utf-8", "replace")[-4000:] + "\n" + (res.stderr_tail or ""))
        return Outcome(exit_code=-9 if res.exit_code is None else res.exit_code,
                       timed_out=res.timed_out, output_tail=tail, files=dict(res.files),
                       confined=bool(kit.context().confined))
    return _fallback(submission, script, files, outputs, wall_s=wall_s, memory_mb=memory_mb,
                     pids=pids, max_output_bytes=max_output_bytes, with_submission=with_submission)


def write_result(payload: dict) -> None:
    """Write the grader's result: through the kit (which stops every worker first) when
    present, else to ``RGYM_SCORES_FILE``.  ``payload`` is ``{"scores", "subtasks",
    "details"}`` or ``{"error", "missing_submission"}``."""
    kit = _kit()
    if kit is not None and hasattr(kit, "write_scores"):
        if "error" in payload:
            kit.write_error(str(payload["error"]),
                            missing_submission=bool(payload.get("missing_submission")))
        else:
            kit.write_scores(payload["scores"], details=payload.get("details"),
                             subtasks=payload.get("subtasks"))
        return
    import json

    Path(os.environ["RGYM_SCORES_FILE"]).write_text(json.dumps(payload))


def _copy_submission(src: Path, dest: Path) -> None:
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        target = dest / rel
        if path.is_symlink():
            continue
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif path.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)


def _limits(memory_mb: int, pids: int, cpu_s: int) -> None:
    os.setsid()
    resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
    resource.setrlimit(resource.RLIMIT_FSIZE, (2 << 30, 2 << 30))
    if os.geteuid() == 0:  # RLIMIT_NPROC counts per real uid: only meaningful for nobody
        resource.setrlimit(resource.RLIMIT_NPROC, (pids, pids))


def _read_output(folder: Path, name: str, limit: int) -> bytes | None:
    path = folder / name
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read(limit + 1)[:limit]
    finally:
        os.close(fd)


def _fallback(submission: Path, script: str, files: dict[str, Path | bytes], outputs: list[str], *,
              wall_s: float, memory_mb: int, pids: int, max_output_bytes: int,
              with_submission: bool = True) -> Outcome:
    root = os.geteuid() == 0
    work = Path(tempfile.mkdtemp(prefix="rgym-worker-"))
    try:
        if with_submission:
            _copy_submission(submission, work)
        for name, content in files.items():
            target = work / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                target.write_bytes(content)
            else:
                shutil.copyfile(content, target)
        argv = [sys.executable, "-s", script]
        confined = False
        if root and shutil.which("unshare") and shutil.which("setpriv"):
            for path in [work, *work.rglob("*")]:
                os.lchown(path, NOBODY, NOBODY)
            argv = ["unshare", "--net", "--pid", "--fork", "--kill-child", "--", "setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}",
                    "--clear-groups", "--", *argv]
            confined = True
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(work), "LANG": "C.UTF-8",
               "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1",
               "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
               "MPLCONFIGDIR": str(work / ".mpl")}
        env["PYTHONPATH"] = str(work)
        proc = subprocess.Popen(argv, cwd=work, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                preexec_fn=lambda: _limits(memory_mb, pids, int(wall_s) + 5))
        timed_out = False
        try:
            out, _ = proc.communicate(timeout=wall_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc.pid)
            out, _ = proc.communicate()
        _kill_group(proc.pid)  # anything it left behind in its session
        got = {}
        for name in outputs:
            data = _read_output(work, name, max_output_bytes)
            if data is not None:
                got[name] = data
        text = out.decode("utf-8", "replace")
        return Outcome(exit_code=124 if timed_out else proc.returncode, timed_out=timed_out,
                       output_tail=text[-8000:], files=got, confined=confined)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
