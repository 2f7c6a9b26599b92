"""The moving average of the trained weights (`steerable.policy.averaging`): its arithmetic, the swap in
and out of the model, and the resume that continues it exactly."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from steerable.policy.averaging import WeightAverage


def _net() -> torch.nn.Module:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    net[0].bias.requires_grad_(False)  # a frozen parameter is not averaged
    return net


def _step(net: torch.nn.Module, k: int) -> None:
    with torch.no_grad():
        for p in net.parameters():
            if p.requires_grad:
                p.add_(0.1 * (k + 1))


def test_the_average_follows_the_warmed_up_decay() -> None:
    net = _net()
    average = WeightAverage(net, 0.9)
    expected = {n: p.detach().clone() for n, p in net.named_parameters() if p.requires_grad}
    for step in range(1, 40):
        _step(net, step)
        average.update(step)
        keep = min(0.9, (1 + step) / (10 + step))
        for n, p in net.named_parameters():
            if p.requires_grad:
                expected[n] = keep * expected[n] + (1 - keep) * p.detach()
    last = {n: p.detach().clone() for n, p in net.named_parameters()}
    with average.applied():
        for n, p in net.named_parameters():
            if p.requires_grad:
                assert torch.allclose(p, expected[n], atol=1e-5)
                assert not torch.allclose(p, last[n])  # the average, not the last weights


def test_applied_swaps_the_average_in_and_the_weights_back_exactly(tmp_path: Path) -> None:
    from safetensors.torch import load_file

    net = _net()
    average = WeightAverage(net, 0.99)
    for step in range(1, 20):
        _step(net, step)
        average.update(step)
    weights = {n: p.detach().clone() for n, p in net.named_parameters()}
    with average.applied():
        inside = {n: p.detach().clone() for n, p in net.named_parameters()}
        average.save_training_weights(tmp_path / "w.safetensors")
    assert not torch.equal(inside["1.weight"], weights["1.weight"])
    assert torch.equal(inside["0.bias"], weights["0.bias"])  # frozen: never averaged
    assert all(torch.equal(p, weights[n]) for n, p in net.named_parameters())
    saved = load_file(str(tmp_path / "w.safetensors"))
    assert "0.bias" not in saved
    assert all(torch.equal(saved[n], weights[n]) for n in saved)  # the weights, not the average


def test_a_resumed_average_continues_as_the_uninterrupted_one(tmp_path: Path) -> None:
    straight, interrupted = _net(), _net()
    a, b = WeightAverage(straight, 0.95), WeightAverage(interrupted, 0.95)
    for step in range(1, 11):
        for net, avg in ((straight, a), (interrupted, b)):
            _step(net, step)
            avg.update(step)
    # What a checkpoint holds: the average as the model, the weights beside it.
    with b.applied():
        b.save_training_weights(tmp_path / "w.safetensors")
        checkpoint = {n: p.detach().clone() for n, p in interrupted.named_parameters()}
    resumed = _net()
    with torch.no_grad():
        for n, p in resumed.named_parameters():
            p.copy_(checkpoint[n])
    c = WeightAverage(resumed, 0.95)
    c.resume(tmp_path / "w.safetensors")
    for step in range(11, 21):
        for net, avg in ((straight, a), (resumed, c)):
            _step(net, step)
            avg.update(step)
    assert all(torch.equal(p, q) for p, q in zip(straight.parameters(), resumed.parameters(), strict=True))
    with a.applied(), c.applied():
        assert all(torch.allclose(p, q, atol=1e-7) for p, q in zip(straight.parameters(), resumed.parameters(),
                                                                    strict=True))


def test_bad_decay_and_missing_weights_are_refused(tmp_path: Path) -> None:
    from safetensors.torch import save_file

    with pytest.raises(ValueError, match="decay"):
        WeightAverage(_net(), 1.0)
    save_file({"1.weight": torch.zeros(2, 4)}, str(tmp_path / "w.safetensors"))
    with pytest.raises(ValueError, match="lacks 2 trained weights"):
        WeightAverage(_net(), 0.9).resume(tmp_path / "w.safetensors")
