"""steerable inside LeRobot: the `steerable_hierarchical` policy plugin and the `steerable_tabletop` env
plugin, driven by LeRobot's own factories and CLIs (`lerobot-eval`, `lerobot-train`), the real lerobot.

One tiny synthetic dataset with oracle language and one tiny `steerable train` checkpoint serve the
module. A checkpoint goes both ways: `steerable train`'s loads in LeRobot's loader, processors and
`lerobot-eval`; `lerobot-train`'s runs in `steerable run --policy.path`.
"""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from cli_helpers import BIN, FLAGS, TINY
from cli_helpers import run as _run
from lerobot.configs import PreTrainedConfig
from lerobot.envs import EnvConfig
from lerobot.envs.factory import make_env, make_env_config
from lerobot.policies import PreTrainedPolicy, make_policy, make_pre_post_processors
from lerobot.policies.factory import get_policy_class
from lerobot.utils.import_utils import register_third_party_plugins

from steerable.policy.checkpoint import latest_checkpoint, load_policy

register_third_party_plugins()  # what every LeRobot script does first: imports lerobot_policy_* / lerobot_env_*


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("plugins")


@pytest.fixture(scope="module")
def dataset(work: Path) -> Path:
    root = work / "synthetic"
    _run(str(BIN / "steerable"), "make-dataset", "synthetic", "--out", str(root), "--episodes", "3",
         "--difficulty", "easy", "--with_language")
    return root


@pytest.fixture(scope="module")
def checkpoint(work: Path, dataset: Path) -> Path:
    """A tiny policy trained two steps by `steerable train`."""
    out = work / "steerable_train"
    _run(str(BIN / "steerable"), "train", "--dataset", str(dataset), "--output_dir", str(out), "--steps", "2",
         "--batch_size", "4", "--eval_every", "100", "--save_every", "2", "--progress", "false", *FLAGS)
    where = latest_checkpoint(out)
    assert where is not None
    return where


def test_both_plugins_are_installed_distributions_lerobot_discovers() -> None:
    for dist in ("lerobot_policy_steerable", "lerobot_env_steerable"):
        assert importlib.metadata.distribution(dist).metadata["Name"] == dist
    assert "steerable_hierarchical" in PreTrainedConfig.get_known_choices()
    assert "steerable_tabletop" in EnvConfig.get_known_choices()
    assert issubclass(get_policy_class("steerable_hierarchical"), PreTrainedPolicy)


def test_the_lerobot_extra_brings_both_plugins_at_steerables_version() -> None:
    """`pip install 'steerable[lerobot]'` installs the plugins (make test installs the extra from a local
    wheelhouse of them, as from an index), not a separate step a user must know about."""
    from packaging.requirements import Requirement

    version = importlib.metadata.version("steerable")
    wanted = {}
    for line in importlib.metadata.requires("steerable") or []:
        req = Requirement(line)
        if req.marker is not None and req.marker.evaluate({"extra": "lerobot"}) and req.name.startswith("lerobot_"):
            wanted[req.name] = str(req.specifier)
    assert wanted == {"lerobot_policy_steerable": f"=={version}", "lerobot_env_steerable": f"=={version}"}
    for dist in wanted:
        assert importlib.metadata.version(dist) == version


def test_a_steerable_checkpoint_loads_in_lerobots_loader_and_processors(checkpoint: Path) -> None:
    cfg = PreTrainedConfig.from_pretrained(checkpoint, cli_overrides=["--device=cpu", "--n_action_steps=3"])
    assert cfg.type == "steerable_hierarchical" and cfg.n_action_steps == 3 and cfg.chunk_size == 4
    cfg.pretrained_path = checkpoint
    env_cfg = make_env_config("steerable_tabletop")
    policy = make_policy(cfg, env_cfg=env_cfg)
    assert isinstance(policy, PreTrainedPolicy)
    assert set(policy.config.image_features) == {"observation.images.top", "observation.images.wrist"}
    # The weights are the checkpoint's: steerable's own loader gives the same tensors.
    mine = load_policy(checkpoint).model.state_dict()
    assert all(torch.equal(v, mine[k]) for k, v in policy.model.state_dict().items())
    pre, post = make_pre_post_processors(
        cfg, pretrained_path=str(checkpoint),
        preprocessor_overrides={"device_processor": {"device": "cpu"},
                                "rename_observations_processor": {"rename_map": {}}})
    # The files steerable wrote are the pipeline the plugin's own factory makes.
    from steerable.policy.lerobot_plugin import make_steerable_hierarchical_pre_post_processors

    fresh_pre, fresh_post = make_steerable_hierarchical_pre_post_processors(cfg)
    for loaded, made in ((pre, fresh_pre), (post, fresh_post)):
        assert [type(s) for s in loaded.steps] == [type(s) for s in made.steps]
    obs = {"observation.images.top": torch.rand(3, 160, 224), "observation.images.wrist": torch.rand(3, 160, 224),
           "observation.state": torch.tensor([0.2, 0.2, 0.1, 0.0]), "task": "put the red cube in the blue bin"}
    batch = pre(obs)
    # An identity normaliser: the policy normalises with its own statistics.
    assert torch.equal(batch["observation.state"], obs["observation.state"][None])
    policy.reset()
    action = post(policy.select_action(batch))
    assert action.shape == (1, 4) and torch.isfinite(action).all()
    assert len(policy.last_subtasks) == 1


def test_forward_renders_the_language_columns_of_lerobots_training_batch(checkpoint: Path, dataset: Path) -> None:
    from lerobot.datasets import LeRobotDataset
    from lerobot.utils.collate import lerobot_collate_fn

    cfg = PreTrainedConfig.from_pretrained(checkpoint, cli_overrides=["--device=cpu"])
    cfg.pretrained_path = checkpoint
    data = LeRobotDataset("local/synthetic", root=dataset,
                          delta_timestamps={"action": [i / 15 for i in cfg.action_delta_indices]})
    policy = make_policy(cfg, ds_meta=data.meta)
    pre, _ = make_pre_post_processors(cfg, pretrained_path=str(checkpoint))
    batch = lerobot_collate_fn([data[i] for i in (0, 40, 80, 200, 300)])
    assert batch is not None and "messages" not in batch and "language_persistent" not in batch
    loss, parts = policy.forward(pre(batch))
    assert torch.isfinite(loss) and loss.requires_grad
    # Text targets only come from the recipe's rendering of the oracle language (the plain-task
    # fallback has none).
    assert parts["text_loss"] > 0
    loss.backward()


def test_forward_takes_the_messages_lerobots_own_rendering_step_wrote(checkpoint: Path, dataset: Path,
                                                                       work: Path) -> None:
    from lerobot.configs.recipe import load_recipe
    from lerobot.datasets import LeRobotDataset
    from lerobot.processor import batch_to_transition, transition_to_batch
    from lerobot.processor.render_messages_processor import RenderMessagesStep
    from lerobot.utils.collate import lerobot_collate_fn

    recipe = work / "subtask_only.yaml"  # text only: no low-level turn, so no action sample
    recipe.write_text('messages:\n  - {role: user, content: "${task}", stream: high_level}\n'
                      '  - {role: assistant, content: "${subtask}", stream: high_level, target: true}\n')
    step = RenderMessagesStep(recipe=load_recipe(str(recipe)))
    cfg = PreTrainedConfig.from_pretrained(checkpoint, cli_overrides=["--device=cpu"])
    cfg.pretrained_path = checkpoint
    data = LeRobotDataset("local/synthetic", root=dataset,
                          delta_timestamps={"action": [i / 15 for i in cfg.action_delta_indices]})
    # LeRobot's step renders each sample (its language columns are there before collate).
    samples = [transition_to_batch(step(batch_to_transition(data[i]))) for i in (0, 40, 200, 300)]
    batch = lerobot_collate_fn(samples)
    assert batch is not None and all(s == ["high_level", "high_level"] for s in batch["message_streams"])
    policy = make_policy(cfg, ds_meta=data.meta)
    pre, _ = make_pre_post_processors(cfg, pretrained_path=str(checkpoint))
    batch = pre(batch)
    torch.manual_seed(0)
    _, theirs = policy.forward(batch)
    assert theirs["flow_loss"] == 0.0 and theirs["text_loss"] > 0  # LeRobot's samples, text targets only
    torch.manual_seed(0)
    _, ours = policy.forward({k: v for k, v in batch.items()
                              if k not in ("messages", "message_streams", "target_message_indices")})
    assert ours != theirs  # without them: steerable renders its own recipe (hierarchical)


def test_the_tabletop_is_a_vectorised_lerobot_env_with_success_in_info() -> None:
    from steerable.synthetic.tasks import step_commands

    cfg = make_env_config("steerable_tabletop", cameras="top", episode_length=400)
    assert cfg.features["pixels/top"].shape == (160, 224, 3)
    assert cfg.features_map["agent_pos"] == "observation.state"
    vec = make_env(cfg, n_envs=2)["steerable_tabletop"][0]
    obs, info = vec.reset(seed=[0, 1])
    assert obs["pixels"]["top"].shape == (2, 160, 224, 3) and obs["pixels"]["top"].dtype == np.uint8
    assert obs["agent_pos"].shape == (2, 4) and not info["is_success"].any()
    tasks = vec.call("task_description")
    assert all(isinstance(t, str) and t for t in tasks) and tasks == vec.call("task")
    assert vec.call("_max_episode_steps") == (400, 400)
    # The scripted controller (a test double) drives env 0 through its task; env 1 holds still.
    sim = vec.envs[0].unwrapped.sim
    controller = sim.scripted_controller()
    commands = [c for step in sim.episode.steps for c in step_commands(step)]
    hold = obs["agent_pos"][1].copy()
    finished: dict[str, Any] | None = None
    for _ in range(400):
        chunk = controller.act(sim.observe(render=False), commands[0])
        if chunk.done:
            commands.pop(0)
            continue
        for action in chunk.actions:
            obs, reward, terminated, truncated, info = vec.step(np.stack([action, hold]))
            if terminated[0]:
                finished = {"reward": reward[0], "info": info}
                break
        if finished or not commands:
            break
    assert finished is not None, f"the scripted controller did not finish {tasks[0]!r}"
    assert finished["reward"] == 1.0
    success = finished["info"]["final_info"]["is_success"]
    assert bool(success[0]) and not success[1]


def test_lerobot_eval_scores_a_steerable_checkpoint_in_the_tabletop(checkpoint: Path, work: Path) -> None:
    out = work / "eval"
    run = _run(str(BIN / "lerobot-eval"), f"--policy.path={checkpoint}", "--policy.device=cpu",
               "--env.type=steerable_tabletop", "--env.episode_length=8", "--eval.n_episodes=4",
               # Sync: async workers re-import lerobot-eval's main module (all of lerobot) each, a minute on
               # 2 cores; the async envs are tested in-process below.
               "--eval.batch_size=4", "--eval.use_async_envs=false", f"--output_dir={out}")
    assert "pc_success" in run.stdout + run.stderr
    overall = json.loads((out / "eval_info.json").read_text())["overall"]
    assert overall["n_episodes"] == 4 and 0.0 <= overall["pc_success"] <= 100.0


def test_lerobot_train_runs_the_policy_and_its_checkpoint_runs_in_steerable(dataset: Path, work: Path) -> None:
    out = work / "lerobot_train"
    _run(str(BIN / "lerobot-train"), "--policy.type=steerable_hierarchical", "--dataset.repo_id=local/synthetic",
         f"--dataset.root={dataset}", "--steps=2", "--batch_size=4", "--num_workers=0", "--save_freq=2",
         "--log_freq=1", f"--output_dir={out}", "--policy.device=cpu", "--policy.push_to_hub=false",
         "--wandb.enable=false", *FLAGS)
    saved = out / "checkpoints" / "last" / "pretrained_model"
    config = json.loads((saved / "config.json").read_text())
    assert config["type"] == "steerable_hierarchical" and config["format"] == 2
    assert config["trained_on"] == {"dataset": str(dataset), "synthetic_difficulty": "easy"}
    assert {"policy_preprocessor.json", "policy_postprocessor.json", "stats.json", "recipe.yaml",
            "tokenizer"} <= {p.name for p in saved.iterdir()}
    assert load_policy(out).model.cfg.chunk_size == TINY["chunk_size"]  # the lerobot-train output folder itself
    run = _run(str(BIN / "steerable"), "run", "--env", "sim", "--high_level", "policy", "--low_level", "policy",
               "--policy.path", str(saved), "--eval_episodes", "1", "--workers", "1", "--max_seconds", "1",
               "--json")
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["episodes"] == 1 and report["difficulty"] == "easy"


def test_lerobot_refuses_a_fresh_policy_without_a_dataset() -> None:
    from steerable.errors import ConfigError

    cfg = PreTrainedConfig.get_choice_class("steerable_hierarchical")(device="cpu")
    with pytest.raises(ConfigError, match="--policy.path"):
        make_policy(cfg, env_cfg=make_env_config("steerable_tabletop"))


def test_the_async_vector_env_runs_the_tabletop_in_worker_processes() -> None:
    vec = make_env(make_env_config("steerable_tabletop", episode_length=2), n_envs=2, use_async_envs=True)
    env = vec["steerable_tabletop"][0]
    try:
        assert isinstance(env, gym.vector.AsyncVectorEnv)
        obs, _ = env.reset(seed=[3, 4])
        assert obs["pixels"]["wrist"].shape == (2, 160, 224, 3)
        tasks = env.call("task_description")
        assert len(tasks) == 2 and all(tasks)
        for _ in range(2):
            obs, reward, terminated, truncated, info = env.step(np.tile(obs["agent_pos"][:1], (2, 1)))
        assert truncated.all() and not terminated.any() and not info["final_info"]["is_success"].any()
    finally:
        env.close()


def test_the_gym_id_is_registered_for_gym_make() -> None:
    from steerable.synthetic.gym_env import GYM_ID

    env = gym.make(GYM_ID, cameras="wrist", task_text="put the red cube in the blue bin", max_episode_steps=3)
    obs, _ = env.reset(seed=5)
    assert set(obs["pixels"]) == {"wrist"}
    assert env.unwrapped.task_description == "put the red cube in the blue bin"
    for _ in range(3):
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
    assert truncated and not terminated
