"""Real LeRobot policies for the tests of steerable's LeRobot low level, and LeRobot's own inference path.

Each policy is built by LeRobot's factory (`make_policy_config`, `make_policy` over the metadata of a
steerable-made synthetic dataset, `make_pre_post_processors` with its stats): tiny, random weights,
and saved as LeRobot's trainer saves a checkpoint (the policy's and its processors'
`save_pretrained`, and `train_config.json` naming the dataset). SmolVLA reads a tiny SmolVLM built
here from a config, with a byte-level BPE tokenizer trained here on a few sentences: nothing comes
from the Hub. `lerobot_actions` replays observations through LeRobot's sync inference engine (the
path `lerobot-rollout` drives a robot with) to compare with what steerable sent.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from lerobot.configs.default import DatasetConfig
from lerobot.configs.policies import PreTrainedConfig
from lerobot.configs.train import TrainPipelineConfig
from lerobot.datasets import LeRobotDatasetMetadata
from lerobot.policies.factory import make_policy, make_policy_config, make_pre_post_processors
from lerobot.rollout.inference.sync import SyncInferenceEngine
from lerobot.utils.feature_utils import build_dataset_frame, dataset_to_policy_features

from steerable.control import Observation
from steerable.runtime.loop import LoopRates
from steerable.runtime.session import Session, SessionOptions, parse_commands
from steerable.runtime.stack import LeRobotOptions, StackSpec
from steerable.synthetic import generate_synthetic

# One thread: the ops of these tiny models are too small to split, and two threads on two busy cores
# ran them ~5x slower.
torch.set_num_threads(1)

REPO_ID = "local/steerable_sim"
ROBOT_TYPE = "steerable_sim"
# Small enough for CPU tests (a policy ~ 1 s to build; resnet18 is the smallest backbone LeRobot takes).
TINY: dict[str, dict[str, Any]] = {
    "act": dict(chunk_size=10, n_action_steps=5, dim_model=32, n_heads=2, dim_feedforward=64, n_encoder_layers=1,
                n_decoder_layers=1, latent_dim=8, n_vae_encoder_layers=1, pretrained_backbone_weights=None),
    "diffusion": dict(n_obs_steps=2, horizon=8, n_action_steps=3, down_dims=(16, 32), kernel_size=3, n_groups=4,
                      diffusion_step_embed_dim=16, num_train_timesteps=10, num_inference_steps=3,
                      spatial_softmax_num_keypoints=8, pretrained_backbone_weights=None),
    "smolvla": dict(load_vlm_weights=False, num_vlm_layers=2, num_expert_layers=1, self_attn_every_n_layers=2,
                    expert_width_multiplier=0.5, chunk_size=10, n_action_steps=5, num_steps=2,
                    resize_imgs_with_padding=(64, 64), max_state_dim=8, max_action_dim=8, tokenizer_max_length=24),
}
SENTENCES = ["put the red cube in the blue bin", "pick up the green cube", "no, the grey bin instead",
             "move to the left zone", "place it on the yellow cube"]


def synthetic_dataset(out: Path, episodes: int = 1) -> Path:
    """A steerable synthetic dataset (both cameras at the simulator's shapes): the policies' stats and names."""
    return generate_synthetic(out, episodes=episodes, seed=0)


def tiny_vlm(out: Path) -> Path:
    """A SmolVLM folder AutoProcessor and AutoConfig load offline: config, BPE tokenizer, image processor."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, SmolVLMConfig, SmolVLMImageProcessor, SmolVLMProcessor
    from transformers.models.smolvlm.video_processing_smolvlm import SmolVLMVideoProcessor

    special = ["<pad>", "<unk>", "<image>", "<fake_token_around_image>", "<global-img>", "<end_of_utterance>"]
    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(SENTENCES, trainers.BpeTrainer(
        vocab_size=400, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, pad_token="<pad>", unk_token="<unk>",
        extra_special_tokens={"image_token": "<image>", "fake_image_token": "<fake_token_around_image>",
                              "global_image_token": "<global-img>", "end_of_utterance_token": "<end_of_utterance>"})
    images = SmolVLMImageProcessor(do_image_splitting=False, size={"longest_edge": 64},
                                   max_image_size={"longest_edge": 64})
    SmolVLMProcessor(image_processor=images, tokenizer=tokenizer, video_processor=SmolVLMVideoProcessor(),
                     image_seq_len=4).save_pretrained(out)
    SmolVLMConfig(
        text_config={"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                     "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": len(tokenizer),
                     "max_position_embeddings": 256},
        vision_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
                       "image_size": 64, "patch_size": 16},
        scale_factor=2, image_token_id=tokenizer.convert_tokens_to_ids("<image>"), pad_token_id=tokenizer.pad_token_id,
    ).save_pretrained(out)
    return out


def save_policy(kind: str, dataset: Path, out: Path, *, cameras: Iterable[str] | None = None, **config: Any) -> Path:
    """A LeRobot `kind` policy (TINY settings, `config` on top) saved to `out` as a trained checkpoint;
    `cameras`: the camera keys it reads (default: every camera of the dataset)."""
    torch.manual_seed(0)
    meta = LeRobotDatasetMetadata(REPO_ID, root=dataset)
    cfg = make_policy_config(kind, device="cpu", **{**TINY[kind], **config})
    if cameras is not None:
        keep = {"observation.state", *cameras}
        cfg.input_features = {k: ft for k, ft in dataset_to_policy_features(meta.features).items() if k in keep}
    policy = make_policy(cfg, ds_meta=meta)
    preprocessor, postprocessor = make_pre_post_processors(cfg, dataset_stats=meta.stats)
    for part in (policy, preprocessor, postprocessor):
        part.save_pretrained(out)
    TrainPipelineConfig(dataset=DatasetConfig(repo_id=REPO_ID, root=str(dataset)), policy=cfg).save_pretrained(out)
    return out


def _raw(observation: Observation) -> dict[str, Any]:
    """The observation as a LeRobot robot's `get_observation()` gives it: one float per state name, and
    each camera's HxWx3 frame under its name."""
    raw: dict[str, Any] = {n: float(v) for n, v in zip(observation.state_names, observation.state, strict=True)}
    raw.update({key.removeprefix("observation.images."): image for key, image in observation.images.items()})
    return raw


def lerobot_actions(policy_dir: Path, dataset: Path, steps: list[tuple[Observation, str]], *,
                    seed: int = 0) -> tuple[list[str], np.ndarray]:
    """(action names, one action per step) from LeRobot's own path: the policy loaded by `make_policy`,
    its processors from the folder, and its `SyncInferenceEngine` over each (observation, command) frame
    (`build_dataset_frame` over the dataset's features); the engine is reset when the command changes."""
    meta = LeRobotDatasetMetadata(REPO_ID, root=dataset)
    cfg = PreTrainedConfig.from_pretrained(policy_dir)
    cfg.pretrained_path = str(policy_dir)
    policy = make_policy(cfg, ds_meta=meta)
    preprocessor, postprocessor = make_pre_post_processors(cfg, pretrained_path=str(policy_dir))
    names = list(meta.features["action"]["names"])
    torch.manual_seed(seed)
    engine, current = None, None
    out = []
    for observation, command in steps:
        if engine is None or command != current:
            engine = SyncInferenceEngine(policy, preprocessor, postprocessor, meta.features, names, command, "cpu",
                                         ROBOT_TYPE)
            engine.reset()
            current = command
        frame = build_dataset_frame(meta.features, _raw(observation), prefix="observation")
        out.append(engine.get_action(frame).numpy())
    return names, np.stack(out)


@dataclass
class Drive:
    """What one `steerable run` session did: each observation and command the low level was asked
    with, each action sent to the environment, and the session (closed)."""

    seen: list[tuple[Observation, str]] = field(default_factory=list)
    sent: list[np.ndarray] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    session: Any = None


def drive(policy_dir: Path, *, task: str, seconds: float, high_level: str = "none", commands: str = "",
          seed: int | None = None, torch_seed: int = 0, on_session: Any = None) -> Drive:
    """Run `steerable run --low_level lerobot --lerobot.policy_path DIR` through the Python API in the
    simulator (virtual clock) for `seconds`, with the operator `commands` lines."""
    spec = StackSpec(high_level=high_level, low_level="lerobot",
                     lerobot=LeRobotOptions(str(policy_dir), "cpu"))
    session = Session(SessionOptions(stack=spec, task=task, seed=seed, rates=LoopRates(), max_seconds=seconds),
                      out=lambda line: None)
    run = Drive(session=session)
    low, env = session.runtime.low, session.env
    act, send = low.act, env.send_action

    def seen_act(observation: Observation, command: str) -> Any:
        run.seen.append((observation, command))
        return act(observation, command)

    def sent_action(action: np.ndarray) -> None:
        run.sent.append(np.array(action, dtype=np.float32))
        send(action)

    low.act, env.send_action = seen_act, sent_action
    session.runtime.listeners.append(lambda e: run.events.append(f"{e.kind}: {e.text}"))
    if on_session is not None:
        on_session(session)
    torch.manual_seed(torch_seed)  # after loading (module init draws from it): a diffusion policy's noise
    try:
        session.run_commands(parse_commands(commands, "test"))
    finally:
        session.close()
    return run
