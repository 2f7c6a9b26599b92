"""The training loop behind `steerable train`: plain torch, CPU or CUDA, resumable.

Per step: a batch of recipe samples -> the processor -> the policy's loss dict -> AdamW with warm-up +
cosine decay (`schedule`: over --steps, or a --time_budget) and gradient clipping (bf16 autocast on CUDA).
Every `eval_every` steps the held-out episodes are scored (losses, and exact match of generated text); every
`save_every` steps a checkpoint is written atomically. The data order is a seeded permutation per epoch, so a
resumed run (automatic when `output_dir` holds a checkpoint) continues with the same batches.

Under torchrun or `accelerate launch` (`steerable.policy.parallel`) each process trains its share of
a global batch of processes x batch_size x grad_accum samples: the order is drawn for the global batch
as one process would, and rank r takes the r-th slice of each micro-batch's part, so N processes step
like one with N times the batch. Rank 0 alone logs, evaluates and writes checkpoints.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader

from steerable.dataset import open_dataset
from steerable.errors import ConfigError, WriteError, explain_os_error, os_cause
from steerable.policy.averaging import TRAINING_WEIGHTS, WeightAverage
from steerable.policy.checkpoint import dataset_provenance, load_optimizer, save_checkpoint
from steerable.policy.data import PolicyDataset, action_components
from steerable.policy.evaluate import exact_match, heldout_losses, text_cases
from steerable.policy.goal_training import goal_phase_of
from steerable.policy.loss_checks import LossChecks
from steerable.policy.parallel import Parallel, launched, share, split
from steerable.policy.preflight import check_dataset, check_language, check_recipe, teaches_text
from steerable.policy.schedule import Schedule
from steerable.policy.settings import TrainConfig
from steerable.policy.setup import build_fresh, resume_from
from steerable.progress import ProgressLine, eta_seconds, format_eta
from steerable.recipes import load_recipe
from steerable.train import collate

__all__ = ["train"]

logger = logging.getLogger(__name__)


def _epoch_batches(n: int, batch_size: int, seed: int, epoch: int) -> list[list[int]]:
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed * 100_003 + epoch)).tolist()
    return [order[i:i + batch_size] for i in range(0, n - batch_size + 1, batch_size)] or [order]


def train(cfg: TrainConfig) -> dict[str, Any]:
    """Train (or resume) and return a summary: steps, final metrics, the last checkpoint's path."""
    if cfg.device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError("--device cuda: no CUDA device is visible to torch; use --device cpu")
    parallel = launched(cfg.parallel)
    device = parallel.start(cfg.device)
    try:
        return _train(cfg, parallel, device)
    finally:
        parallel.close()


def _train(cfg: TrainConfig, parallel: Parallel, device: str) -> dict[str, Any]:
    dataset = open_dataset(cfg.dataset)
    recipe = load_recipe(cfg.recipe)
    check_language(dataset, recipe, cfg.recipe)  # at once: nothing else is worth building then
    recipe_text = Path(recipe.origin).read_text(encoding="utf-8")
    output = Path(cfg.output_dir).expanduser()
    output.mkdir(parents=True, exist_ok=True)
    overrides = cfg.policy.overrides()
    if not cfg.action_batch_size:  # the done head learns its positives from the low-level batch alone
        overrides["done_head"] = False
    built = resume_from(output) or build_fresh(dataset, overrides, cfg.eval_fraction, cfg.seed, cfg.episodes)
    # Before any frame is decoded: features and video files (a missing one used to fail a minute in).
    check_dataset(dataset, built.model.cfg, [*built.train_episodes, *built.eval_episodes],
                  resumed=built.checkpoint is not None)
    if built.checkpoint is not None:
        recipe_text = (built.checkpoint / "recipe.yaml").read_text(encoding="utf-8")
    model, processor = built.model.to(device), built.processor
    model.train()
    if cfg.threads is not None or model.cfg.is_tiny:
        # A tiny model gains nothing from intra-op threads, and on a busy machine they spin-wait.
        torch.set_num_threads(cfg.threads or 1)
    # A resumed run keeps the repeat (the data order depends on it) and the text noise it started with.
    event_repeat = int(built.state.get("event_repeat", cfg.event_repeat))
    train_data = PolicyDataset(dataset, recipe, model.cfg, processor.image_size, built.train_episodes,
                               event_repeat=event_repeat, text_noise=built.state.get("text_noise", cfg.text_noise))
    eval_data = PolicyDataset(dataset, recipe, model.cfg, processor.image_size, built.eval_episodes)
    # Low-level samples are a share of the blend's draws (30 % in `hierarchical`); each step adds
    # `action_batch_size` more, through the action component alone: short prompts, a cheap pass.
    # Global batches (what the data order and a checkpoint count in), each rank's share of a micro-batch.
    parts = parallel.world * cfg.grad_accum
    global_batch = int(built.state.get("global_batch", 0)) or parts * cfg.batch_size
    batch = split(global_batch, parts, f"the checkpoint's global batch ({built.checkpoint})")
    action_global = int(built.state.get("global_action_batch", 0)) or parts * int(
        built.state.get("action_batch_size", cfg.action_batch_size))
    action_batch = split(action_global, parts, f"the checkpoint's global action batch ({built.checkpoint})")
    components = action_components(recipe) if action_batch else []
    action_data = PolicyDataset(dataset, recipe, model.cfg, processor.image_size, built.train_episodes,
                                component=components[0], images_from=train_data) if components else None
    if len(train_data) < global_batch:
        raise ConfigError(f"{len(train_data)} training frames is fewer than the global batch {global_batch} "
                          f"({parallel.world} processes x --batch_size {batch} x --grad_accum {cfg.grad_accum})")
    check_recipe(train_data, recipe, cfg.recipe)
    checks = LossChecks(teaches_text(recipe))
    goal_phase = goal_phase_of(cfg, model, processor, dataset, recipe, built)
    # A resumed run keeps the average it started with; its checkpoint's model holds the average.
    ema_decay = float(built.state.get("ema_decay", cfg.ema_decay if built.checkpoint is None else 0.0))
    stepper = parallel.wrap(_Step(model), device)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    if built.checkpoint is not None:
        load_optimizer(optimizer, built.checkpoint)
        parallel.shard_optimizer(optimizer)
    average = WeightAverage(model, ema_decay) if ema_decay > 0 else None
    if average is not None and built.checkpoint is not None:
        average.resume(built.checkpoint / TRAINING_WEIGHTS)
    # The flow noise and times come from this generator alone, so a resumed run draws what the
    # uninterrupted one would have.
    noise = torch.Generator(device=device).manual_seed(cfg.seed)
    if "noise_rng" in built.state:
        noise.set_state(torch.tensor(built.state["noise_rng"], dtype=torch.uint8))
    if parallel.rank:  # its own draws (rank 0's stream is the checkpoint's), seeded by rank and step
        noise.manual_seed(cfg.seed * 100_003 + parallel.rank * 7_919 + int(built.state.get("step", 0)))
    step = int(built.state.get("step", 0))
    schedule = Schedule(cfg.steps, cfg.warmup_steps, cfg.time_budget, cfg.time_clock,
                        float(built.state.get("time_spent_s", 0.0)))
    provenance = dataset_provenance(dataset)
    log_path = output / "logs.jsonl"
    eval_cases = text_cases((eval_data[i] for i in range(0, len(eval_data), 3)), limit=cfg.eval_text_cases)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.startswith("cuda"))
    shares = (parallel.rank, parallel.world, cfg.grad_accum)
    batches = _batches(train_data, cfg, built.state, global_batch, shares)
    metrics: dict[str, Any] = {}
    bar = _progress(cfg, step, schedule) if parallel.is_main else None
    started, window_start, window_steps = time.perf_counter(), time.perf_counter(), 0
    state = {**built.state, **({"goal_pretrained": True} if goal_phase is not None else {})}
    plan = {"global_batch": global_batch, "processes": parallel.world, "batch_size": batch,
            "grad_accum": cfg.grad_accum, "action_batch_size": action_batch, "global_action_batch": action_global}
    logger.info("global batch %d = %d processes x batch %d x grad_accum %d (+ %d low-level samples per step)",
                global_batch, parallel.world, batch, cfg.grad_accum, action_global)
    if parallel.is_main:
        _log(log_path, {"step": step, **(goal_phase or {}), **plan})
    last = built.checkpoint
    while not schedule.over(step):
        (epoch, index), micro = next(batches)
        optimizer.zero_grad(set_to_none=True)
        if not parallel.everyone(bool(micro)):  # every rank skips a step that left one of them nothing
            continue
        sums, samples, asked = [0.0] * 2 * len(_LOSSES), 0, 0
        for k, part in enumerate(micro):
            extra = _action_batch(action_data, action_global, cfg.seed, step, shares, k)
            # The all-reduce of the gradients happens in the last micro-batch's backward only.
            with parallel.no_sync(stepper, sync=k == len(micro) - 1), parallel.guard():
                with autocast:
                    inputs = processor.training_batch(part, device, augment=True)
                    more = processor.training_batch(extra, device, augment=True) if extra is not None else None
                    loss, out = stepper(inputs, more, noise)
                (loss / len(micro)).backward()
            for acts in (p["predict_actions"] for p in ((inputs, more) if more is not None else (inputs,))):
                samples, asked = samples + len(acts), asked + int(acts.sum())
            sums = [a + b for a, b in zip(sums, _sums(out), strict=True)]
        out = _pooled(sums)
        # Under a time budget every process decays and stops on the same figure: their mean.
        schedule.seen(schedule.elapsed() if cfg.time_budget is None
                      else parallel.total([schedule.elapsed()])[0] / parallel.world)
        final = schedule.over(step + 1)
        # Before the weights change: a step that learns nothing, or a loss that is not a number, stops the run.
        checks.step(step + 1, out, samples, asked, last=final)
        parallel.drop_unreached(params)
        torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
        for group in optimizer.param_groups:
            group["lr"] = cfg.lr * schedule.factor(step)
        optimizer.step()
        step += 1
        if average is not None:
            average.update(step)
        window_steps += 1
        state.update(epoch=epoch, batch_in_epoch=index + 1)
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{out['loss']:.3f}", text=f"{out['text_loss']:.3f}", flow=f"{out['flow_loss']:.3f}")
        if step % cfg.log_every == 0 or final:
            now = time.perf_counter()
            off = {"locate_loss": not model.cfg.locate_key, "check_loss": not model.cfg.step_check,
                   "goal_loss": not model.learns_goals, "text_tokens": True, "action_values": True}
            pooled = _pooled(parallel.total(sums))  # the whole global batch's losses
            metrics = {"step": step, **{n: v for n, v in pooled.items() if not off.get(n)},
                       "lr": optimizer.param_groups[0]["lr"],
                       "steps_per_s": window_steps / max(now - window_start, 1e-9)}
            if parallel.is_main:
                _log(log_path, metrics)
            window_start, window_steps = now, 0
        if step % cfg.eval_every == 0 or final:
            with _averaged(average), parallel.whole(model, device) as full:
                if full is not None:  # rank 0
                    metrics = _evaluate(full[0], processor, eval_data, eval_cases, cfg, step, batch, device)
                    _log(log_path, metrics)
                    checks.heldout(metrics)
                    if bar is not None:
                        bar.write(_eval_line(metrics))
            parallel.barrier()
        if step % cfg.save_every == 0 or final:
            state.update(noise_rng=noise.get_state().tolist(), train_episodes=built.train_episodes,
                         eval_episodes=built.eval_episodes, seed=cfg.seed, event_repeat=event_repeat,
                         text_noise=train_data.text_noise, ema_decay=ema_decay, time_spent_s=round(schedule.spent, 3),
                         **plan)
            with _averaged(average), parallel.whole(model, device, optimizer) as full:
                if full is not None:
                    last = _save(output, step, last, full[0], processor, recipe_text, optimizer=full[1],
                                 trainer_state=state, trained_on=provenance,
                                 training_weights=average.save_training_weights if average else None)
            parallel.barrier()
    if bar is not None:
        bar.close()
    return {"steps": step, "seconds": time.perf_counter() - started, "checkpoint": str(last),
            "time_budget_ended": step < cfg.steps and schedule.over(step),
            "metrics": metrics, "resumed_from": str(built.checkpoint) if built.checkpoint else None,
            "main": parallel.is_main}


def _save(output: Path, step: int, previous: Path | None, *args: Any, **kwargs: Any) -> Path:
    """`save_checkpoint`, a failed write one line naming the output folder and the checkpoint that stays
    (a full disk used to end the run with a safetensors traceback)."""
    try:
        return save_checkpoint(output, step, *args, **kwargs)
    except OSError as exc:  # our WriteError (the folder commit's) or the `latest` pointer's own
        cause = os_cause(exc)
        reason = explain_os_error(cause, paths=False) if cause is not None else str(exc)
        kept = (f"checkpoints/latest still names {previous.name}, intact: rerun the same command to resume from it"
                if previous is not None else "no checkpoint was written")
        raise WriteError(f"could not save the step {step} checkpoint in {output}: {reason}; {kept}") from cause


def _averaged(average: WeightAverage | None) -> Any:
    """The block runs on the averaged weights (what checkpoints hold; every rank's: FSDP's are shards)."""
    return average.applied() if average is not None else contextlib.nullcontext()


def _batches(data: PolicyDataset, cfg: TrainConfig, state: dict[str, Any], global_batch: int,
             shares: tuple[int, int, int]) -> Iterator[tuple[tuple[int, int], list[Any]]]:
    """((epoch, global batch index), this rank's collated micro-batches) forever, from where a resumed run
    stopped. A micro-batch that collates to nothing is kept out (a step with none on some rank is skipped)."""
    epoch, skip = int(state.get("epoch", 0)), int(state.get("batch_in_epoch", 0))
    accum = shares[2]
    while True:
        plan = [share(g, shares, k) for g in _epoch_batches(len(data), global_batch, cfg.seed, epoch)[skip:]
                for k in range(accum)]
        # Its own generator: creating the iterator must not draw from the global RNG.
        loader = iter(DataLoader(data, batch_sampler=plan, collate_fn=collate, num_workers=cfg.num_workers,
                                 generator=torch.Generator().manual_seed(cfg.seed + epoch)))
        for i in range(len(plan) // accum):
            micro = [b for b in (next(loader) for _ in range(accum)) if b is not None]
            yield (epoch, skip + i), micro
        epoch, skip = epoch + 1, 0


def _action_batch(data: PolicyDataset | None, size: int, seed: int, step: int, shares: tuple[int, int, int] = (0, 1, 1),
                  k: int = 0) -> Any:
    """This rank's part of micro-batch k of the extra low-level batch of `step` (None without one): a seeded
    permutation per pass over the action frames, so a resumed run draws what the uninterrupted one would have."""
    if data is None or size < 1 or not len(data):
        return None
    per_pass = max(1, len(data) // size)
    epoch, n = divmod(step, per_pass)
    order = torch.randperm(len(data), generator=torch.Generator().manual_seed(seed * 100_003 + 7_919 + epoch)).tolist()
    return collate([data[i] for i in share(order[n * size:(n + 1) * size], shares, k)])


class _Step(torch.nn.Module):
    """One micro-batch's forward, its recipe batch and extra low-level batch in one call (so DDP sees one
    forward per backward): the loss to backpropagate and the loss dict."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, inputs: Any, extra: Any, generator: torch.Generator) -> tuple[torch.Tensor, dict[str, Any]]:
        out = self.model(inputs, generator=generator)
        if extra is None:
            return out["loss"], out
        more = self.model(extra, generator=generator)
        return out["loss"] + more["loss"], _joined(out, more)


# Over micro-batches and ranks a loss is pooled weighted by what it averages, so the logged text, flow and done
# losses of N shares are those of their union; `loss` (what the gradients average) and the rest: a plain mean.
_LOSSES = ("loss", "text_loss", "flow_loss", "done_loss", "locate_loss", "check_loss", "goal_loss")
_WEIGHTS = {"text_loss": "text_tokens", "flow_loss": "action_values", "done_loss": "done_labels"}


def _sums(out: dict[str, Any]) -> list[float]:
    """A share's [loss x weight, weight] per `_LOSSES` name, to be added up (read detached)."""
    weight = {n: float(out[_WEIGHTS[n]]) if n in _WEIGHTS else 1.0 for n in _LOSSES}
    return [v for n in _LOSSES for v in (float(torch.as_tensor(out.get(n, 0.0)).detach()) * weight[n], weight[n])]


def _pooled(sums: list[float]) -> dict[str, Any]:
    out = {n: sums[2 * i] / sums[2 * i + 1] if sums[2 * i + 1] else 0.0 for i, n in enumerate(_LOSSES)}
    return {**out, "text_tokens": sums[3], "action_values": sums[5]}


def _joined(out: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    """The loss dict of a step with its extra low-level batch: the flow loss averaged over both."""
    n, m = int(out["action_values"]), int(more["action_values"])
    flow = (out["flow_loss"] * n + more["flow_loss"] * m) / max(n + m, 1)
    dn, dm = int(out.get("done_labels", 0)), int(more.get("done_labels", 0))
    done = (out.get("done_loss", 0.0) * dn + more.get("done_loss", 0.0) * dm) / max(dn + dm, 1)
    return {**out, "loss": out["loss"].detach() + more["loss"].detach(), "flow_loss": flow,
            "action_values": torch.tensor(n + m), "done_loss": torch.as_tensor(done),
            "done_labels": torch.tensor(dn + dm),
            "locate_loss": (out.get("locate_loss", 0.0) + more.get("locate_loss", 0.0)) / 2,
            "goal_loss": (out.get("goal_loss", 0.0) + more.get("goal_loss", 0.0)) / 2,
            # Only the low-level batch holds the step check's items.
            "check_loss": more.get("check_loss", out.get("check_loss", 0.0))}


def _evaluate(model: Any, processor: Any, data: PolicyDataset, cases: Any, cfg: TrainConfig, step: int, size: int,
              device: str) -> dict[str, Any]:
    out: dict[str, Any] = {"step": step, "eval": True}
    if not len(data):
        return out
    stride = max(1, len(data) // (cfg.eval_batches * size))
    picks = list(range(0, len(data), stride))[: cfg.eval_batches * size]
    batches = (collate([data[i] for i in picks[j:j + size]]) for j in range(0, len(picks), size))
    out.update({f"eval_{k}": v for k, v in heldout_losses(model, processor, batches, device).items()})
    out.update({f"eval_{k}": v for k, v in exact_match(model, processor, cases, device=device).items()})
    return out


def _eval_line(m: dict[str, Any]) -> str:
    return (f"step {m['step']}: held-out text loss {m.get('eval_text_loss', float('nan')):.3f}, flow loss "
            f"{m.get('eval_flow_loss', float('nan')):.3f}, exact match {m.get('eval_exact_match', float('nan')):.2f} "
            f"(majority {m.get('eval_majority_baseline', float('nan')):.2f}, {m.get('eval_cases', 0)} cases)"
            + (f", locate loss {m['eval_locate_loss']:.4f}" if "eval_locate_loss" in m else "")
            + (f", goal loss {m['eval_goal_loss']:.4f}" if "eval_goal_loss" in m else ""))


def _log(path: Path, record: dict[str, Any]) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")


def _progress(cfg: TrainConfig, step: int, schedule: Schedule) -> Any:
    if not cfg.progress:
        return None
    if not sys.stderr.isatty():  # a pipe or a log: whole lines, not a bar redrawn with carriage returns
        return _StepLines(cfg.steps, step, schedule)
    from tqdm import tqdm

    return tqdm(total=cfg.steps, initial=step, desc="train", file=sys.stderr, dynamic_ncols=True)


class _StepLines(ProgressLine):
    """`train: steps 300/1000, loss 1.234, ..., ETA 95 s` on stderr every 30 s and at the end (tqdm's
    calls, for a run without a terminal)."""

    def __init__(self, total: int, initial: int, schedule: Schedule) -> None:
        super().__init__("train", total - initial, unit="steps")
        self.initial, self.postfix, self.schedule = initial, "", schedule
        self.__enter__()

    def update(self, n: int = 1) -> None:
        self.advance(n)

    def set_postfix(self, **values: str) -> None:
        self.postfix = "".join(f", {name} {value}" for name, value in values.items())

    def write(self, line: str) -> None:
        print(line, file=self.stream, flush=True)

    def close(self) -> None:
        self.__exit__(None, None, None)

    def text(self) -> str:
        done, elapsed = self.done, max(time.monotonic() - self.started_at, 1e-6)
        eta = self.schedule.sooner_end(eta_seconds(done, self.total, elapsed))
        return (f"train: steps {self.initial + done}/{self.initial + self.total}{self.postfix}, "
                f"{done / elapsed:.2f} steps/s, ETA {format_eta(eta)}")
