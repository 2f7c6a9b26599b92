"""One process of a data-parallel `steerable train`: the launcher's environment, the process group, DDP.

torchrun and `accelerate launch` start one process per device and tell each its place through the
environment (RANK, WORLD_SIZE, LOCAL_RANK, and MASTER_ADDR/MASTER_PORT for the rendezvous). Without
them the run is one process and nothing here touches torch.distributed. When a process dies, the
launcher stops the others; the process group's timeout only bounds a collective that would otherwise
wait for ever (a peer that hangs rather than dies).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from steerable.errors import ConfigError, SteerableError

__all__ = ["TIMEOUT", "Parallel", "launched", "share", "split"]

# Long enough for rank 0's held-out evaluation and checkpoint of a SmolVLM-size policy while the
# others wait at a barrier; a dead peer is noticed by the launcher (or by gloo's closed socket) at once.
TIMEOUT = timedelta(minutes=30)
# What gloo and NCCL raise (as a RuntimeError, from DDP's reducer) when a peer's connection goes away.
_LOST = re.compile(r"gloo|nccl|Connection (closed|reset)|Broken pipe", re.IGNORECASE)


@dataclass(frozen=True)
class Parallel:
    """This process's place: `rank` of `world`, `local_rank` on its machine (its GPU index)."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        """Rank 0: the one that logs, evaluates and writes checkpoints."""
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.world > 1

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
        """`module` under DDP (gradients averaged over the ranks in backward), or as is on one process.
        Unused parameters are searched for: a step's batches need not reach every head."""
        if not self.active:
            return module
        ids = [torch.device(device).index] if device.startswith("cuda") else None
        return torch.nn.parallel.DistributedDataParallel(module, device_ids=ids, find_unused_parameters=True)

    @staticmethod
    def no_sync(module: torch.nn.Module, sync: bool) -> Any:
        """A block whose backward skips the gradient all-reduce unless `sync` (gradient accumulation)."""
        if sync or not isinstance(module, torch.nn.parallel.DistributedDataParallel):
            return contextlib.nullcontext()
        return module.no_sync()

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


def launched() -> Parallel:
    """This process's place from the launcher's environment (one process without one)."""
    try:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        rank = int(os.environ.get("RANK", "0"))
        local = int(os.environ.get("LOCAL_RANK", str(rank)))
    except ValueError as exc:
        raise ConfigError(f"RANK, WORLD_SIZE and LOCAL_RANK must be whole numbers: {exc}") from exc
    if world < 1 or not 0 <= rank < world:
        raise ConfigError(f"RANK {rank} of WORLD_SIZE {world}: not a place in the job")
    return Parallel(rank, world, local)


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
