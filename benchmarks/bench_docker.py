"""Docker sandbox figures, side by side (prints them; asserts nothing).

Every timed figure comes from rounds in which each method runs once, in an order
shuffled per round, and is printed as median (IQR, min, max) with the ratios taken
round by round; the floor is plain ``docker run -i`` of the same command.

    python benchmarks/bench_docker.py [--n 200] [--base rgym-local-base:latest]

* round trip of `echo hi` through the persistent shell (one attached exec session)
  versus a fresh exec per action (the SDK's `exec_run`, and the `docker exec` CLI),
  and the floor: the same line through the pipes of one `docker run -i IMAGE sh`;
* episode start with a built image: container created, workspace laid out
  (starter files and a dataset), shell started and the first observation returned,
  against `docker run -i IMAGE sh` up to its first answer (the floor);
* `validate` (a full grading: copy-out of the workspace, evaluation folder, grader)
  with a 3-file and a 30-file workspace, side by side, and the copy-out alone
  (`export_workspace`, one archive per copy) for both;
* the workspace's size limit as this engine enforces it (`storage`: quota or the
  tmpfs fallback): the time to hit it with `dd`, what reached the engine's disk,
  and the copy-out of a 2 GiB sparse file (time, host disk used).
Targets: the persistent shell at least 20x faster than `docker exec` (issue 7);
episode start under 1 second, and within 1.15x of the floor (issue 27); validate
with 30 files at most 1.5x the time with 3 (issue 11 item 16).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import textwrap
import time
from pathlib import Path

from _paired import load, ratios, rounds, show, spread
from rgym_sandbox_docker import images, lifecycle
from rgym_sandbox_docker.sandbox import DockerSandbox

from rgym_core.grading import Grader
from rgym_core.packs import load_task
from rgym_core.sandbox import SandboxConfig, WorkspaceLayout
from rgym_core.specs import PreparedDataset

LABELS = {"rgym.bench": "docker"}


def _layout(root: Path) -> WorkspaceLayout:
    starter = root / "starter"
    starter.mkdir()
    for i in range(20):
        (starter / f"file{i}.py").write_text(f"print({i})\n" * 50)
    public = root / "public"
    public.mkdir()
    (public / "train.csv").write_text("x,y\n" + "".join(f"{i},{2 * i}\n" for i in range(20000)))
    return WorkspaceLayout(starter=starter, datasets={"data": PreparedDataset("b/d", public)})


def _task(root: Path) -> Path:
    """A host-graded task whose grader counts the submitted files."""
    task = root / "task"
    (task / "grader").mkdir(parents=True)
    (task / "starter").mkdir()
    (task / "grader" / "evaluate.py").write_text(textwrap.dedent("""\
        import json, os
        sub = os.environ["RGYM_SUBMISSION_DIR"]
        n = sum(len(files) for _, _, files in os.walk(sub))
        json.dump({"scores": {"files": float(n)}}, open(os.environ["RGYM_SCORES_FILE"], "w"))
        """))
    (task / "task.yaml").write_text(textwrap.dedent("""\
        id: bench/files
        description: count files
        metrics: [{name: files, direction: maximize}]
        grader: {entry: evaluate.py, timeout_s: 60, submission: ["*", "**/*"]}
        """))
    return task


def _validate(image: str, root: Path, sizes: tuple[int, ...], repeats: int) -> dict[str, list[float]]:
    """Validate and export-only times for workspaces of each of ``sizes`` files, the
    sandboxes started side by side and their gradings (then exports) run in rounds of a
    shuffled order: ``{"grade 3": [...], "export 3": [...], ...}``."""
    boxes, graders = {}, {}
    try:
        for n_files in sizes:
            starter = root / f"starter{n_files}"
            starter.mkdir()
            for i in range(n_files):
                (starter / f"file{i:02d}.py").write_text(f"print({i})\n" * 20)
            task = load_task(_task(root / f"t{n_files}"))
            box = DockerSandbox(SandboxConfig(run_id=f"bench-validate-{n_files}", image=image,
                                              labels=LABELS))
            boxes[n_files] = box
            box.start(WorkspaceLayout(starter=starter))
            graders[n_files] = Grader(task, box, {}, root / f"run{n_files}")
        steps = iter(range(10**6))

        def grade(n_files: int) -> float:
            t = time.perf_counter()
            record = graders[n_files].grade("validate", next(steps))
            took = time.perf_counter() - t
            assert record.valid and record.scores["files"] == n_files, record
            return took

        def export(n_files: int) -> float:
            t = time.perf_counter()
            boxes[n_files].export_workspace(root / f"export{n_files}-{next(steps)}")
            return time.perf_counter() - t

        out = {f"grade {n}": v for n, v in
               zip(sizes, rounds({n: (lambda n=n: grade(n)) for n in sizes}, repeats).values(), strict=True)}
        try:
            exports = rounds({n: (lambda n=n: export(n)) for n in sizes}, repeats)
        except NotImplementedError:  # a backend from before contract 2
            return out
        out.update({f"export {n}": v for n, v in zip(sizes, exports.values(), strict=True)})
        return out
    finally:
        for box in boxes.values():
            box.cleanup()


class RunPipe:
    """The floor of a persistent shell: one ``docker run -i IMAGE sh`` and its pipes."""

    def __init__(self, image: str) -> None:
        self.proc = subprocess.Popen(["docker", "run", "-i", "--rm", "--label", "rgym.bench=docker",
                                      image, "sh"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, bufsize=1)

    def ask(self, command: str) -> str:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline()

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def _run_start(image: str) -> float:
    """Seconds from ``docker run -i`` to the first answer of its shell (the floor of an
    episode start); the container's removal is not counted."""
    t = time.perf_counter()
    pipe = RunPipe(image)
    try:
        line = pipe.ask("ls / >/dev/null && echo ready")
        took = time.perf_counter() - t
        assert line == "ready\n", line
        return took
    finally:
        pipe.close()


def _disk(image: str, root: Path) -> dict[str, float | str]:
    """The workspace limit at work: fill it, then copy out a 2 GiB sparse file."""
    box = DockerSandbox(SandboxConfig(run_id="bench-disk", image=image, labels=LABELS,
                                      options={"disk_mb": 256}))
    try:
        box.start(WorkspaceLayout())
        t = time.perf_counter()
        full = box.run("dd if=/dev/zero of=fill bs=1M count=1024 2>&1", timeout=300)
        fill_s = time.perf_counter() - t
        (row,) = box.client.api.containers(all=True, size=True, filters={"id": box.container.id})
        box.run("rm -f fill && truncate -s 2G sparse.bin && echo x > small.txt", timeout=60)
        out: dict[str, float | str] = {
            "storage": str(getattr(box, "storage", None) or "none"), "fill_s": fill_s,
            "stopped": "yes" if "No space left" in full.output else "no",
            "engine_disk_mb": (row.get("SizeRw") or 0) / 2**20}
        t = time.perf_counter()
        try:
            report = box.export_workspace(root / "sparse-out", quota_bytes=3 << 30)
        except NotImplementedError:
            return out
        out.update(sparse_s=time.perf_counter() - t, sparse_host_kb=report.disk_bytes / 1024)
        return out
    finally:
        box.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="round trips per method")
    parser.add_argument("--starts", type=int, default=10, help="episode starts to time")
    parser.add_argument("--validates", type=int, default=5, help="validates per workspace size")
    parser.add_argument("--base", default=None, help="base image (default $RGYM_DOCKER_BASE)")
    args = parser.parse_args()

    client = lifecycle.docker_client()
    image = images.task_image(client, [], base=args.base)
    print(f"load average: {load()}; image: {image}; methods in rounds of a shuffled order; "
          f"median (IQR, min, max) of each figure and of the ratios taken round by round")
    box = DockerSandbox(SandboxConfig(run_id="bench", image=image, labels=LABELS))
    pipe = RunPipe(image)
    try:
        box.start(WorkspaceLayout())
        for _ in range(10):
            box.run("echo hi", timeout=60)
            pipe.ask("echo hi")

        def timed(fn):  # type: ignore[no-untyped-def]
            def once() -> float:
                t = time.perf_counter()
                fn()
                return time.perf_counter() - t
            return once

        def shell() -> None:
            assert box.run("echo hi", timeout=60).output == "hi\n"

        def sdk() -> None:
            assert box.container.exec_run(["echo", "hi"], user="agent").output == b"hi\n"

        def floor() -> None:
            assert pipe.ask("echo hi") == "hi\n"

        methods = {"shell": timed(shell), "sdk": timed(sdk), "floor": timed(floor)}
        if shutil.which("docker"):
            methods["cli"] = timed(lambda: subprocess.run(
                ["docker", "exec", "-u", "agent", box.container.id, "echo", "hi"], check=True,
                capture_output=True))
        trips = rounds(methods, max(20, args.n // 4))
    finally:
        box.cleanup()
        pipe.close()

    with tempfile.TemporaryDirectory() as tmp:
        layout = _layout(Path(tmp))
        count = iter(range(10**6))

        def start() -> float:
            t = time.perf_counter()
            box = DockerSandbox(SandboxConfig(run_id=f"bench-start-{next(count)}", image=image,
                                              labels=LABELS))
            try:
                box.start(layout)
                first = box.run("ls", timeout=60)
                took = time.perf_counter() - t
                assert "train.py" not in first.output and "data" in first.output
                return took
            finally:
                box.cleanup()

        starts = rounds({"start": start, "floor": lambda: _run_start(image)}, args.starts)

    with tempfile.TemporaryDirectory() as tmp:
        validate = _validate(image, Path(tmp), (3, 30), args.validates)
        disk = _disk(image, Path(tmp))

    ms = {"unit": " ms", "digits": 2, "scale": 1000.0}
    print(f"{'echo hi, persistent shell':<44} {show(trips['shell'], **ms)}")
    print(f"{'echo hi, `docker run -i` pipe (floor)':<44} {show(trips['floor'], **ms)}")
    print(f"{'':<4}persistent shell / floor, paired: {show(ratios(trips['shell'], trips['floor']))}")
    print(f"{'echo hi, fresh exec (SDK exec_run)':<44} {show(trips['sdk'], **ms)}")
    print(f"{'':<4}SDK exec_run / persistent shell, paired: {show(ratios(trips['sdk'], trips['shell']), 'x', 1)}")
    if "cli" in trips:
        cli_x = ratios(trips["cli"], trips["shell"])
        print(f"{'echo hi, fresh `docker exec` (CLI)':<44} {show(trips['cli'], **ms)}")
        print(f"{'':<4}docker exec / persistent shell, paired: {show(cli_x, 'x', 1)} (target >= 20x: "
              f"{'met' if spread(cli_x)['median'] >= 20 else 'NOT met'})")
    start_x = ratios(starts["start"], starts["floor"])
    print(f"{'episode start (create to first observation)':<44} {show(starts['start'], **ms)} (target "
          f"< 1 s: {'met' if spread(starts['start'])['median'] < 1 else 'NOT met'})")
    print(f"{'`docker run -i` to first answer (floor)':<44} {show(starts['floor'], **ms)}")
    print(f"{'':<4}episode start / floor, paired: {show(start_x)} (issue 27 target <= 1.15x: "
          f"{'met' if spread(start_x)['median'] <= 1.15 else 'NOT met'})")
    g3, g30 = validate["grade 3"], validate["grade 30"]
    g_x = ratios(g30, g3)
    print(f"{'validate, 3-file workspace':<44} {show(g3, **ms)}")
    print(f"{'validate, 30-file workspace':<44} {show(g30, **ms)}")
    print(f"{'':<4}30 files / 3 files, paired: {show(g_x)} (target <= 1.5x: "
          f"{'met' if spread(g_x)['median'] <= 1.5 else 'NOT met'})")
    if "export 3" in validate:
        e3, e30 = validate["export 3"], validate["export 30"]
        print(f"{'export_workspace, 3 files':<44} {show(e3, **ms)}")
        print(f"{'export_workspace, 30 files':<44} {show(e30, **ms)}")
        print(f"{'':<4}30 files / 3 files, paired: {show(ratios(e30, e3))}")
    if disk:
        stopped = "stopped at the limit" if disk["stopped"] == "yes" else "was NOT stopped"
        print(f"workspace limit 256 MB (storage: {disk['storage']}): dd of 1 GiB {stopped} after "
              f"{disk['fill_s']:.2f} s; the engine's disk got {disk['engine_disk_mb']:.1f} MB (one shot)")
        if "sparse_s" in disk:
            print(f"2 GiB sparse file copied out in {float(disk['sparse_s']) * 1000:.0f} ms, "
                  f"{disk['sparse_host_kb']:.0f} KiB of host disk (one shot)")


if __name__ == "__main__":
    main()
