"""An exponential moving average of the trained weights: what a checkpoint runs with.

The last iterate of a small flow policy trained for a few thousand steps carries the noise of its
last batches; the low level's precision (a cube released 1 cm outside its bin) varied with it from
one training to the next. The average is what `model.safetensors` holds, so every reader of a
checkpoint (the runtime, LeRobot, the hub card) gets it; the weights the optimizer moves are kept
beside it (`training_weights.safetensors`) for a resumed run, which then continues exactly.

The decay warms up, (1 + step) / (10 + step) capped at `decay`, so the first steps' random weights
fade out quickly instead of weighing on the average for the whole run.

Under FSDP (`--parallel fsdp`) a parameter is a DTensor of which each rank holds a shard: each rank
averages its own shards (the same element-wise update, so the same average as one process), the
average enters the shards for evaluation and checkpoints (which gather them like the weights), and
the whole training weights are gathered there too, for rank 0 to save.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import cast

import torch
from torch.distributed.tensor import DTensor, distribute_tensor

__all__ = ["TRAINING_WEIGHTS", "WeightAverage"]

TRAINING_WEIGHTS = "training_weights.safetensors"


class WeightAverage:
    """The moving average of `model`'s trainable parameters (decay 0: the average is the weights)."""

    def __init__(self, model: torch.nn.Module, decay: float) -> None:
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"the weight average's decay must be in [0, 1), got {decay}")
        self.decay = decay
        self._params = {name: p for name, p in model.named_parameters() if p.requires_grad}
        self._average = {name: _local(p).clone() for name, p in self._params.items()}
        self._trained: dict[str, torch.Tensor] | None = None  # the weights, while the model holds the average
        self._whole: dict[str, torch.Tensor] | None = None  # the same gathered from the shards (FSDP)

    def update(self, step: int) -> None:
        """Fold the weights after optimizer step `step` (1-based) into the average."""
        keep = min(self.decay, (1 + step) / (10 + step))
        with torch.no_grad():
            averages, weights = list(self._average.values()), [_local(p) for p in self._params.values()]
            torch._foreach_lerp_(averages, weights, 1.0 - keep)

    @contextmanager
    def applied(self) -> Iterator[None]:
        """The model holds the average inside the block (to evaluate or save it), its weights after. Under
        FSDP every rank enters the block: the training weights are gathered (a collective) for rank 0."""
        self._trained = {name: _local(p).clone() for name, p in self._params.items()}
        if any(isinstance(p, DTensor) for p in self._params.values()):
            with torch.no_grad():
                self._whole = {name: _gathered(p) for name, p in self._params.items()}
        self._copy_into_params(self._average)
        try:
            yield
        finally:
            self._copy_into_params(self._trained)
            self._trained = self._whole = None

    def save_training_weights(self, path: Path) -> None:
        """The optimizer's weights (not the average, even inside `applied`) to `path`, for a resumed run."""
        from safetensors.torch import save_file

        weights = self._whole or self._trained or {name: p.detach() for name, p in self._params.items()}
        save_file({name: w.cpu().contiguous() for name, w in weights.items()}, str(path))

    def resume(self, path: Path) -> None:
        """Resume from a checkpoint whose model holds the average: the model's current parameters become
        the average and the weights saved at `path` (whole) go back into the model, cut to its shards."""
        from safetensors.torch import load_file

        saved = load_file(str(path))
        missing = sorted(set(self._params) - set(saved))
        if missing:
            raise ValueError(f"{path.name} lacks {len(missing)} trained weights (first: {missing[0]})")
        self._average = {name: _local(p).clone() for name, p in self._params.items()}
        self._copy_into_params({name: _shard(saved[name], p) for name, p in self._params.items()})

    def _copy_into_params(self, values: dict[str, torch.Tensor]) -> None:
        """`values` (this rank's shards under FSDP) into the parameters."""
        with torch.no_grad():
            for name, p in self._params.items():
                local = _local(p)
                local.copy_(values[name].to(local.device, local.dtype))


def _local(param: torch.Tensor) -> torch.Tensor:
    """The part of `param` this process holds: its shard under FSDP (a view, so writes reach the model)."""
    return cast(DTensor, param.detach()).to_local() if isinstance(param, DTensor) else param.detach()


def _gathered(param: torch.Tensor) -> torch.Tensor:
    """`param` whole on the CPU: an FSDP parameter's shards gathered from every rank (a collective)."""
    return (cast(DTensor, param.detach()).full_tensor() if isinstance(param, DTensor) else param.detach()).cpu()


def _shard(whole: torch.Tensor, param: torch.Tensor) -> torch.Tensor:
    """This rank's shard of `whole` for an FSDP parameter (sliced here, no collective); `whole` otherwise."""
    if not isinstance(param, DTensor):
        return whole
    mesh = param.device_mesh
    return distribute_tensor(whole.to(mesh.device_type), mesh, param.placements, src_data_rank=None).to_local()
