"""Policy speed: train steps/s, text tokens/s with and without the KV cache, action-chunk latency;
and, with `--data`, where `steerable train`'s time goes on a dataset's camera frames.

Random weights and random inputs (speed does not depend on what the weights learned):

    .venv/bin/python benchmarks/policy.py                    # the tiny default config, CPU
    .venv/bin/python benchmarks/policy.py --size smolvlm --device cuda   # SmolVLM-256M-size backbone

`--threads N` sets torch's CPU threads (1 is fastest for the tiny model on a shared machine).

    .venv/bin/python benchmarks/policy.py --data ../shared/data/lingzu_teleop_4

times, on episode 0 of that dataset and of a synthetic one made for the run (4 easy episodes, 224x160
cameras), the decoding and the resizing of its frames to the policy's 32 px (the whole episode in one
tensor, as the trainer did before #34, and frame by frame, as it does now: the same pixels, checked),
then `--data_steps` steps of `steerable train` (tiny, batch 32 + 32, an actions-only recipe: the
dataset may have no language) with each resize, all in one run.

    .venv/bin/python benchmarks/policy.py --data DIR --breakdown [--data_steps 150]

runs the default `steerable train --dataset DIR --recipe hierarchical` for that many steps, with timers
wrapped around the trainer's calls (nothing timed in src/), and prints per phase the wall time a step
(sampling, decoding, resizing, collation, tokenization, forward, backward, optimizer, scheduler, weight
average, loss checks; held-out evaluation and checkpoint amortised over their default intervals) for the
first pass (the steps that decode training episodes) and the steady state after, with user and system
CPU time and context switches (getrusage) of each, and a projection of the default 2,500-step run.
`--auto_threads` decodes with FFmpeg's automatic thread counts (as before #35); `--share_images` gives
every training dataset one image cache (a proposed change: each decodes every episode on its own).

    .venv/bin/python benchmarks/policy.py --processes 1,2 [--data_steps 60] [--batch_size 32]

runs the default tiny `steerable train` on a synthetic dataset (4 easy episodes with language) under
torchrun on each number of processes in turn (CPU, gloo; `--batch_size` per process, as many low-level
samples again), and prints per count the global batch, steps/s and samples/s, from `logs.jsonl`'s
windows after the first (which holds the start-up and the first decodes).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from steerable.policy.backbone import build_backbone
from steerable.policy.config import PolicyConfig
from steerable.policy.generation import GenerationConfig, generate_ids
from steerable.policy.model import HierarchicalPolicy

# SmolVLM-256M's shapes (text: 30 layers of 576; vision: 12 layers of 768 at 512 px, 64 tokens/image).
SMOLVLM = {
    "tiny_hidden": 576, "tiny_layers": 30, "tiny_heads": 9, "tiny_vision_hidden": 768, "tiny_vision_layers": 12,
    "image_size": 512, "tiny_patch_size": 16, "expert_hidden": 432, "expert_heads": 6, "expert_layers": 8,
    "chunk_size": 50, "n_action_steps": 50,
}


def _time(fn: Callable[[], object], repeats: int, device: str) -> float:
    """Median seconds of `fn` over `repeats` runs after one warm-up."""
    fn()
    times = []
    for _ in range(repeats):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=["tiny", "smolvlm"], default="tiny")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--prompt_tokens", type=int, default=48)
    parser.add_argument("--new_tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--data", type=Path, default=None,
                        help="a dataset with real-size video: time the training frames instead (see above)")
    parser.add_argument("--data_steps", type=int, default=None,
                        help="with --data: training steps per run (20; with --breakdown 150)")
    parser.add_argument("--breakdown", action="store_true",
                        help="with --data: time each phase of the default `steerable train` on DIR (see above)")
    parser.add_argument("--recipe", default="hierarchical", help="with --breakdown: the recipe trained")
    parser.add_argument("--auto_threads", action="store_true",
                        help="with --breakdown: decode training frames with FFmpeg's automatic thread counts "
                             "(decoder and RGB conversion), as before #35")
    parser.add_argument("--share_images", action="store_true",
                        help="with --breakdown: the training datasets share one image cache (a proposed change "
                             "to policy/data.py: the blend's and the action component's each decode every episode)")
    parser.add_argument("--processes", default=None,
                        help="e.g. 1,2: time `steerable train` under torchrun on that many processes (see above)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.processes:
        processes_main([int(n) for n in args.processes.split(",")], args.data_steps or 60, args.batch_size)
        return
    if args.data is not None and args.breakdown:
        breakdown_main(args.data, args.data_steps or 150, args.recipe, args.auto_threads, args.share_images)
        return
    if args.data is not None:
        frames_main(args.data, args.data_steps or 20)
        return
    torch.manual_seed(0)
    vocab = 512 if args.size == "tiny" else 49280
    extra = SMOLVLM if args.size == "smolvlm" else {}
    cfg = PolicyConfig(cameras=["observation.images.top", "observation.images.wrist"], state_dim=4, action_dim=4,
                       **extra)  # type: ignore[arg-type]
    backbone, size = build_backbone(cfg, vocab)
    model = HierarchicalPolicy(cfg, backbone).to(args.device)
    dtype = torch.bfloat16 if args.device.startswith("cuda") else torch.float32
    params = sum(p.numel() for p in model.parameters())
    b, L, dev = args.batch_size, args.prompt_tokens, args.device

    def batch(n: int) -> dict[str, torch.Tensor]:
        labels = torch.full((n, L), -100)
        labels[: n // 2, L // 2:] = torch.randint(3, vocab, (n // 2, L - L // 2))
        return {
            "images": torch.rand(n, 2, 3, size, size, device=dev) * 2 - 1,
            "state": torch.rand(n, 4, device=dev) * 2 - 1,
            "input_ids": torch.randint(3, vocab, (n, L), device=dev),
            "attention_mask": torch.ones(n, L, dtype=torch.long, device=dev),
            "labels": labels.to(dev),
            "predict_actions": (torch.arange(n) >= n // 2).to(dev),
            "actions": torch.randn(n, cfg.chunk_size, 4, device=dev),
            "action_mask": torch.ones(n, cfg.chunk_size, 4, dtype=torch.bool, device=dev),
        }

    train_batch = batch(b)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=dev.startswith("cuda"))

    def step() -> None:
        with autocast:
            out = model(train_batch)
        optimizer.zero_grad()
        out["loss"].backward()
        optimizer.step()

    step_s = _time(step, args.repeats, dev)
    model.eval()
    one = batch(1)
    gen = {cache: GenerationConfig(max_new_tokens=args.new_tokens, use_cache=cache) for cache in (True, False)}

    def generate(cache: bool) -> Callable[[], object]:
        def run() -> object:
            with torch.no_grad(), autocast:
                return generate_ids(model, one["images"], one["state"], one["input_ids"], one["attention_mask"],
                                    gen[cache], eos_id=-1)
        return run

    cached_s = _time(generate(True), args.repeats, dev)
    uncached_s = _time(generate(False), args.repeats, dev)

    def chunk() -> object:
        with autocast:
            return model.sample_actions(one["images"], one["state"], one["input_ids"], one["attention_mask"])

    chunk_s = _time(chunk, args.repeats, dev)
    rows = [
        ("train step", f"batch {b}, {L} text tokens", f"{1 / step_s:.2f} steps/s", f"{step_s * 1000:.0f} ms"),
        ("generate, KV cache", f"{args.new_tokens} new tokens", f"{args.new_tokens / cached_s:.0f} tokens/s",
         f"{cached_s * 1000:.0f} ms"),
        ("generate, recompute", f"{args.new_tokens} new tokens", f"{args.new_tokens / uncached_s:.0f} tokens/s",
         f"{uncached_s * 1000:.0f} ms"),
        ("action chunk", f"{cfg.chunk_size} steps, {cfg.flow_steps} flow steps", f"{1 / chunk_s:.1f} chunks/s",
         f"{chunk_s * 1000:.1f} ms"),
    ]
    print(f"policy speed: {args.size} ({params / 1e6:.1f} M parameters), {dev}, {dtype}, "
          f"{torch.get_num_threads()} threads")
    print(f"{'what':<22}{'shape':<28}{'rate':>18}{'median':>12}")
    for what, shape, rate, median in rows:
        print(f"{what:<22}{shape:<28}{rate:>18}{median:>12}")
    print(f"RESULT size={args.size} device={dev} params_m={params / 1e6:.1f} train_steps_per_s={1 / step_s:.2f} "
          f"tokens_per_s_cache={args.new_tokens / cached_s:.0f} "
          f"tokens_per_s_nocache={args.new_tokens / uncached_s:.0f} "
          f"kv_speedup={uncached_s / cached_s:.1f} chunk_latency_ms={chunk_s * 1000:.1f}")


# --- --data: the training frames ----------------------------------------------------------------------------

ACTIONS_ONLY = "messages:\n  - {role: user, content: \"${task}\", stream: low_level}\n"
SIDE = 32  # the tiny policy's image size (PolicyConfig.image_size)


def whole_episode(dataset: Any, episode: int, camera: str, timestamps: Sequence[float], size: int) -> torch.Tensor:
    """The trainer's frames before #34: the episode decoded, then resized in one float tensor."""
    return _resize_whole(dataset.decode_frames(episode, camera, list(timestamps)), size)


def _resize_whole(frames: list[np.ndarray], size: int) -> torch.Tensor:
    x = torch.from_numpy(np.stack(frames)).permute(0, 3, 1, 2).float()
    x = F.interpolate(x, size=(size, size), mode="bilinear", antialias=True)
    return x.round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1).contiguous()


def _resize_each(frames: list[np.ndarray], size: int) -> torch.Tensor:
    """`steerable.train.images.resized_frames`'s resize, on frames decoded already."""
    out = torch.empty((len(frames), size, size, 3), dtype=torch.uint8)
    for k, frame in enumerate(frames):
        x = F.interpolate(torch.from_numpy(frame).permute(2, 0, 1)[None].float(), size=(size, size),
                          mode="bilinear", antialias=True)
        out[k] = x[0].round().clamp(0, 255).to(torch.uint8).permute(1, 2, 0)
    return out


def _best(repeats: int, fn: Callable[..., Any], *args: Any) -> tuple[float, Any]:
    """The fastest of `repeats` runs of `fn(*args)` (seconds) and its result."""
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn(*args)
        best = min(best, time.perf_counter() - start)
    return best, out


def _peak_mb(root: Path, before: bool) -> float:
    """In a fresh process: how far episode 0's frames (the first camera) raise the peak resident memory, in
    MB, the trainer's way before #34 (`before`) or now."""
    from steerable.dataset import open_dataset
    from steerable.train.images import resized_frames

    ds = open_dataset(root)
    camera = ds.camera_keys[0]
    times = [float(t) for t in ds.episode_timestamps(0)]
    ds.decode_frames(0, camera, times[:2])  # the decoder's own start-up, outside the figure
    start = _high_water_kb()
    (whole_episode if before else resized_frames)(ds, 0, camera, times, SIDE)
    return (_high_water_kb() - start) / 1024


def _high_water_kb() -> int:
    """This process's peak resident memory (Linux's VmHWM; `ru_maxrss` would carry the parent's peak
    across the exec of a spawned process)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status: the memory columns need Linux")


def _measure(root: Path, recipe: Path, work: Path, steps: int) -> tuple[str, int, dict[str, float]]:
    """(camera size, frames of episode 0, seconds: its decode, its resize in one tensor and frame by
    frame, and `steps` training steps with the trainer's frames before and after #34) for `root`."""
    import steerable.policy.data as policy_data
    from steerable.dataset import open_dataset
    from steerable.policy.settings import TrainConfig
    from steerable.policy.trainer import train
    from steerable.train.images import resized_frames

    ds = open_dataset(root)
    camera = ds.camera_keys[0]
    height, width, _ = ds.features[camera]["shape"]
    times = [float(t) for t in ds.episode_timestamps(0)]
    secs: dict[str, float] = {}
    secs["decode"], decoded = _best(3, ds.decode_frames, 0, camera, times)
    secs["whole"], before = _best(3, _resize_whole, decoded, SIDE)
    secs["each"], after = _best(3, _resize_each, decoded, SIDE)
    assert torch.equal(before, after), "the two resizes must give the same pixels"
    assert torch.equal(after, resized_frames(ds, 0, camera, times, SIDE)), "the trainer's frames are these"
    for name, way in (("peak_mb_whole", True), ("peak_mb_each", False)):  # a fresh process each: a peak stays
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            secs[name] = pool.submit(_peak_mb, root, way).result()
    # Twice each, alternating, the faster kept: the first run of a process pays one-time costs.
    for repeat in range(2):
        for name, fn in (("train_whole", whole_episode), ("train_each", resized_frames)):
            policy_data.resized_frames = fn  # type: ignore[assignment]  # the trainer's frames, for this run
            cfg = TrainConfig(dataset=root, output_dir=work / f"{name}{repeat}", recipe=str(recipe), steps=steps,
                              eval_every=10 * steps, save_every=10 * steps, eval_fraction=0.0, threads=1,
                              progress=False)
            secs[name] = min(secs.get(name, float("inf")), _best(1, train, cfg)[0])
    policy_data.resized_frames = resized_frames
    return f"{width}x{height}", len(times), secs


def frames_main(real: Path, steps: int) -> None:
    from steerable.synthetic import generate_synthetic

    torch.set_num_threads(1)
    rows, result = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        synthetic = generate_synthetic(Path(tmp) / "sim", episodes=4, cameras=("top", "wrist"), difficulty="easy")
        recipe = Path(tmp) / "actions.yaml"
        recipe.write_text(ACTIONS_ONLY)
        for label, root in (("synthetic", synthetic), ("real", real)):
            size, n, secs = _measure(root, recipe, Path(tmp) / label, steps)
            rows.append((f"{label} {size}", n, secs))
            result.update({f"{label}_{k}_ms": secs[k] / n * 1000 for k in ("decode", "whole", "each")})
            result.update({f"{label}_{k}_s": secs[k] for k in ("train_whole", "train_each")})
            result.update({f"{label}_{k}": secs[k] for k in ("peak_mb_whole", "peak_mb_each")})
    print(f"training frames: episode 0 of each dataset, resized to {SIDE} px (ms a frame); {steps} steps of "
          "`steerable train` (tiny, batch 32 + 32, one thread, every episode decoded on first use)")
    print(f"{'dataset':<20}{'frames':>7}{'decode':>8}{'resize, one tensor':>20}{'resize, each':>14}"
          f"{'memory, before':>16}{'after':>8}{'train, before':>15}{'after':>8}")
    for name, n, secs in rows:
        ms = {k: secs[k] / n * 1000 for k in ("decode", "whole", "each")}
        print(f"{name:<20}{n:>7}{ms['decode']:>8.2f}{ms['whole']:>20.2f}{ms['each']:>14.2f}"
              f"{secs['peak_mb_whole']:>13.0f} MB{secs['peak_mb_each']:>5.0f} MB"
              f"{secs['train_whole']:>14.1f}s{secs['train_each']:>7.1f}s")
    print("RESULT " + " ".join(f"{k}={v:.2f}" for k, v in result.items()))


# --- --breakdown: where a `steerable train` step's time goes ------------------------------------------------

# Phases charged to the innermost one running (exclusive time); inside an absorbing phase (held-out
# evaluation, checkpoint) everything counts to it, so its collation or forward stays out of the step's.
PHASES = {
    "sample": "sampling: recipe render, actions, state",
    "decode": "  decoding frames (PyAV, to RGB)",
    "resize": "  resizing them to the policy's size",
    "collate": "collation",
    "processor": "tokenization (Processor.training_batch)",
    "forward": "forward",
    "backward": "backward",
    "optimizer": "grad clip + AdamW + zero_grad",
    "scheduler": "lr scheduler",
    "average": "weight average",
    "checks": "loss checks",
    "log": "logs.jsonl",
    "other": "the loop itself",
}
ABSORBING = {"evaluate": "held-out evaluation", "save": "checkpoint writing", "setup": "setup before step 1"}


class _Usage:
    """Wall time, user and system CPU, voluntary and involuntary context switches (whole process, all
    threads), as one array so that usage adds and subtracts."""

    @staticmethod
    def now() -> np.ndarray:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return np.array([time.perf_counter(), r.ru_utime, r.ru_stime, r.ru_nvcsw, r.ru_nivcsw])


class Breakdown:
    """Monkeypatched timers around the trainer's calls; usage is charged per (window, phase), where the
    window is "first" while training episodes are still being decoded and "steady" after."""

    def __init__(self) -> None:
        self.usage: dict[tuple[str, str], np.ndarray] = {}
        self.stack: list[str] = []
        self.mark = _Usage.now()
        self.window = "first"
        self.step_window: list[str] = []  # the window of each step, in order
        self.last_decode_step = 0  # the last step that decoded a training episode (1-based; 0: setup)
        self.frames_decoded = 0
        self.decoded: dict[str, list[int]] = {}  # dataset role -> episodes it decoded, in order
        self.undo: list[tuple[Any, str, Any]] = []

    # Charging.
    def _charge(self) -> None:
        now = _Usage.now()
        phase = self.stack[-1] if self.stack else "other"
        key = (self.window if phase not in ABSORBING else "once", phase)
        self.usage[key] = self.usage.get(key, 0) + (now - self.mark)
        self.mark = now

    def _enter(self, phase: str) -> bool:
        if any(p in ABSORBING for p in self.stack):
            return False
        self._charge()
        self.stack.append(phase)
        return True

    def _leave(self) -> None:
        self._charge()
        self.stack.pop()

    def step_starts(self) -> None:
        """Called as the trainer asks for a step's batch: the previous step ends here."""
        self._charge()
        if self.stack == ["setup"]:  # the first step: what came before was setup
            self.stack.pop()
        steps = len(self.step_window)
        if steps and self.window == "first" and steps > self.last_decode_step:
            self.window = "steady"  # a whole step went by without decoding a training episode
        self.step_window.append(self.window)

    # Patching.
    def wrap(self, owner: Any, name: str, phase: str) -> None:
        original = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            entered = self._enter(phase)
            try:
                return original(*args, **kwargs)
            finally:
                if entered:
                    self._leave()

        self.undo.append((owner, name, original))
        setattr(owner, name, timed)

    def restore(self) -> None:
        for owner, name, original in reversed(self.undo):
            setattr(owner, name, original)
        self.undo.clear()

    def install(self) -> None:
        import steerable.policy.data as policy_data
        import steerable.policy.trainer as trainer
        from steerable.dataset.lerobot import LeRobotDataset
        from steerable.policy.averaging import WeightAverage
        from steerable.policy.loss_checks import LossChecks
        from steerable.policy.model import HierarchicalPolicy
        from steerable.policy.processor import Processor

        self.wrap(policy_data.PolicyDataset, "__getitem__", "sample")
        self.wrap(policy_data, "resized_frames", "resize")
        self.wrap(LeRobotDataset, "decode_frames", "decode")
        self.wrap(trainer, "collate", "collate")
        self.wrap(Processor, "training_batch", "processor")
        self.wrap(HierarchicalPolicy, "forward", "forward")
        self.wrap(torch.Tensor, "backward", "backward")
        self.wrap(torch.nn.utils, "clip_grad_norm_", "optimizer")
        self.wrap(torch.optim.AdamW, "step", "optimizer")
        self.wrap(torch.optim.AdamW, "zero_grad", "optimizer")
        self.wrap(torch.optim.lr_scheduler.LambdaLR, "step", "scheduler")
        self.wrap(WeightAverage, "update", "average")
        self.wrap(LossChecks, "step", "checks")
        self.wrap(trainer, "_log", "log")
        self.wrap(trainer, "_evaluate", "evaluate")
        self.wrap(trainer, "_save", "save")
        self._watch_decodes(policy_data.PolicyDataset)
        self._watch_steps(trainer)

    def _watch_decodes(self, cls: Any) -> None:
        """Which dataset decoded which episode, and when: the first pass lasts while training episodes are
        decoded (the held-out ones are decoded at setup, for the text cases, and at evaluation)."""
        original = cls._episode_images

        def watched(data: Any, episode: int) -> Any:
            fresh = episode not in data._images
            frames = original(data, episode)
            if fresh:
                role = "held-out" if "evaluate" in self.stack or not self.step_window else (
                    "blend" if data.component is None else f"component {data.component}")
                self.decoded.setdefault(role, []).append(episode)
                self.frames_decoded += sum(len(v) for v in frames.values())
                if role != "held-out":
                    self.last_decode_step = len(self.step_window)
            return frames

        self.undo.append((cls, "_episode_images", original))
        cls._episode_images = watched

    def _watch_steps(self, trainer: Any) -> None:
        original = trainer._batches

        def batches(*args: Any, **kwargs: Any) -> Any:
            inner = original(*args, **kwargs)
            while True:
                self.step_starts()
                yield next(inner)

        self.undo.append((trainer, "_batches", original))
        trainer._batches = batches

    def finish(self) -> None:
        self._charge()

    def total(self, window: str) -> np.ndarray:
        out = np.zeros(5)
        for (w, _), u in self.usage.items():
            if w == window:
                out = out + u
        return out


def processes_main(counts: list[int], steps: int, batch: int) -> None:
    """`--processes`: the same training on each number of processes, one after the other (see above)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    every = max(1, steps // 4)
    with tempfile.TemporaryDirectory() as tmp:
        ds = Path(tmp) / "ds"
        subprocess.run([sys.executable, "-m", "steerable", "make-dataset", "synthetic", "--out", str(ds),
                        "--episodes", "4", "--with_language", "--difficulty", "easy"], check=True, env=env,
                       capture_output=True, timeout=600)
        print(f"steerable train, tiny, synthetic 4 episodes, {steps} steps, batch {batch} (+{batch} low-level) "
              f"per process, CPU ({os.cpu_count()} cores)")
        print(f"{'processes':>9} {'global batch':>13} {'steps/s':>8} {'samples/s':>10}")
        for n in counts:
            out = Path(tmp) / f"run{n}"
            subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(n),
                            "-m", "steerable", "train", "--dataset", str(ds), "--output_dir", str(out),
                            "--steps", str(steps), "--batch_size", str(batch), "--action_batch_size", str(batch),
                            "--log_every", str(every), "--no_progress"], check=True, env=env, capture_output=True,
                           timeout=3600)
            logs = [json.loads(line) for line in (out / "logs.jsonl").read_text().splitlines()]
            rates = [r["steps_per_s"] for r in logs if "steps_per_s" in r][1:]
            plan = logs[0]
            rate = len(rates) / sum(1 / r for r in rates)  # the windows are equally long: a harmonic mean
            samples = rate * (plan["global_batch"] + plan["global_action_batch"])
            print(f"{n:>9} {plan['global_batch']:>13} {rate:>8.2f} {samples:>10.1f}")


def breakdown_main(root: Path, steps: int, recipe: str, auto_threads: bool, share_images: bool) -> None:
    """`steps` steps of the default `steerable train` on `root`, timed by phase (see Breakdown)."""
    import steerable.dataset.video_decode as video_decode
    import steerable.train.images as images
    from steerable.policy.data import PolicyDataset
    from steerable.policy.settings import TrainConfig
    from steerable.policy.trainer import train

    timer = Breakdown()
    if auto_threads:
        timer.undo += [(video_decode, "CONVERT_THREADS", video_decode.CONVERT_THREADS),
                       (images, "DECODE_THREADS", images.DECODE_THREADS)]
        video_decode.CONVERT_THREADS = 0
        images.DECODE_THREADS = None  # type: ignore[assignment]
    if share_images:
        _share_image_cache(PolicyDataset, timer)
    timer.install()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            cfg = TrainConfig(dataset=root, output_dir=Path(tmp) / "ckpt", recipe=recipe, steps=steps, progress=False)
            timer.stack.append("setup")  # popped as the first step asks for its batch
            timer.mark = _Usage.now()
            summary = train(cfg)
            timer.finish()
    finally:
        timer.restore()
    windows = {w: timer.step_window.count(w) for w in ("first", "steady")}
    threads = "FFmpeg's automatic (before #35)" if auto_threads else "one"
    _print_breakdown(root, cfg, summary, timer, windows, f"decoder and RGB conversion threads: {threads}; "
                     f"image cache {'shared' if share_images else 'per dataset'}")


def _share_image_cache(cls: Any, timer: Breakdown) -> None:
    """Every PolicyDataset of the run keeps its decoded frames in one cache (episode -> frames; the
    datasets hold disjoint episodes or the same episode's same frames, and the cache's 4 GiB bound is
    far above a 200-episode dataset's ~180 MB at 32 px)."""
    shared: Any = None
    original = cls.__init__

    def init(data: Any, *args: Any, **kwargs: Any) -> None:
        nonlocal shared
        original(data, *args, **kwargs)
        if shared is None:
            shared = data._images
        data._images = shared

    timer.undo.append((cls, "__init__", original))
    cls.__init__ = init


def _print_breakdown(root: Path, cfg: Any, summary: dict[str, Any], timer: Breakdown, windows: dict[str, int],
                     setting: str) -> None:
    first, steady = windows["first"], windows["steady"]
    eval_every, save_every = cfg.eval_every, cfg.save_every
    print(f"where `steerable train` spends its time: {root}, recipe {cfg.recipe}, {summary['steps']} steps "
          f"(first pass: steps 1-{first}, while training episodes were decoded; steady: the {steady} after); "
          f"torch threads {torch.get_num_threads()}; {setting}")
    print(f"{'phase':<52}{'first ms/step':>14}{'steady ms/step':>15}{'sys s':>8}{'vol. switches':>15}")
    per_phase = {p: [timer.usage.get((w, p), np.zeros(5)) for w in ("first", "steady")] for p in PHASES}
    for phase, label in PHASES.items():
        f, s = per_phase[phase]
        print(f"{label:<52}{f[0] / max(first, 1) * 1000:>14.1f}{s[0] / max(steady, 1) * 1000:>15.1f}"
              f"{f[2] + s[2]:>8.2f}{int(f[3] + s[3]):>15}")
    once = {p: timer.usage.get(("once", p), np.zeros(5)) for p in ABSORBING}
    every = {"evaluate": eval_every, "save": save_every}
    for phase in ("evaluate", "save"):
        u = once[phase]
        print(f"{ABSORBING[phase] + f' (1 run {u[0]:.1f} s, per {every[phase]} steps)':<52}"
              f"{u[0] / every[phase] * 1000:>14.1f}{u[0] / every[phase] * 1000:>15.1f}{u[2]:>8.2f}{int(u[3]):>15}")
    result: dict[str, float] = {"steps": summary["steps"], "first_steps": first, "steady_steps": steady}
    for window, n in (("first", first), ("steady", steady)):
        t = timer.total(window)
        rate = n / t[0] if t[0] else float("nan")
        print(f"{window + ' window':<14} {n:>4} steps in {t[0]:6.1f} s ({rate:.2f} steps/s): user {t[1]:6.1f} s, "
              f"system {t[2]:5.1f} s, {int(t[3])} voluntary + {int(t[4])} involuntary context switches")
        result.update({f"{window}_steps_per_s": rate, f"{window}_user_s": t[1], f"{window}_sys_s": t[2],
                       f"{window}_vcsw": t[3], f"{window}_ivcsw": t[4]})
    decode, resize = per_phase["decode"][0] + per_phase["decode"][1], per_phase["resize"][0] + per_phase["resize"][1]
    frames = max(timer.frames_decoded, 1)
    roles = ", ".join(f"{role} {len(eps)} ({len(eps) - len(set(eps))} again)" for role, eps in timer.decoded.items())
    train_eps = [e for role, eps in timer.decoded.items() if role != "held-out" for e in eps]
    print(f"episodes decoded: {roles}; training episodes decoded more than once: "
          f"{len(train_eps) - len(set(train_eps))}; {timer.frames_decoded} frames (all cameras), decode "
          f"{decode[0] / frames * 1000:.3f} ms + resize {resize[0] / frames * 1000:.3f} ms a frame")
    setup = once["setup"]
    print(f"setup before step 1 (datasets, the held-out text cases' frames): {setup[0]:.1f} s, "
          f"system {setup[2]:.1f} s, {int(setup[3])} voluntary switches")
    if steady:
        # The default run: this setup and first pass, the steady rate for the other steps, and an evaluation
        # and a checkpoint every eval_every / save_every steps.
        default_steps = int(type(cfg).model_fields["steps"].default)
        projected = (setup[0] + timer.total("first")[0]
                     + timer.total("steady")[0] / steady * (default_steps - first)
                     + once["evaluate"][0] * (default_steps // eval_every)
                     + once["save"][0] * (default_steps // save_every))
        print(f"projected default run ({default_steps} steps): {projected / 60:.1f} min")
        result["projected_min"] = projected / 60
    result.update(decode_ms_per_frame=decode[0] / frames * 1000, resize_ms_per_frame=resize[0] / frames * 1000,
                  frames_decoded=timer.frames_decoded, setup_s=setup[0], eval_s=once["evaluate"][0],
                  save_s=once["save"][0], decode_sys_s=decode[2], decode_vcsw=decode[3])
    print("RESULT " + " ".join(f"{k}={v:.0f}" if float(v).is_integer() else f"{k}={v:.3f}" for k, v in result.items()))


if __name__ == "__main__":
    main()
