"""The plugin module named by the ``rgym`` entry point: registers the ``docker``
sandbox and the ``rgym sandbox`` / ``rgym image`` CLI commands.  Nothing heavy is
imported here (the docker SDK, rich): only when a sandbox or a command is used."""

from __future__ import annotations

from typing import Any

from rgym_core import hookimpl

SANDBOX_DESCRIPTION = ("one Docker container per episode: non-root agent, read-only root-owned "
                       "datasets, no network by default, memory/process/workspace limits by "
                       "default, isolated grading")


@hookimpl
def rgym_register_sandboxes():  # type: ignore[no-untyped-def]
    from rgym_core import SandboxSpec

    def factory(config):  # type: ignore[no-untyped-def]
        from rgym_sandbox_docker.sandbox import DockerSandbox

        return DockerSandbox(config)

    extra: dict[str, Any] = {}
    try:  # a typed limits description, where the core's SandboxSpec has the field
        import attrs

        if "limits" in {a.name for a in attrs.fields(SandboxSpec)}:
            from rgym_sandbox_docker.limits import describe_limits

            extra["limits"] = describe_limits
        if "reap" in {a.name for a in attrs.fields(SandboxSpec)}:
            def reap(handle):  # type: ignore[no-untyped-def]
                from rgym_sandbox_docker.sandbox import reap as reap_container

                return reap_container(handle)

            extra["reap"] = reap

            def export_leftover(handle, dest, exclude):  # type: ignore[no-untyped-def]
                from rgym_sandbox_docker.sandbox import export_left_workspace

                return export_left_workspace(handle, dest, exclude=exclude)

            extra["export_leftover"] = export_leftover
    except Exception:  # noqa: BLE001 - an older core: no limits line in `rgym show`
        pass
    return [SandboxSpec(name="docker/docker", factory=factory, isolated_grading=True,
                        description=SANDBOX_DESCRIPTION, **extra)]


@hookimpl
def rgym_cli_commands():  # type: ignore[no-untyped-def]
    try:
        from rgym_core import lazy_command
    except ImportError:  # an older core: plain commands
        from rgym_sandbox_docker.cli import image, sandbox

        return [sandbox, image]
    return [lazy_command("sandbox", "rgym_sandbox_docker.cli:sandbox",
                         "Manage rgym's Docker containers."),
            lazy_command("image", "rgym_sandbox_docker.cli:image",
                         "Build rgym's layered Docker images.")]
