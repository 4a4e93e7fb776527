"""``rgym sandbox prune`` and ``rgym image build``, added to the rgym CLI."""

from __future__ import annotations

import sys

import click
from rich.console import Console
from rich.table import Table

from rgym_sandbox_docker import images, lifecycle

console = Console(stderr=True)


def _client():  # type: ignore[no-untyped-def]
    try:
        return lifecycle.docker_client()
    except lifecycle.DockerUnavailable as exc:
        raise click.ClickException(str(exc)) from exc


@click.group(help="Manage rgym's Docker containers.")
def sandbox() -> None:
    pass


@sandbox.command("prune", help="Remove containers and volumes labelled rgym.managed=1 "
                               "(left behind by killed runs).")
@click.option("--run-id", default=None, help="Only those of this run.")
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE",
              help="Only those with this label too (repeatable).")
def prune(run_id: str | None, labels: tuple[str, ...]) -> None:
    extra = {}
    for item in labels:
        key, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"'{item}' is not KEY=VALUE", param_hint="--label")
        extra[key] = value
    containers, volumes = lifecycle.prune(_client(), run_id=run_id, labels=extra)
    click.echo(f"removed {len(containers)} container(s) and {len(volumes)} volume(s)")
    for name in containers + volumes:
        click.echo(f"  {name}")


@click.group(help="Build rgym's layered Docker images.")
def image() -> None:
    pass


@image.command("build", help="Build the image chain of TASK (base, task pack, and with "
                             "--agent an agent layer); unchanged layers are reused.")
@click.argument("task")
@click.option("--agent", default=None, help="Also build the layer of this agent's requirements.")
@click.option("--base", default=None,
              help=f"Base image of the chain (default: $RGYM_DOCKER_BASE or {images.DEFAULT_BASE}).")
@click.option("--no-cache", is_flag=True, help="Rebuild every layer from scratch.")
@click.option("--quiet", "-q", is_flag=True, help="Print only the final tag.")
def build(task: str, agent: str | None, base: str | None, no_cache: bool, quiet: bool) -> None:
    from rgym_core.registry import RegistryError, load_registry

    registry = load_registry()
    try:
        spec = registry.task(task)
        agent_reqs = list(registry.agent(agent).requirements) if agent else None
    except RegistryError as exc:
        raise click.ClickException(str(exc)) from exc
    client = _client()
    status = console.status("building", spinner="dots")

    def progress(layer: str, line: str) -> None:
        if not quiet:
            status.update(f"[bold]{layer}[/bold] {line[:100]}")

    try:
        if not quiet:
            status.start()
        layers = images.build_chain(client, spec.resources.requirements,
                                    agent_requirements=agent_reqs, base=base,
                                    no_cache=no_cache, progress=progress)
    except images.ImageBuildError as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        status.stop()
    if quiet:
        click.echo(layers[-1].tag)
        return
    table = Table(title=f"images for {spec.id}")
    for col in ("layer", "tag", "state"):
        table.add_column(col)
    for layer in layers:
        table.add_row(layer.name, layer.tag, "built" if layer.built else "cached")
    Console(file=sys.stdout).print(table)
