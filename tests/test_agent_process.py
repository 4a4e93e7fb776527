"""``--agent-isolation process`` pieces: the pipe protocol's framing and limits, what
the agent process sees, the model gateway's rules, the modes, and the fallback
without bubblewrap.  The attacks themselves are in ``tests/security/test_agent_isolation.py``;
the react and baseline agents run end to end in their packs' tests."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rgym_core.agent_process import ISOLATION_MODES, isolated_agent
from rgym_core.agent_process.host import AgentProcessError, ModelGateway, ProcessAgent
from rgym_core.agent_process.protocol import (
    Channel,
    ChannelClosed,
    ChannelTimeout,
    ProtocolError,
    decode,
    encode,
)
from rgym_core.agents import AgentConfig, EpisodeStatus, TaskContext
from rgym_core.isolation import agent_confinement, warn
from rgym_core.records import Observation, Usage
from rgym_core.registry import load_registry
from rgym_core.runner import RunConfig, RunError, preflight
from rgym_core.specs import Budget
from rgym_core.testing import run_cli
from rgym_core.tools import ToolSchema

ROOT = os.geteuid() == 0


@pytest.fixture(scope="module")
def registry():  # type: ignore[no-untyped-def]
    return load_registry()


@pytest.fixture
def pipes() -> Iterator[tuple[Channel, int, int]]:
    """A channel reading what the test writes to ``w`` and writing to ``r``'s pipe."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    channel = Channel(in_r, out_w, max_bytes=4096)
    try:
        yield channel, in_w, out_r
    finally:
        channel.close()
        for fd in (in_w, out_r):
            try:
                os.close(fd)
            except OSError:
                pass


# -- framing ----------------------------------------------------------------------------------


def test_messages_round_trip_split_across_reads_and_blank_lines_are_skipped(pipes) -> None:  # type: ignore[no-untyped-def]
    channel, writer, _ = pipes
    data = encode({"type": "action", "text": "line one\nline two"}) + b"\n" + encode({"type": "x"})
    os.write(writer, data[:7])
    os.write(writer, data[7:])
    assert channel.receive(deadline=time.monotonic() + 5) == {"type": "action", "text": "line one\nline two"}
    assert channel.receive(deadline=time.monotonic() + 5) == {"type": "x"}


@pytest.mark.parametrize("line,error", [(b"not json\n", "not a protocol message"),
                                        (b"[1, 2]\n", "without a 'type'"),
                                        (b'{"type": 3}\n', "without a 'type'"),
                                        (b"\xff\xfe\n", "not a protocol message")])
def test_garbage_is_a_protocol_error(pipes, line: bytes, error: str) -> None:  # type: ignore[no-untyped-def]
    channel, writer, _ = pipes
    os.write(writer, line)
    with pytest.raises(ProtocolError, match=error):
        channel.receive(deadline=time.monotonic() + 5)


def test_a_message_over_the_limit_is_refused_without_buffering_it_all(pipes) -> None:  # type: ignore[no-untyped-def]
    channel, writer, _ = pipes
    os.write(writer, b"{" + b"x" * 6000)  # no newline: the limit (4096) trips anyway
    with pytest.raises(ProtocolError, match="over the 0 MiB limit"):
        channel.receive(deadline=time.monotonic() + 5)
    assert len(channel._buffer) < 4096 + (1 << 20)


def test_silence_times_out_and_eof_mid_message_is_a_closed_channel(pipes) -> None:  # type: ignore[no-untyped-def]
    channel, writer, _ = pipes
    started = time.monotonic()
    with pytest.raises(ChannelTimeout):
        channel.receive(deadline=time.monotonic() + 0.2)
    assert time.monotonic() - started < 2
    os.write(writer, b'{"type": "act')
    os.close(writer)
    with pytest.raises(ChannelClosed, match="in the middle of a message"):
        channel.receive(deadline=time.monotonic() + 5)


def test_a_reader_that_never_reads_cannot_block_the_runner(pipes) -> None:  # type: ignore[no-untyped-def]
    channel, _, _ = pipes
    with pytest.raises(ChannelTimeout, match="stopped reading"):
        channel.send({"type": "act", "observation": "x" * (1 << 20)}, deadline=time.monotonic() + 0.3)


def test_a_closed_reader_is_a_closed_channel(pipes) -> None:  # type: ignore[no-untyped-def]
    channel, _, reader = pipes
    os.close(reader)
    with pytest.raises(ChannelClosed):
        channel.send({"type": "act"}, deadline=time.monotonic() + 5)


def test_decode_encode_are_json_lines() -> None:
    assert encode({"type": "a", "t": "é\n"}).count(b"\n") == 1
    assert decode(encode({"type": "a", "t": "é\n"})) == {"type": "a", "t": "é\n"}


# -- what the agent process sees ---------------------------------------------------------------


def test_task_folders_datasets_and_task_packs_are_hidden_from_the_agent(registry) -> None:  # type: ignore[no-untyped-def]
    view = agent_confinement.plan_view(registry, "rgym-agent-baseline")
    demo = registry.task("rgym/demo")
    hidden = view.hidden
    assert os.path.realpath(demo.root) in hidden
    dataset = registry.dataset("rgym/demo-points")
    assert any(os.path.realpath(dataset.root) == h or os.path.realpath(dataset.root).startswith(h + "/")
               for h in hidden)
    core = agent_confinement.distribution_locations("rgym-core")
    agent = agent_confinement.distribution_locations("rgym-agent-baseline")
    visible = [*view.bound, *agent_confinement.interpreter_paths(), "/usr"]
    for place in [*core, *agent]:
        assert any(place == v or place.startswith(v.rstrip("/") + "/") for v in visible), place
    for reg in registry.tasks.values():
        if reg.distribution in ("rgym-core", "rgym-agent-baseline"):
            continue
        for place in agent_confinement.distribution_locations(reg.distribution):
            shown = [b for b in view.bound if place == b or place.startswith(b + "/")]
            masked = [h for h in hidden if place == h or place.startswith(h + "/")]
            assert not shown or masked, f"{reg.distribution}: {place} is visible to the agent"


def test_the_modes_and_the_machine_s_confinement(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ISOLATION_MODES == ("none", "process")
    monkeypatch.setattr(agent_confinement, "bwrap_problem", lambda: "bubblewrap (bwrap) is not installed")
    monkeypatch.setattr(agent_confinement.os, "geteuid", lambda: 0)
    root = agent_confinement.confinement()
    assert root.mode == "uid" and "can read every world-readable file" in root.warnings[0]
    monkeypatch.setattr(agent_confinement.os, "geteuid", lambda: 1000)
    with pytest.raises(agent_confinement.IsolationUnavailable, match="needs bubblewrap or root"):
        agent_confinement.confinement()
    monkeypatch.setattr(agent_confinement, "bwrap_problem", lambda: None)
    assert agent_confinement.confinement().mode == "bubblewrap"


def test_isolation_none_builds_the_agent_here_and_unknown_modes_are_errors(registry) -> None:  # type: ignore[no-untyped-def]
    reg = registry.resolve("agents", "baseline")
    agent = isolated_agent(reg, AgentConfig(), "none", registry=registry)
    assert type(agent).__name__ == "BaselineAgent"
    with pytest.raises(ValueError, match="unknown agent isolation"):
        isolated_agent(reg, AgentConfig(), "thread", registry=registry)
    with pytest.raises(RunError, match="unknown agent isolation 'thread'"):
        preflight(RunConfig(task="rgym/demo", agent="baseline", agent_isolation="thread"), registry)


def test_the_cli_offers_the_two_modes() -> None:
    done = run_cli("run", "rgym/demo", "--agent-isolation", "thread")
    assert done.returncode == 2 and "'thread' is not one of 'none', 'process'" in done.stderr


# -- the model gateway -------------------------------------------------------------------------


def test_the_gateway_allows_only_the_user_s_model_endpoint_and_options(registry) -> None:  # type: ignore[no-untyped-def]
    config = AgentConfig(model="openai-compatible/test", base_url="http://127.0.0.1:9/v1",
                         options={"read_timeout": 5, "prices": "/nonexistent.yaml"})
    gateway = ModelGateway(config, registry, max_clients=2)
    refusals = {
        "other model": {"model": "openai-compatible/other"},
        "endpoint": {"model": "openai-compatible/test", "base_url": "http://198.51.100.1/v1"},
        "key variable": {"model": "openai-compatible/test", "options": {"api_key_env": "HOME"}},
        "prices": {"model": "openai-compatible/test", "options": {"prices": "/tmp/free.yaml"}},
        "unsafe value": {"model": "openai-compatible/test", "options": {"read_timeout": [1]}},
    }
    for name, params in refusals.items():
        with pytest.raises(Exception, match="may use only|only the user may set") as info:
            gateway.create(params)
        assert type(info.value).__name__ == "_Refused", name
    made = gateway.create({"model": "openai-compatible/test", "options": {"stream": False,
                                                                          "read_timeout": 5}})
    assert made["client"] == 0 and made["model"] == "test"
    assert gateway.clients[0].base_url == "http://127.0.0.1:9/v1"
    gateway.create({"model": "openai-compatible/test"})
    with pytest.raises(Exception, match="more than 2 model clients"):
        gateway.create({"model": "openai-compatible/test"})
    with pytest.raises(Exception, match="from start"):
        gateway.complete({"client": 0, "messages": []}, None, Usage())
    status = EpisodeStatus(budget=Budget())
    for params, why in (({"client": 7, "messages": []}, "no model client"),
                        ({"client": 0, "messages": "hi"}, "list of objects"),
                        ({"client": 0, "messages": [], "max_tokens": -1}, "positive integer")):
        with pytest.raises(Exception, match=why):
            gateway.complete(params, status, Usage())
    for client in gateway.clients:
        client.close()
    no_model = ModelGateway(AgentConfig(), registry)
    with pytest.raises(Exception, match="no --model was given"):
        no_model.create({"model": "openai-compatible/test"})


# -- without bubblewrap, as root ---------------------------------------------------------------


@pytest.mark.skipif(not ROOT, reason="the fallback without bubblewrap needs root (a normal user is refused)")
def test_without_bubblewrap_root_runs_the_agent_as_a_leased_uid_and_says_what_is_lost(
        registry, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("RGYM_BWRAP", "0")
    warn._said.clear()
    reg = registry.resolve("agents", "baseline")
    budget = Budget()
    context = TaskContext(task_id="rgym/demo", description="d", budget=budget,
                          status=EpisodeStatus(budget=budget), baseline_command="python baseline.py",
                          tools=[ToolSchema(name=n, description=n) for n in ("bash", "submit")])
    with caplog.at_level(logging.WARNING):
        agent = ProcessAgent(reg, AgentConfig(task_id="rgym/demo"), registry=registry, budget=budget)
    try:
        assert agent.confinement == "uid"
        assert "can read every world-readable file" in caplog.text
        uid = agent.plan.lease.uid
        assert 61000 <= uid < 62000 or os.environ.get("RGYM_UID_POOL")
        agent.start(context)
        first = agent.act(Observation(output="ready"))
        assert (first.tool, first.args) == ("bash", {"command": "python baseline.py"})
        assert agent.act(Observation(output="done")).tool == "submit"
        scratch = agent.plan.scratch
        assert scratch and Path(scratch).stat().st_uid == uid
    finally:
        agent.close()
    assert agent.plan.lease is None and not Path(scratch).exists()


def test_a_missing_model_key_stops_the_run_before_it_starts(tmp_path: Path) -> None:
    """The scaffold's factory runs in its process at pre-flight: its errors are usage errors."""
    done = run_cli("run", "rgym/demo", "--agent", "react", "--model", "openrouter/some-model",
                   "--agent-isolation", "process", "--runs-dir", str(tmp_path / "runs"),
                   env={"OPENROUTER_API_KEY": ""}, cwd=tmp_path, timeout=180)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "no API key" in done.stderr and "OPENROUTER_API_KEY" in done.stderr
    assert not (tmp_path / "runs").exists()


def test_agent_process_error_is_a_runtime_error() -> None:
    """So the runner maps a failure to start into a usage error (RunError)."""
    assert issubclass(AgentProcessError, RuntimeError)
