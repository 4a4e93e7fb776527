"""rgym's Docker sandbox backend: one container per episode, a persistent shell
driven through one attached exec session, isolated grading and layered images."""

__all__ = ["DockerSandbox"]


def __getattr__(name: str):  # type: ignore[no-untyped-def]
    if name == "DockerSandbox":  # imported lazily: the docker SDK is only needed when used
        from rgym_sandbox_docker.sandbox import DockerSandbox

        return DockerSandbox
    raise AttributeError(name)
