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
