"""Random-shift augmentation (`--policy.image_shift`): training images move by whole pixels with their
edges repeated, only in training steps, and a shift the image cannot hold is refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from policy_helpers import TINY_FLAGS, batch_of, build, find, items, one_thread  # noqa: F401  (autouse fixture)
from steerable.cli.main import main
from steerable.dataset import open_dataset
from steerable.errors import ConfigError
from steerable.policy import processor as processor_module
from steerable.policy.config import PolicyConfig
from steerable.policy.processor import shift_images


@pytest.fixture
def root(two_annotated_episodes: Path) -> Path:
    return two_annotated_episodes


def test_a_shift_moves_the_picture_by_whole_pixels_and_repeats_its_edges() -> None:
    side, pixels = 9, 2
    images = torch.zeros(3, 2, 3, side, side)
    images[..., 4, 4] = 1.0  # one bright pixel in the middle of every image
    images[..., :, 0] = -0.5  # and a left edge column, which a shift to the right repeats
    draws = torch.randint(0, 2 * pixels + 1, (2, 6), generator=torch.Generator().manual_seed(7)).tolist()
    shifted = shift_images(images, pixels, generator=torch.Generator().manual_seed(7))
    assert shifted.shape == images.shape
    for i, (x, y) in enumerate(zip(*draws, strict=True)):
        picture = shifted.reshape(6, 3, side, side)[i, 0]
        row, col = divmod(int(picture.argmax()), side)
        assert (row, col) == (4 + pixels - y, 4 + pixels - x)  # moved, not blurred: one pixel, full value
        assert float(picture.max()) == 1.0 and int((picture == 1.0).sum()) == 1
        uncovered = pixels - x  # columns the move to the right uncovered: copies of the edge column
        if uncovered > 0:
            assert torch.equal(picture[:, :uncovered + 1], picture[:, :1].expand(side, uncovered + 1))
    assert torch.equal(shift_images(images, 0), images)


def test_training_batches_are_shifted_and_observations_are_not(root: Path) -> None:
    ds = open_dataset(root)
    built = build(ds, image_shift=4)
    proc, data = built.processor, items(ds, built)
    raw = batch_of(data, find(data, "actions", 4))
    plain, moved = proc.training_batch(raw), proc.training_batch(raw, augment=True)
    assert not torch.equal(plain["images"], moved["images"])
    assert torch.equal(proc.observation(raw)["images"], plain["images"])  # what inference sees: unshifted
    assert torch.equal(plain["state"], moved["state"]) and torch.equal(plain["actions"], moved["actions"])
    unshifted = build(ds).processor.training_batch(raw, augment=True)
    assert torch.equal(unshifted["images"], plain["images"])  # the default: off


def test_train_shifts_every_training_batch(root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    real = processor_module.shift_images

    def recording(images: torch.Tensor, pixels: int, generator: Any = None) -> torch.Tensor:
        seen.append(pixels)
        return real(images, pixels, generator)

    monkeypatch.setattr(processor_module, "shift_images", recording)
    argv = ["train", "--dataset", str(root), "--output_dir", str(tmp_path / "run"), "--batch_size", "4",
            "--action_batch_size", "4", "--steps", "2", "--eval_every", "100", "--no_progress", *TINY_FLAGS,
            "--policy.image_shift", "3"]
    assert main(argv) == 0
    assert seen and set(seen) == {3}
    saved = json.loads(next((tmp_path / "run" / "checkpoints").glob("step_*/config.json")).read_text())
    assert saved["image_shift"] == 3  # kept with the checkpoint, unused at run time


@pytest.mark.parametrize("shift", [-1, 8])
def test_a_shift_the_image_cannot_hold_is_refused(shift: int) -> None:
    with pytest.raises(ConfigError, match=rf"policy.image_shift must be between 0 and 7 .*got {shift}"):
        PolicyConfig(image_size=16, image_shift=shift)
