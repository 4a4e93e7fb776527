"""The plugin module named by the ``rgym`` entry point: registers the ``docker``
sandbox and the ``rgym sandbox`` / ``rgym image`` CLI commands."""

from __future__ import annotations

from rgym_core.hookspecs import hookimpl


@hookimpl
def rgym_register_sandboxes():  # type: ignore[no-untyped-def]
    from rgym_core.sandbox import SandboxSpec

    def factory(config):  # type: ignore[no-untyped-def]
        from rgym_sandbox_docker.sandbox import DockerSandbox

        return DockerSandbox(config)

    return [SandboxSpec(name="docker/docker", factory=factory, isolated_grading=True,
                        description="one Docker container per episode: non-root agent, "
                                    "read-only root-owned datasets, no network by default, "
                                    "memory/CPU/process limits, isolated grading")]


@hookimpl
def rgym_cli_commands():  # type: ignore[no-untyped-def]
    from rgym_sandbox_docker.cli import image, sandbox

    return [sandbox, image]
