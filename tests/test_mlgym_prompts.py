"""The statements the agent reads under the ``mlgym`` profile are MLGym's (its
``configs/tasks/*.yaml`` descriptions at 9d40c1b), with nothing MLGym withheld, and every
MLGym-Bench task's ``mlgym`` profile has MLGym's ACI and budgets."""

from __future__ import annotations

import pytest

from rgym_core.registry import load_registry

#: The MLGym-Bench tasks whose pack declares an ``mlgym`` profile (3-SAT's yaml belongs to
#: the SAT pack's owner and has none yet: its statement carries MLGym's instructions).
PROFILED = {"mlgym/house-price": 1800, "mlgym/cifar10": 1800, "mlgym/fashion-mnist": 1800,
            "mlgym/coco-captioning": 2400, "mlgym/fineweb-lm": 2400, "mlgym/mnli": 2400,
            "mlgym/battle-of-sexes": 1800, "mlgym/blotto": 1800, "mlgym/prisoners-dilemma": 1800,
            "mlgym/breakout-minatar": 1800, "mlgym/meta-maze": 1800,
            "mlgym/mountain-car-continuous": 1800}


@pytest.fixture(scope="module")
def registry():
    return load_registry()


@pytest.mark.parametrize("task_id", sorted(PROFILED))
def test_mlgym_profile_has_mlgyms_aci_and_budget(registry, task_id: str) -> None:
    spec = registry.task(task_id).with_profile("mlgym")
    b = spec.budget
    assert (b.max_steps, b.time_limit_s, b.action_timeout_s) == (50, None, 25)
    assert b.training_timeout_s == PROFILED[task_id]  # configs/tasks/*.yaml training_timeout
    assert list(b.training_commands) == ["torchrun", "python", "python3", "accelerate", "deepspeed"]
    assert spec.tool_config["rgym"] == {"window": 1000, "search": "basic", "lint": "mlgym"}


def test_house_price_gets_the_ames_data_dictionary(registry) -> None:
    task = registry.task("mlgym/house-price")
    assert task.with_profile().description == task.description  # the default: rgym's statement
    text = task.with_profile("mlgym").description
    assert text.startswith("You are given the train, validation and test sets of Housing Price")
    assert "{dataset_docs}" not in text and "\nKAGGLEHOUSINGPRICE:\nMSSubClass: Identifies" in text
    assert "SaleType: Type of sale" in text and len(text) > 13_000  # MLGym's ends there
    assert "answer.csv" not in text


@pytest.mark.parametrize("task_id", ["mlgym/battle-of-sexes", "mlgym/blotto",
                                     "mlgym/prisoners-dilemma"])
def test_game_theory_gets_the_payoff_example_and_the_submit_advice(registry, task_id: str) -> None:
    text = registry.task(task_id).with_profile("mlgym").description
    assert "Here is a" in text and "example of" in text
    assert "Do not submit until the last step and try as many different strategies" in text
    assert "SUBMISSION FORMAT:" in text


@pytest.mark.parametrize(("task_id", "env"), [("mlgym/breakout-minatar", "Breakout-MinAtar"),
                                              ("mlgym/meta-maze", "MetaMaze-misc"),
                                              ("mlgym/mountain-car-continuous",
                                               "MountainCarContinuous-v0")])
def test_rl_statements_withhold_the_cut_off_and_say_64_environments(registry, task_id, env) -> None:
    task = registry.task(task_id)
    text = task.with_profile("mlgym").description
    assert "evaluated on 64 randomly initialized environments using\n5 different seeds" in text
    assert "256" not in text and "or until" not in text and "stops every episode" not in text
    assert env in text and "*.msgpack" in text  # rgym's workspace is still described
    assert "stops every episode after 200 steps" in task.with_profile("cpu").description \
        or task_id != "mlgym/mountain-car-continuous"


def test_3sat_statement_has_mlgyms_six_heuristic_instructions(registry) -> None:
    text = registry.task("mlgym/3sat").description
    for i, start in enumerate(["You may find it helpful to prioritize", "If you use transformations",
                               "Ensure the type of each input", "Most importantly, the heuristic",
                               "Avoid contradictory heuristic factors", "When conflicts arise"], 1):
        assert f"\n{i}. {start}" in text

