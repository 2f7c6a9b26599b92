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
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
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
    parser.add_argument("--data_steps", type=int, default=20, help="with --data: training steps per run")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.data is not None:
        frames_main(args.data, args.data_steps)
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
          f"tokens_per_s_cache={args.new_tokens / cached_s:.0f} tokens_per_s_nocache={args.new_tokens / uncached_s:.0f} "
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


if __name__ == "__main__":
    main()
