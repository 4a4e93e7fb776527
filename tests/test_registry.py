"""Plugin discovery: namespacing, duplicates, failures, filters, short names."""

from __future__ import annotations

import warnings

import pytest

from rgym_core import AgentSpec, hookimpl
from rgym_core.registry import RegistryError, load_registry
from rgym_core.scripted import ScriptedAgent


class AgentPlugin:
    def __init__(self, *names: str) -> None:
        self.names = names

    @hookimpl
    def rgym_register_agents(self):  # type: ignore[no-untyped-def]
        return [AgentSpec(name=n, factory=ScriptedAgent) for n in self.names]


class RaisingPlugin:
    @hookimpl
    def rgym_register_tasks(self):  # type: ignore[no-untyped-def]
        raise RuntimeError("boom")


def test_builtins_register_through_hooks() -> None:
    reg = load_registry(only=["builtin"])
    assert "rgym/demo" in reg.tasks
    assert reg.tasks["rgym/demo"].distribution == "rgym-core"
    assert reg.resolve("sandboxes", "local").name == "rgym/local"
    assert reg.resolve("agents", "scripted").name == "rgym/scripted"
    assert {"rgym/bash", "rgym/validate", "rgym/submit"} <= set(reg.tools)


def test_same_name_from_two_distributions_is_an_error_naming_both() -> None:
    with pytest.raises(RegistryError) as info:
        load_registry(only=["builtin"], extra_plugins=[("dist-one", AgentPlugin("x/agent")),
                                                       ("dist-two", AgentPlugin("x/agent"))])
    assert "'x/agent'" in str(info.value)
    assert "dist-one" in str(info.value) and "dist-two" in str(info.value)


def test_unnamespaced_names_are_skipped_with_a_warning() -> None:
    with pytest.warns(UserWarning, match="not namespaced"):
        reg = load_registry(only=["builtin"], extra_plugins=[("d", AgentPlugin("plain"))])
    assert "plain" not in reg.agents


def test_failing_registration_warns_and_rest_works() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reg = load_registry(only=["builtin"], extra_plugins=[("bad-dist", RaisingPlugin())])
    assert any("bad-dist" in str(w.message) and "boom" in str(w.message) for w in caught)
    assert "rgym/demo" in reg.tasks


def test_short_names_resolve_only_when_unambiguous() -> None:
    reg = load_registry(only=["builtin"], extra_plugins=[("d", AgentPlugin("a/solo", "a/twin", "b/twin"))])
    assert reg.resolve("agents", "solo").name == "a/solo"
    with pytest.raises(RegistryError, match="ambiguous"):
        reg.resolve("agents", "twin")
    with pytest.raises(RegistryError, match="unknown agent 'nope'"):
        reg.resolve("agents", "nope")


def test_env_var_restricts_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RGYM_PLUGINS", "builtin")
    reg = load_registry()
    assert all(p.name == "builtin" for p in reg.plugins if p.loaded)
    monkeypatch.delenv("RGYM_PLUGINS")
    monkeypatch.setenv("RGYM_DISABLE_PLUGINS", "builtin")
    reg = load_registry()  # the built-in plugin cannot be disabled
    assert "rgym/demo" in reg.tasks


# --------------------------------------------------------------------------- through pluggy


class SubsetPlugin:
    """Implementations that use pluggy's documented contract."""

    def __init__(self) -> None:
        self.steps: list[str] = []

    @hookimpl
    def rgym_step(self, step):  # type: ignore[no-untyped-def]
        self.steps.append(step)

    @hookimpl(wrapper=True)
    def rgym_register_agents(self):  # type: ignore[no-untyped-def]
        answers = yield
        return [*answers, [AgentSpec(name="wrap/added", factory=ScriptedAgent)]]


class BrokenObserver:
    @hookimpl(tryfirst=True)
    def rgym_step(self, episode, step):  # type: ignore[no-untyped-def]
        raise RuntimeError("observer bug")


def test_hooks_are_called_through_pluggy_with_isolation() -> None:
    subset = SubsetPlugin()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reg = load_registry(only=["builtin"], extra_plugins=[("subset-dist", subset),
                                                             ("broken-dist", BrokenObserver())])
        # A wrapper sees every plugin's answers and may add its own (credited to its plugin).
        assert reg.agents["wrap/added"].distribution == "subset-dist"
        assert reg.agents["rgym/scripted"].distribution == "rgym-core"
        failures: list[object] = []
        reg.call_hook("rgym_step", episode="EPISODE", step="STEP", on_failure=failures.append)
    # The subset implementation got only `step`; the broken one did not stop it.
    assert subset.steps == ["STEP"]
    assert len(failures) == 1 and "observer bug" in failures[0].error  # type: ignore[attr-defined]
    assert failures[0].distribution == "broken-dist"  # type: ignore[attr-defined]
    assert not [w for w in caught if "observer bug" in str(w.message)]  # reported through on_failure
    reg.call_hook("rgym_step", episode="E", step="S2")  # default: one warning naming the distribution
    assert subset.steps == ["STEP", "S2"]
    assert any("broken-dist" in w for w in reg.warnings)


def test_pip_installed_plugin_with_argument_subsets_and_wrappers(tmp_path_factory: pytest.TempPathFactory
                                                                 ) -> None:
    """A plugin installed with pip: a wrapper around everyone's tasks, a broken hook (one
    warning naming its distribution, everything else works), lifecycle hooks naming a
    subset of the arguments, ``tryfirst`` and a wrapper, seen in a real episode."""
    from pathlib import Path

    from rgym_core.testing.venvs import ChildEnv

    repo = Path(__file__).resolve().parents[1]
    root = tmp_path_factory.mktemp("observer")
    source = root / "observer_plugin"
    import shutil

    shutil.copytree(repo / "tests" / "observer_plugin", source)
    with ChildEnv.temporary() as env:  # an episode runs in it: not under pytest's private /tmp
        env.pip("install", "--no-deps", "--no-build-isolation", "--no-index", str(source))
        _observe(env, root)


def _observe(env: object, root: object) -> None:
    import json
    from pathlib import Path

    from rgym_core.testing import run_cli

    python = env.python  # type: ignore[attr-defined]
    root = Path(str(root))
    listed = run_cli("--plugins", "observer", "list", "tasks", "--json", python=python, cwd=root)
    assert listed.returncode == 0, listed.stderr
    rows = {r["name"]: r for r in json.loads(listed.stdout)}
    assert rows["rgym/demo"]["distribution"] == "rgym-core"  # still credited to the core
    shown = run_cli("--plugins", "observer", "show", "rgym/demo", "--json", python=python, cwd=root)
    assert "observed" in json.loads(shown.stdout)["tags"]
    log = root / "observer.jsonl"
    run = run_cli("--plugins", "observer", "run", "rgym/demo", "--runs-dir", str(root / "runs"), "--quiet",
                  python=python, cwd=root, env={"RGYM_OBSERVER_LOG": str(log)})
    assert run.returncode == 0, run.stdout + run.stderr
    broken = [line for line in run.stderr.splitlines() if "broken on purpose" in line]
    assert len(broken) == 1 and "rgym-observer-example" in broken[0], run.stderr
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert events[0] == {"event": "start", "task": "rgym/demo"}
    tools = [e["tool"] for e in events if e["event"] == "step"]
    assert tools and tools[-1] == "submit"
    assert [e["event"] for e in events[-2:]] == ["end-before", "end-after"]


# --------------------------------------------------------------------------- the core knows no pack


def test_core_code_names_no_pack() -> None:
    """No pack's distribution or package name appears in rgym_core's code (docstrings and
    comments may use them as examples): hints come from what packs declare."""
    import ast
    import tomllib
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    names: set[str] = set()
    for pyproject in [*repo.glob("plugins/*/pyproject.toml"), *repo.glob("agents/*/pyproject.toml"),
                      *repo.glob("task-packs/*/pyproject.toml")]:
        project = tomllib.loads(pyproject.read_text()).get("project", {})
        names.add(project["name"])
        names.update(str(m).split(".")[0] for m in project.get("entry-points", {}).get("rgym", {}).values())
    assert "rgym-llm" in names and "rgym_tools_pdf" in names
    found = []
    for source in (repo / "rgym_core").rglob("*.py"):
        tree = ast.parse(source.read_text())
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                      and node.body and isinstance(node.body[0], ast.Expr)
                      and isinstance(node.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                found += [f"{source.relative_to(repo)}:{node.lineno}: {n}" for n in names if n in node.value]
            if isinstance(node, ast.Import | ast.ImportFrom):
                modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                found += [f"{source.relative_to(repo)}:{node.lineno}: imports {m}" for m in modules
                          if m.split(".")[0] in names]
    assert not found, "rgym_core names packs:\n" + "\n".join(found)


def test_install_hints_come_from_declarations(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pack folder (not installed) that declares what it provides is named, with the folder to
    install, for its tasks, its tool namespace and its CLI commands."""
    from pathlib import Path

    from rgym_core.testing import run_cli

    folder = Path(str(tmp_path)) / "packs" / "frob"
    folder.mkdir(parents=True)
    (folder / "pyproject.toml").write_text(
        '[project]\nname = "rgym-frob"\nversion = "1"\n'
        '[project.entry-points.rgym]\nfrob = "rgym_frob.plugin"\n'
        '[project.entry-points."rgym.provides"]\n'
        '"frob/big-task" = "rgym_frob.plugin"\n"frob/frob_tool" = "rgym_frob.plugin"\n'
        '"rgym frobnicate" = "rgym_frob.plugin"\n')
    env = {"RGYM_PACK_PATH": str(folder.parent)}
    task = run_cli("show", "big-task", env=env)
    assert task.returncode == 2 and "it comes with the rgym-frob pack: pip install" in task.stderr
    assert str(folder) in task.stderr
    tool = run_cli("run", "rgym/demo", "--tool", "frob", "--runs-dir", str(Path(str(tmp_path)) / "r"), env=env)
    assert tool.returncode == 2 and "rgym-frob" in tool.stderr
    command = run_cli("frobnicate", env=env)
    assert command.returncode == 2 and "no command 'frobnicate'; it comes with the rgym-frob pack" in \
        command.stderr
    plain = run_cli("frobnicate")
    assert plain.returncode == 2 and "rgym-frob" not in plain.stderr
