"""The effective resources of a run: the task's with the command line's over them,
merged once on the plan (``Episode.resources``), and read by the backends from
``SandboxConfig.effective`` rather than merged again."""

from __future__ import annotations

from pathlib import Path

import attrs

from rgym_core.episode_plan import plan_resources, sandbox_config
from rgym_core.registry import load_registry
from rgym_core.runner import Episode, RunConfig
from rgym_core.sandbox import SandboxConfig, merge_resources
from rgym_core.sandboxes.local.settings import unenforced_settings, visible_devices
from rgym_core.specs import Resources

TASK = Resources(memory_mb=1024, cpus=2.0, pids=64, gpus=1, network=False, image="task:1",
                 requirements=["numpy"], disk_mb=300)


def test_the_command_line_replaces_the_task_setting_by_setting() -> None:
    res = merge_resources(TASK, memory_mb=512, network=True, image="cli:2", gpus="0,3",
                          explicit={"memory_mb", "network", "image", "gpus"})
    assert (res.memory_mb, res.cpus, res.pids) == (512, 2.0, 64)
    assert res.network is True and res.image == "cli:2" and res.gpus == "0,3"
    assert res.disk_mb == 300 and res.requirements == ("numpy",)
    assert res.given == {"memory_mb", "network", "image", "gpus"}
    assert res.requested_gpus == "0,3" and res.wanted("gpus") and not res.wanted("cpus")


def test_unset_settings_keep_the_task_ones() -> None:
    res = merge_resources(TASK, image="")
    assert (res.memory_mb, res.cpus, res.pids, res.network) == (1024, 2.0, 64, False)
    assert res.image == "task:1"  # an empty --image is no image
    assert res.gpus == "1" and res.requested_gpus is None  # the task's count, not asked for
    assert res.given == frozenset() and res.explicit is None and res.wanted("cpus")
    assert merge_resources(Resources()).gpus is None


def test_a_config_built_by_hand_merges_its_fields_once() -> None:
    config = SandboxConfig(run_id="r", resources=TASK, network=True, gpus="all")
    assert config.effective == merge_resources(TASK, network=True, gpus="all")
    assert config.network_enabled is True


def test_the_plan_merges_once_and_the_sandbox_config_carries_it(tmp_path: Path) -> None:
    run = RunConfig(task="rgym/demo", runs_dir=tmp_path, memory_mb=700, cpus=1.5, network=True,
                    gpus="0")
    episode = Episode(run, load_registry())
    assert episode.resources is episode.plan.resources
    assert episode.resources == plan_resources(episode.task, run)
    assert (episode.resources.memory_mb, episode.resources.cpus) == (700, 1.5)
    assert episode.resources.explicit == {"memory_mb", "cpus", "network", "gpus"}
    config = sandbox_config(episode.run_id, episode.task, episode.resources, run)
    assert config.effective is episode.resources
    # the fields older backends read say the same as the merged value
    assert config.resources.memory_mb == 700 and config.network is True and config.gpus == "0"
    legacy = merge_resources(config.resources, network=config.network, image=config.image,
                             gpus=config.gpus, explicit=config.explicit)
    assert attrs.evolve(legacy, given=config.effective.given) == config.effective


def test_the_local_backend_reads_the_merged_value() -> None:
    # effective says 3 CPUs and --gpus 2 that the legacy fields do not: the warnings follow it
    effective = merge_resources(Resources(), cpus=3.0, gpus="2", explicit={"cpus", "gpus"})
    lines = unenforced_settings(SandboxConfig(run_id="x", effective=effective))
    assert any("3 CPUs" in line for line in lines)
    assert any("--gpus 2" in line and repr(visible_devices("2")) in line for line in lines)
    assert unenforced_settings(SandboxConfig(run_id="x", resources=Resources(cpus=3.0),
                                             effective=merge_resources(Resources()))) == []
