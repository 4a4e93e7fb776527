"""Experiment jobs: commands that run in the background of the sandbox.

``job_start`` starts a command as a named job (its own session, under the
episode's limits and confinement, since it is started through the sandbox like
any agent command); its output goes to ``.jobs/<name>/log`` in the workspace.
``job_list``, ``job_log``, ``job_wait`` and ``job_stop`` watch and end jobs.  The
per-action timeout does not apply to a job, only the episode's wall-clock budget:
jobs still running at submit or when a budget ends are killed with every other
process of the episode and named in the trajectory (``processes_killed``).

The tools are the namespace ``jobs`` (``--tool jobs``, or ``tools: [jobs]`` in a
task).  A task caps concurrent jobs with ``tool_config: {jobs: {max_jobs: N}}``
(default :data:`DEFAULT_MAX_JOBS`).  Everything a job's state is made of lives in
the agent's own workspace: it informs the agent and is never trusted for grading.

With the tools on, the episode's status block (``EpisodeStatus.snapshot()``, which
the react agent appends to every observation) has a ``jobs`` fact: how many run,
their memory, and which ended since the last step (:func:`jobs_status`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from rgym_core.tools import Tool, ToolArg, ToolContext, ToolError, ToolResult, ToolSchema

__all__ = ["DEFAULT_MAX_JOBS", "JOBS_DIR", "job_tools", "jobs_status"]

#: The workspace folder holding one folder per job (``pid``, ``started``, ``log``,
#: ``exit`` once it ended, ``killed`` once ``job_stop`` stopped it).
JOBS_DIR = ".jobs"
DEFAULT_MAX_JOBS = 4
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")

#: Runs in the sandbox as the agent: ``python3 -c SCRIPT ACTION JSON_ARGS``; prints JSON.
_SCRIPT = r'''
import json, os, signal, subprocess, sys, time
action, args = sys.argv[1], json.loads(sys.argv[2])
root = os.path.join(os.getcwd(), ".jobs")
TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")

def read(path, default=None):
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return default

def group_usage(pgid):
    cpu = rss = count = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        fields = data[data.rfind(b")") + 2:].split()
        if fields[0] in (b"Z", b"X") or int(fields[2]) != pgid:
            continue
        count += 1
        cpu += (int(fields[11]) + int(fields[12])) / TICK
        rss += int(fields[21]) * PAGE
    return count, cpu, rss

def gpu_memory(pgid):
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True,
                             timeout=5).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    total = 0
    for line in out.splitlines():
        pid, _, used = line.partition(",")
        try:
            if os.getpgid(int(pid)) == pgid:
                total += int(used)
        except (ValueError, OSError):
            continue
    return total

def info(name):
    d = os.path.join(root, name)
    pid = int(read(os.path.join(d, "pid"), "0") or 0)
    started = float(read(os.path.join(d, "started"), "0") or 0)
    code = read(os.path.join(d, "exit"))
    ended = os.path.getmtime(os.path.join(d, "exit")) if code is not None else None
    count, cpu, rss = group_usage(pid) if pid else (0, 0.0, 0)
    if os.path.exists(os.path.join(d, "killed")):
        state = "killed"
    elif code is not None:
        state = f"exited {code}"
    elif count:
        state = "running"
    else:
        state = "gone"
    out = {"name": name, "state": state, "command": read(os.path.join(d, "command"), ""),
           "elapsed_s": round((ended or time.time()) - started, 1) if started else None,
           "cpu_s": round(cpu, 1), "memory_mb": round(rss / 2**20, 1), "processes": count,
           "log": f".jobs/{name}/log"}
    if state == "running":
        gpu = gpu_memory(pid)
        if gpu:
            out["gpu_memory_mb"] = gpu
    return out

def names():
    try:
        return sorted(n for n in os.listdir(root) if os.path.isdir(os.path.join(root, n)))
    except OSError:
        return []

if action in ("wait", "stop") and args["name"] not in names():
    print(json.dumps({"error": f"no job called '{args['name']}'; jobs: "
                               f"{', '.join(names()) or 'none'}"}))
    sys.exit()
if action == "start":
    name, command, cap = args["name"], args["command"], args["max_jobs"]
    running = [n for n in names() if info(n)["state"] == "running"]
    if name in names():
        print(json.dumps({"error": f"a job called '{name}' exists already; choose another name"}))
        sys.exit()
    if len(running) >= cap:
        print(json.dumps({"error": f"{len(running)} jobs are running ({', '.join(running)}), "
                                   f"the most this task allows at once; wait for one or stop one"}))
        sys.exit()
    d = os.path.join(root, name)
    os.makedirs(d)
    with open(os.path.join(d, "command"), "w") as fh:
        fh.write(command)
    log = open(os.path.join(d, "log"), "wb")
    # A script named by the job's folder, so the processes of a job read as it.
    run = os.path.join(d, "run")
    with open(run, "w") as fh:
        fh.write('d=$(dirname "$0"); echo $$ > "$d/pid.tmp" && mv "$d/pid.tmp" "$d/pid"\n'
                 'bash -c "$(cat "$d/command")"\necho $? > "$d/exit"\n')
    with open(os.path.join(d, "started"), "w") as fh:
        fh.write(repr(time.time()))
    proc = subprocess.Popen(["bash", run], stdin=subprocess.DEVNULL,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    for _ in range(500):
        if os.path.exists(os.path.join(d, "pid")):
            break
        time.sleep(0.01)
    print(json.dumps(info(name)))
elif action == "list":
    print(json.dumps([info(n) for n in names()]))
elif action == "wait":
    name, deadline = args["name"], time.time() + args["timeout"]
    while info(name)["state"] == "running" and time.time() < deadline:
        time.sleep(0.2)
    print(json.dumps(info(name)))
elif action == "stop":
    name = args["name"]
    now = info(name)
    if now["state"] == "running":
        pid = int(read(os.path.join(root, name, "pid")))
        open(os.path.join(root, name, "killed"), "w").close()
        try:
            os.killpg(pid, signal.SIGTERM)
        except OSError:
            pass
        end = time.time() + 5
        while group_usage(pid)[0] and time.time() < end:
            time.sleep(0.1)
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
    print(json.dumps(info(name)))
'''


def _name(args: dict[str, Any]) -> str:
    name = str(args.get("name") or "")
    if not _NAME.fullmatch(name):
        raise ToolError(f"job name {name!r}: use letters, digits, '.', '_' or '-' "
                        "(at most 64, starting with a letter or digit)")
    return name


def _jobs(ctx: ToolContext, action: str, args: dict[str, Any], *, timeout: float = 60) -> Any:
    result = ctx.sandbox.exec(["python3", "-c", _SCRIPT, action, json.dumps(args)],
                              timeout=timeout)
    try:
        data = json.loads(result.output.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise ToolError(f"the job manager failed (exit {result.exit_code}): "
                        f"{result.output.strip()[-500:]}") from None
    if isinstance(data, dict) and data.get("error"):
        raise ToolError(str(data["error"]))
    return data


def _known(ctx: ToolContext, name: str) -> dict[str, Any]:
    jobs = {job["name"]: job for job in _jobs(ctx, "list", {})}
    if name not in jobs:
        raise ToolError(f"no job called '{name}'; jobs: {', '.join(jobs) or 'none'}")
    return jobs[name]


def _line(job: dict[str, Any]) -> str:
    parts = [f"{job['name']}: {job['state']}"]
    if job.get("elapsed_s") is not None:
        parts.append(f"{job['elapsed_s']:g} s")
    if job.get("state") == "running":
        parts.append(f"cpu {job['cpu_s']:g} s, {job['memory_mb']:g} MiB, "
                     f"{job['processes']} process(es)")
        if job.get("gpu_memory_mb"):
            parts.append(f"GPU {job['gpu_memory_mb']} MiB")
    parts.append(f"log {job['log']}")
    return " · ".join(parts) + f"  ({job['command'][:120]})"


class _JobTool(Tool):
    namespace = "jobs"
    default = False


class JobStart(_JobTool):
    """Start a command as a named background job."""

    schema = ToolSchema(
        name="job_start",
        description="Start a shell command as a named background job (e.g. a training run). "
                    "It keeps running after this step, is not cut off by the per-action "
                    "timeout, and its output goes to .jobs/<name>/log. Jobs still running at "
                    "submit or when the time budget ends are killed.",
        args=[ToolArg("name", "string", "a short name for the job, e.g. train-lr3e-4"),
              ToolArg("command", "string", "the shell command line to run")],
        text_form="rest")

    def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        cap = int(ctx.tool_config.get("max_jobs", DEFAULT_MAX_JOBS))
        job = _jobs(ctx, "start", {"name": _name(args), "command": str(args["command"]),
                                   "max_jobs": cap})
        return ToolResult(output=f"started job {_line(job)}", info={"job": job})

    def status(self, ctx: ToolContext) -> dict[str, Any]:
        return jobs_status(ctx)


def jobs_status(ctx: ToolContext) -> dict[str, Any]:
    """The status block's ``jobs`` fact: jobs running, and jobs that ended since the
    last status (``"2 running (a, b); ended since the last step: c (exited 0)"``)."""
    try:
        jobs = _jobs(ctx, "list", {}, timeout=30)
    except ToolError:
        return {}
    if not jobs:
        return {}
    reported: set[str] = ctx.state.setdefault("jobs_reported_ended", set())
    running = [job["name"] for job in jobs if job["state"] == "running"]
    ended = [job for job in jobs if job["state"] != "running" and job["name"] not in reported]
    reported.update(job["name"] for job in ended)
    text = f"{len(running)} running" + (f" ({', '.join(running)})" if running else "")
    memory = sum(float(job.get("memory_mb") or 0) for job in jobs if job["state"] == "running")
    if running:
        text += f", {memory:.0f} MiB in use"
    if ended:
        text += "; ended since the last step: " + ", ".join(
            f"{job['name']} ({job['state']})" for job in ended)
    return {"jobs": text}


class JobList(_JobTool):
    """The jobs of the episode and their state."""

    schema = ToolSchema(
        name="job_list",
        description="List the background jobs: state (running, exited with its code, killed), "
                    "elapsed time, CPU time, memory (and GPU memory) of running jobs.")

    def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        jobs = _jobs(ctx, "list", {})
        text = "\n".join(_line(job) for job in jobs) or "no jobs"
        return ToolResult(output=text, info={"jobs": jobs})


class JobLog(_JobTool):
    """Read a job's log."""

    schema = ToolSchema(
        name="job_log",
        description="Show a job's output: its last lines (default 50), or lines "
                    "start..end (1-based, inclusive) when start is given.",
        args=[ToolArg("name", "string", "the job's name"),
              ToolArg("lines", "integer", "how many last lines to show", required=False,
                      default=50),
              ToolArg("start", "integer", "first line of a range", required=False),
              ToolArg("end", "integer", "last line of a range", required=False)])

    def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        name = _name(args)
        job = _known(ctx, name)
        text = ctx.sandbox.read_file(f"{JOBS_DIR}/{name}/log").decode("utf-8", "replace")
        lines = text.splitlines()
        if args.get("start") is not None:
            start = max(1, int(args["start"]))
            end = int(args["end"]) if args.get("end") is not None else start + 99
            shown = lines[start - 1:end]
            head = f"[{name}: lines {start}-{start + len(shown) - 1} of {len(lines)}]"
        else:
            count = max(1, int(args.get("lines") or 50))
            shown = lines[-count:]
            head = f"[{name}: last {len(shown)} of {len(lines)} lines; {job['state']}]"
        return ToolResult(output="\n".join([head, *shown]), info={"job": job})


class JobWait(_JobTool):
    """Wait for a job to end, at most a timeout."""

    schema = ToolSchema(
        name="job_wait",
        description="Wait until a job ends or the timeout passes (seconds, at most the "
                    "action timeout), then show its state.",
        args=[ToolArg("name", "string", "the job's name"),
              ToolArg("timeout", "number", "seconds to wait at most", required=False,
                      default=60)])

    def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        name = _name(args)
        limit = max(1.0, float(ctx.action_timeout_s) - 5.0)
        wait = min(float(args.get("timeout") or 60), limit)
        job = _jobs(ctx, "wait", {"name": name, "timeout": wait}, timeout=wait + 30)
        still = " (still running)" if job["state"] == "running" else ""
        return ToolResult(output=_line(job) + still, info={"job": job})


class JobStop(_JobTool):
    """Stop a running job (SIGTERM to its process group, then SIGKILL)."""

    schema = ToolSchema(
        name="job_stop",
        description="Stop a running job: SIGTERM to all its processes, SIGKILL after 5 s.",
        args=[ToolArg("name", "string", "the job's name")])

    def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        name = _name(args)
        job = _jobs(ctx, "stop", {"name": name})
        return ToolResult(output=f"stopped job {_line(job)}", info={"job": job})


def job_tools() -> list[Tool]:
    """The five job tools."""
    return [JobStart(), JobList(), JobLog(), JobWait(), JobStop()]
