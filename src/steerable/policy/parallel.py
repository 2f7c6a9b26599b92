"""One process of a data-parallel `steerable train`: the launcher's environment, the process group, DDP.

torchrun and `accelerate launch` start one process per device and tell each its place through the
environment (RANK, WORLD_SIZE, LOCAL_RANK, and MASTER_ADDR/MASTER_PORT for the rendezvous). Without
them the run is one process and nothing here touches torch.distributed. When a process dies, the
launcher stops the others; the process group's timeout only bounds a collective that would otherwise
wait for ever (a peer that hangs rather than dies).

With `--parallel fsdp` the model is sharded instead of copied (FSDP2's `fully_shard`): each of the
backbone's transformer layers is its own shard group, gathered for its forward and backward only, and
the rest of the model is one group at the root. Evaluation and checkpoints need the model whole: every
rank gathers the shards (a collective), rank 0 loads them into an unsharded copy it keeps on the CPU
and evaluates or writes that, so a checkpoint is the one a single process writes (and the optimizer
state is gathered the same way, for a resume on any number of processes, sharded or not).
"""

from __future__ import annotations

import contextlib
import copy
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, cast

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor, distribute_tensor

from steerable.errors import ConfigError, SteerableError

__all__ = ["TIMEOUT", "Parallel", "launched", "share", "split"]

# Long enough for rank 0's held-out evaluation and checkpoint of a SmolVLM-size policy while the
# others wait at a barrier; a dead peer is noticed by the launcher (or by gloo's closed socket) at once.
TIMEOUT = timedelta(minutes=30)
# The blocks FSDP shards one by one: Hugging Face's transformer layers (text decoder, vision encoder), not
# torch's own (the goal head's reader, run only for the rows that act: sharded alone, its gathers would differ
# between ranks whose batches have none).
_LAYERS = ("DecoderLayer", "EncoderLayer")
# What gloo and NCCL raise (as a RuntimeError, from DDP's reducer) when a peer's connection goes away.
_LOST = re.compile(r"gloo|nccl|Connection (closed|reset)|Broken pipe", re.IGNORECASE)


@dataclass
class Parallel:
    """This process's place: `rank` of `world`, `local_rank` on its machine (its GPU index), and how the
    model is spread over the processes (`mode`: ddp or fsdp)."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0
    mode: str = "ddp"
    _replica: torch.nn.Module | None = field(default=None, repr=False, compare=False)

    @property
    def is_main(self) -> bool:
        """Rank 0: the one that logs, evaluates and writes checkpoints."""
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.world > 1

    @property
    def sharded(self) -> bool:
        return self.active and self.mode == "fsdp"

    def start(self, device: str) -> str:
        """Join the launcher's process group (gloo on CPU, nccl on CUDA); returns this rank's device."""
        if not self.active:
            return device
        backend = "gloo"
        if device.startswith("cuda"):
            device, backend = f"cuda:{self.local_rank}", "nccl"
            torch.cuda.set_device(device)
        if not dist.is_initialized():
            dist.init_process_group(backend, timeout=TIMEOUT)  # env:// from the launcher
        return device

    def wrap(self, module: torch.nn.Module, device: str) -> torch.nn.Module:
        """`module` under DDP (gradients averaged over the ranks in backward), sharded by FSDP, or as is on
        one process. Unused parameters are searched for: a step's batches need not reach every head. Build
        the optimizer after this: FSDP replaces the parameters with their shards."""
        if not self.active:
            return module
        if self.sharded:
            from torch.distributed.fsdp import fully_shard

            if self.is_main:  # what evaluation and checkpoints load the gathered weights into
                self._replica = copy.deepcopy(getattr(module, "model", module)).cpu()  # the trainer's step: .model
            for layer in [m for m in module.modules() if type(m).__name__.endswith(_LAYERS)
                          and type(m).__module__.startswith("transformers.")]:
                fully_shard(layer)
            module.register_forward_hook(_reach_every_parameter)  # before FSDP's own: the root still whole
            fully_shard(module)
            return module
        ids = [torch.device(device).index] if device.startswith("cuda") else None
        return torch.nn.parallel.DistributedDataParallel(module, device_ids=ids, find_unused_parameters=True)

    @staticmethod
    def no_sync(module: torch.nn.Module, sync: bool) -> Any:
        """A block whose backward skips the gradient all-reduce unless `sync` (gradient accumulation)."""
        if sync or not isinstance(module, torch.nn.parallel.DistributedDataParallel):
            return contextlib.nullcontext()
        return module.no_sync()

    @contextlib.contextmanager
    def whole(self, model: torch.nn.Module, device: str, optimizer: torch.optim.Optimizer | None = None
              ) -> Iterator[tuple[torch.nn.Module, torch.optim.Optimizer | None] | None]:
        """On rank 0 the model and optimizer whole (None on the others), to evaluate or save: themselves, or
        under FSDP an unsharded copy of the model on `device` and the optimizer's gathered state. Every rank
        enters the block: gathering the shards is a collective."""
        if not self.sharded:
            yield (model, optimizer) if self.is_main else None
            return
        with self.guard(), torch.no_grad():
            weights = {k: _full(v).cpu() for k, v in model.state_dict().items()}
            moments = _FullOptimizer(optimizer) if optimizer is not None else None
        if self._replica is None:
            yield None
            return
        replica = self._replica
        replica.load_state_dict(weights)
        replica.to(device).train(model.training)
        try:
            yield replica, cast(torch.optim.Optimizer, moments)
        finally:
            replica.cpu()

    def drop_unreached(self, params: list[torch.nn.Parameter]) -> None:
        """Under FSDP, no gradient (as DDP and one process leave it) for a parameter no rank's batch reached:
        `_reach_every_parameter` gave it zeros, and AdamW would otherwise decay and move it."""
        if not self.sharded:
            return
        held = [p for p in params if isinstance(p.grad, DTensor)]
        if not held:
            return
        sizes = torch.stack([cast(DTensor, p.grad).to_local().detach().abs().sum().float().cpu() for p in held])
        with self.guard():
            dist.all_reduce(sizes)
        for param, size in zip(held, sizes.tolist(), strict=True):
            if size == 0.0:
                param.grad = None

    def shard_optimizer(self, optimizer: torch.optim.Optimizer) -> None:
        """An optimizer state loaded whole (from any checkpoint) cut to this rank's shards under FSDP."""
        if not self.sharded:
            return
        for param, state in optimizer.state.items():
            if isinstance(param, DTensor):
                for name, value in state.items():
                    if isinstance(value, torch.Tensor) and value.shape == param.shape:
                        state[name] = distribute_tensor(value.to(param.device_mesh.device_type), param.device_mesh,
                                                        param.placements, src_data_rank=None)

    def total(self, values: list[float]) -> list[float]:
        """`values` added up over the ranks (the logged losses of the whole global batch)."""
        if not self.active or not values:
            return values
        t = torch.tensor(values, dtype=torch.float64)
        with self.guard():
            dist.all_reduce(t)
        return [float(v) for v in t.tolist()]

    def everyone(self, ok: bool) -> bool:
        """Whether `ok` holds on every rank (a step some rank has no samples for is skipped by all)."""
        if not self.active:
            return ok
        t = torch.tensor([int(ok)])
        with self.guard():
            dist.all_reduce(t, op=dist.ReduceOp.MIN)
        return bool(t.item())

    def barrier(self) -> None:
        """Wait for every rank (the others wait here while rank 0 evaluates or writes a checkpoint)."""
        if self.active:
            with self.guard():
                dist.barrier()

    def close(self) -> None:
        if self.active and dist.is_initialized():
            dist.destroy_process_group()

    @contextlib.contextmanager
    def guard(self) -> Iterator[None]:
        """A collective that fails because a peer is gone: one line, not gloo's traceback (the launcher
        names the rank that stopped)."""
        try:
            yield
        except (dist.DistError, RuntimeError) as exc:
            if not (isinstance(exc, dist.DistError) or _LOST.search(str(exc))):
                raise
            raise SteerableError(f"rank {self.rank}: another training process stopped ({_first_line(exc)}); "
                                 "the launcher names it, and the same command resumes from the last "
                                 "checkpoint") from exc


def launched(mode: str = "ddp") -> Parallel:
    """This process's place from the launcher's environment (one process without one), `mode` ddp or fsdp."""
    try:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        rank = int(os.environ.get("RANK", "0"))
        local = int(os.environ.get("LOCAL_RANK", str(rank)))
    except ValueError as exc:
        raise ConfigError(f"RANK, WORLD_SIZE and LOCAL_RANK must be whole numbers: {exc}") from exc
    if world < 1 or not 0 <= rank < world:
        raise ConfigError(f"RANK {rank} of WORLD_SIZE {world}: not a place in the job")
    if mode == "fsdp" and world == 1:
        raise ConfigError("--parallel fsdp shards the model over the processes of a launcher (torchrun "
                          "--nproc_per_node N, accelerate launch --num_processes N); this is one process: "
                          "leave it out here")
    return Parallel(rank, world, local, mode)


def split(total: int, parts: int, what: str) -> int:
    """`total` samples (a global batch) shared by `parts` (processes x micro-batches), each's share."""
    if total % parts:
        raise ConfigError(f"{what} is {total} samples, which {parts} (processes x --grad_accum) do not divide; "
                          f"run on a number of processes whose product with --grad_accum divides {total}")
    return total // parts


def share(indices: list[int], shares: tuple[int, int, int], k: int) -> list[int]:
    """Rank r's part of micro-batch k of a global batch of `indices` (shares: rank, world, grad_accum):
    micro-batch k is the k-th 1/grad_accum of the batch, and rank r its r-th 1/world."""
    rank, world, accum = shares
    size = len(indices) // (world * accum)
    return indices[(k * world + rank) * size:(k * world + rank + 1) * size]


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    first = re.sub(r"^\[[^\]]*\.(cc|cpp):\d+\]\s*", "", lines[0]) if lines else type(exc).__name__
    return first.split(". ")[0][:160]  # gloo's "Connection reset by peer", not its source path and advice


def _reach_every_parameter(module: torch.nn.Module, args: Any, out: tuple[torch.Tensor, Any]) -> Any:
    """The step's loss plus zero times every unsharded trainable parameter, so each gets a gradient: FSDP
    reduce-scatters only the gradients a rank has, and a head that one rank's batch skips (no done labels,
    no goal) would make the ranks' collectives differ in size."""
    loss, rest = out
    reached = [p.sum() for p in module.parameters() if p.requires_grad and not isinstance(p, DTensor)]
    return (loss + torch.stack(reached).sum() * 0.0 if reached else loss), rest


def _full(value: Any) -> Any:
    """A tensor whole: a DTensor's shards gathered from every rank (a collective), anything else as is."""
    return value.full_tensor() if isinstance(value, DTensor) else value


class _FullOptimizer:
    """An FSDP optimizer's state with every shard gathered, in `state_dict()`'s form (what checkpoints save)."""

    def __init__(self, optimizer: torch.optim.Optimizer) -> None:
        state = optimizer.state_dict()
        self._state = {**state, "state": {i: {k: _full(v).cpu() for k, v in entry.items()}
                                          for i, entry in state["state"].items()}}

    def state_dict(self) -> dict[str, Any]:
        return self._state
