"""``rgym show TASK`` prints what each installed sandbox backend would enforce for the
task (``SandboxSpec.limits(task.resources, {})``), also in ``--json``."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from rgym_core.commands.catalog import limits_lines, sandbox_limits
from rgym_core.registry import load_registry
from rgym_core.testing import run_cli, run_json


def test_show_prints_the_limits_of_every_backend() -> None:
    registry = load_registry()
    task = registry.resolve("tasks", "rgym/demo").item
    expected = sandbox_limits(registry, task)
    assert "rgym/local" in expected
    assert expected["rgym/local"]["workspace"].startswith(f"{task.resources.disk_mb} MB")
    data = run_json("show", "rgym/demo")
    assert data["sandbox_limits"] == expected
    shown = run_cli("show", "rgym/demo")
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert "limits per sandbox" in out
    for name, items in expected.items():
        line = next(x for x in out.splitlines() if x.strip().startswith(f"{name}:"))
        for key in items:
            assert key in line
    if "docker/docker" in expected:  # the Docker backend's resolved limits (DKR's request)
        docker = expected["docker/docker"]
        assert {"memory", "processes", "workspace", "cpus"} <= set(docker)


def test_a_profile_s_resources_are_resolved() -> None:
    registry = load_registry()
    task = registry.resolve("tasks", "rgym/demo").item
    import attrs

    bigger = attrs.evolve(task, resources=attrs.evolve(task.resources, disk_mb=4321))
    assert sandbox_limits(registry, bigger)["rgym/local"]["workspace"].startswith("4321 MB")


def test_a_backend_without_or_with_broken_limits() -> None:
    def broken(resources: Any, options: Any) -> dict[str, str]:
        raise RuntimeError("boom")

    fake = SimpleNamespace(sandboxes={
        "a/none": SimpleNamespace(item=SimpleNamespace(limits=None)),
        "b/broken": SimpleNamespace(item=SimpleNamespace(limits=broken)),
    })
    task = SimpleNamespace(resources=None)
    limits = sandbox_limits(fake, task)  # type: ignore[arg-type]
    assert limits == {"a/none": {}, "b/broken": {"error": "RuntimeError: boom"}}
    assert limits_lines(limits) == ["limits per sandbox (no --sandbox-option):",
                                    "  a/none: not described by the backend",
                                    "  b/broken: error RuntimeError: boom"]


def test_show_lists_each_profile_s_sub_tasks() -> None:
    from rgym_core.commands.catalog import profile_lines, subtasks_text
    from rgym_core.specs import SubTask

    text = subtasks_text([SubTask(id="a", metric="m", baseline_scores={"m": 0.5}, primary=True),
                          SubTask(id="b")])
    assert text == "a (primary, m, baseline 0.5), b"
    registry = load_registry()
    tasks = [reg.item for reg in registry.tasks.values()
             if any(getattr(p, "subtasks", None) is not None for p in reg.item.profiles.values())]
    if not tasks:
        return  # no installed task declares per-profile sub-tasks
    task = tasks[0]
    lines = profile_lines(task)
    for name, profile in task.profiles.items():
        if profile.subtasks is not None:
            resolved = task.with_profile(name)
            assert f"    sub-tasks: {subtasks_text(resolved.subtasks) or 'none'}" in lines


def test_the_limits_are_those_of_the_profile_a_run_gets() -> None:
    registry = load_registry()
    tasks = [reg.item for reg in registry.tasks.values() if reg.item.profiles]
    if not tasks:
        return
    task = tasks[0]
    default = task.with_profile(None)
    data = run_json("show", task.id)
    assert data["sandbox_limits_profile"] == default.profile
    assert data["sandbox_limits"] == sandbox_limits(registry, default)
    other = [name for name in task.profile_names if name != default.profile]
    if other:
        data = run_json("show", task.id, "--profile", other[0])
        assert data["sandbox_limits_profile"] == other[0]
        assert data["sandbox_limits"] == sandbox_limits(registry, task.with_profile(other[0]))
