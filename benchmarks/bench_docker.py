"""Docker sandbox figures, side by side (prints them; asserts nothing).

    python benchmarks/bench_docker.py [--n 200] [--base rgym-local-base:latest]

* round trip of `echo hi` through the persistent shell (one attached exec session)
  versus a fresh exec per action (the SDK's `exec_run`, and the `docker exec` CLI);
* episode start with a built image: container created, workspace laid out
  (starter files and a dataset), shell started and the first observation returned;
* `validate` (a full grading: copy-out of the workspace, evaluation folder, grader)
  with a 3-file and a 30-file workspace, side by side, and the copy-out alone
  (`export_workspace`, one archive per copy) for both;
* the workspace's size limit as this engine enforces it (`storage`: quota or the
  tmpfs fallback): the time to hit it with `dd`, what reached the engine's disk,
  and the copy-out of a 2 GiB sparse file (time, host disk used).
Targets: the persistent shell at least 20x faster than `docker exec` (issue 7);
episode start under 1 second; validate with 30 files at most 1.5x the time with 3
(issue 11 item 16).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
import textwrap
import time
from pathlib import Path

from rgym_sandbox_docker import images, lifecycle
from rgym_sandbox_docker.sandbox import DockerSandbox

from rgym_core.grading import Grader
from rgym_core.packs import load_task
from rgym_core.sandbox import SandboxConfig, WorkspaceLayout
from rgym_core.specs import PreparedDataset

LABELS = {"rgym.bench": "docker"}


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


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


def _validate(image: str, root: Path, n_files: int, repeats: int) -> tuple[list[float], list[float]]:
    """Validate times and export-only times for a workspace of ``n_files`` files."""
    starter = root / f"starter{n_files}"
    starter.mkdir()
    for i in range(n_files):
        (starter / f"file{i:02d}.py").write_text(f"print({i})\n" * 20)
    task = load_task(_task(root / f"t{n_files}"))
    box = DockerSandbox(SandboxConfig(run_id=f"bench-validate-{n_files}", image=image,
                                      labels=LABELS))
    grades, exports = [], []
    try:
        box.start(WorkspaceLayout(starter=starter))
        grader = Grader(task, box, {}, root / f"run{n_files}")
        for step in range(repeats):
            t = time.perf_counter()
            record = grader.grade("validate", step)
            grades.append(time.perf_counter() - t)
            assert record.valid and record.scores["files"] == n_files, record
        for i in range(repeats):
            t = time.perf_counter()
            try:
                box.export_workspace(root / f"export{n_files}-{i}")
            except NotImplementedError:  # a backend from before contract 2
                break
            exports.append(time.perf_counter() - t)
    finally:
        box.cleanup()
    return grades, exports


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
    box = DockerSandbox(SandboxConfig(run_id="bench", image=image, labels=LABELS))
    try:
        box.start(WorkspaceLayout())
        for _ in range(10):
            box.run("echo hi", timeout=60)
        shell = []
        for _ in range(args.n):
            t = time.perf_counter()
            result = box.run("echo hi", timeout=60)
            shell.append(time.perf_counter() - t)
            assert result.output == "hi\n"
        sdk = []
        for _ in range(max(20, args.n // 4)):
            t = time.perf_counter()
            out = box.container.exec_run(["echo", "hi"], user="agent")
            sdk.append(time.perf_counter() - t)
            assert out.output == b"hi\n"
        cli = []
        if shutil.which("docker"):
            for _ in range(max(20, args.n // 4)):
                t = time.perf_counter()
                subprocess.run(["docker", "exec", "-u", "agent", box.container.id, "echo", "hi"],
                               check=True, capture_output=True)
                cli.append(time.perf_counter() - t)
    finally:
        box.cleanup()

    starts = []
    with tempfile.TemporaryDirectory() as tmp:
        layout = _layout(Path(tmp))
        for i in range(args.starts):
            t = time.perf_counter()
            box = DockerSandbox(SandboxConfig(run_id=f"bench-start-{i}", image=image,
                                              labels=LABELS))
            try:
                box.start(layout)
                first = box.run("ls", timeout=60)
                starts.append(time.perf_counter() - t)
                assert "train.py" not in first.output and "data" in first.output
            finally:
                box.cleanup()

    validate: dict[int, tuple[list[float], list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n_files in (3, 30):
            validate[n_files] = _validate(image, Path(tmp), n_files, args.validates)
        disk = _disk(image, Path(tmp))

    s_ms = _median_ms(shell)
    print(f"image: {image}")
    print(f"{'echo hi, persistent shell':<44} median {s_ms:8.2f} ms  (n={len(shell)})")
    print(f"{'echo hi, fresh exec (SDK exec_run)':<44} median {_median_ms(sdk):8.2f} ms  "
          f"(n={len(sdk)}, {_median_ms(sdk) / s_ms:5.0f}x slower)")
    if cli:
        print(f"{'echo hi, fresh `docker exec` (CLI)':<44} median {_median_ms(cli):8.2f} ms  "
              f"(n={len(cli)}, {_median_ms(cli) / s_ms:5.0f}x slower)")
    print(f"{'episode start (create to first observation)':<44} median "
          f"{_median_ms(starts):8.2f} ms  (n={len(starts)}, max {max(starts) * 1000:.0f} ms)")
    (g3, e3), (g30, e30) = validate[3], validate[30]
    print(f"{'validate, 3-file workspace':<44} median {_median_ms(g3):8.2f} ms  (n={len(g3)})")
    print(f"{'validate, 30-file workspace':<44} median {_median_ms(g30):8.2f} ms  (n={len(g30)}, "
          f"{_median_ms(g30) / _median_ms(g3):5.2f}x the 3-file time; target <= 1.5x)")
    if e3 and e30:
        print(f"{'export_workspace, 3 files':<44} median {_median_ms(e3):8.2f} ms  (n={len(e3)})")
        print(f"{'export_workspace, 30 files':<44} median {_median_ms(e30):8.2f} ms  "
              f"(n={len(e30)}, {_median_ms(e30) / _median_ms(e3):5.2f}x)")
    if disk:
        stopped = "stopped at the limit" if disk["stopped"] == "yes" else "was NOT stopped"
        print(f"workspace limit 256 MB (storage: {disk['storage']}): dd of 1 GiB {stopped} after "
              f"{disk['fill_s']:.2f} s; the engine's disk got {disk['engine_disk_mb']:.1f} MB")
        if "sparse_s" in disk:
            print(f"2 GiB sparse file copied out in {float(disk['sparse_s']) * 1000:.0f} ms, "
                  f"{disk['sparse_host_kb']:.0f} KiB of host disk")


if __name__ == "__main__":
    main()
