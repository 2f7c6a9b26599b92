"""Policy speed: train steps/s, text tokens/s with and without the KV cache, action-chunk latency.

Random weights and random inputs (speed does not depend on what the weights learned):

    .venv/bin/python benchmarks/policy.py                    # the tiny default config, CPU
    .venv/bin/python benchmarks/policy.py --size smolvlm --device cuda   # SmolVLM-256M-size backbone

`--threads N` sets torch's CPU threads (1 is fastest for the tiny model on a shared machine).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

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
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
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


if __name__ == "__main__":
    main()
