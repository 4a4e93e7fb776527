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


@sandbox.command("prune", help="Remove containers and volumes labelled rgym.managed=1 whose "
                               "rgym process is gone (left behind by killed runs); live "
                               "episodes are kept unless --all.")
@click.option("--run-id", default=None, help="Only those of this run.")
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE",
              help="Only those with this label too (repeatable).")
@click.option("--all", "include_live", is_flag=True,
              help="Also remove those of runs that are still going (asks first).")
@click.option("--yes", "-y", is_flag=True, help="With --all: do not ask.")
def prune(run_id: str | None, labels: tuple[str, ...], include_live: bool, yes: bool) -> None:
    extra = {}
    for item in labels:
        key, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"'{item}' is not KEY=VALUE", param_hint="--label")
        extra[key] = value
    client = _client()
    found = lifecycle.find_leftovers(client, run_id=run_id, labels=extra)
    gone = [f for f in found if f.state == "gone"]
    live = [f for f in found if f.state != "gone"]
    removed = [f for f in gone if lifecycle.remove(f)]
    if include_live and live:
        click.echo(f"{len(live)} container(s)/volume(s) belong to rgym processes that are still "
                   f"running, or whose owner cannot be checked from here:")
        for leftover in live:
            click.echo(f"  {leftover.describe()}")
        if not yes:
            if not sys.stdin.isatty():
                raise click.UsageError("not removing them without confirmation: run "
                                       "`rgym sandbox prune --all --yes`")
            if not click.confirm("Remove them (their episodes end now)?", default=False):
                live_removed: list[lifecycle.Leftover] = []
            else:
                live_removed = [f for f in live if lifecycle.remove(f)]
        else:
            live_removed = [f for f in live if lifecycle.remove(f)]
        removed += live_removed
        live = [f for f in live if f not in live_removed]
    containers = [f.name for f in removed if f.kind == "container"]
    volumes = [f.name for f in removed if f.kind == "volume"]
    click.echo(f"removed {len(containers)} container(s) and {len(volumes)} volume(s)")
    for name in containers + volumes:
        click.echo(f"  {name}")
    if live and not include_live:
        click.echo(f"kept {len(live)} of live runs (or with no recorded owner); "
                   f"`rgym sandbox prune --all` removes them too")


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
@click.option("--find-links", "find_links", multiple=True, metavar="DIR",
              type=click.Path(file_okay=False, exists=True),
              help="A folder of wheels pip uses first in the pack and agent layers (repeatable; "
                   "default: $RGYM_PIP_FIND_LINKS, else pip's $PIP_FIND_LINKS).")
@click.option("--quiet", "-q", is_flag=True, help="Print only the final tag.")
def build(task: str, agent: str | None, base: str | None, no_cache: bool,
          find_links: tuple[str, ...], quiet: bool) -> None:
    import os

    from rgym_core import RegistryError, load_registry

    if find_links:
        os.environ["RGYM_PIP_FIND_LINKS"] = os.pathsep.join(find_links)

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
