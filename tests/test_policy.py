"""The policy's masks and losses: what each loss is computed on, what each token can see, padding.

The reference's bugs are each pinned here: a text loss shifted off the target tokens (SmolVLA2's
31-position slice), language tokens that see later ones (a bidirectional language prefix), and a
flow loss averaged over padded steps.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from policy_helpers import batch_of, build, find, items, one_thread  # noqa: F401  (autouse fixture)
from steerable.dataset import open_dataset
from steerable.policy.losses import IGNORE_INDEX, flow_matching_loss, next_token_targets, text_loss
from steerable.policy.masks import block_causal_mask, position_ids
from steerable.policy.processor import text_only
from steerable.train import ChatTokenizer
from train_data import annotate_synthetic


@pytest.fixture(scope="module")
def ds(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("policy") / "ds"
    annotate_synthetic(root, episodes=2)
    return open_dataset(root)


@pytest.fixture(scope="module")
def built(ds: Any) -> Any:
    return build(ds)


def _hand_built(tokenizer: Any) -> tuple[dict[str, Any], list[int], int]:
    """A two-turn sample, its ids, and where the reply starts: found by tokenizing the prompt alone."""
    messages = [{"role": "user", "content": "place the cube"}, {"role": "assistant", "content": "grasp the cube"}]
    prompt = tokenizer.apply_chat_template(messages[:1], tokenize=False, add_generation_prompt=True)
    full = tokenizer.apply_chat_template(messages, tokenize=False)
    assert full.startswith(prompt)
    ids = tokenizer(full, add_special_tokens=False)["input_ids"]
    start = len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
    assert ids[:start] == tokenizer(prompt, add_special_tokens=False)["input_ids"]
    sample = {"messages": [messages], "message_streams": [["high_level"] * 2], "target_message_indices": [[1]]}
    return sample, ids, start


def test_text_loss_scores_exactly_the_reply_tokens_position_by_position(built: Any) -> None:
    tok = built.processor.tokenizer
    sample, ids, start = _hand_built(tok)
    batch = ChatTokenizer(tok, max_length=96)(sample)
    assert batch is not None and batch["input_ids"][0].tolist() == ids
    rows, cols, targets = next_token_targets(batch["labels"])
    # The reply ("grasp the cube", end-of-turn, newline) is ids[start:]; position p predicts token p + 1.
    assert cols.tolist() == list(range(start - 1, len(ids) - 1))
    assert targets.tolist() == ids[start:]
    assert tok.decode(targets.tolist()).startswith("grasp the cube")
    assert set(rows.tolist()) == {0}

    # The same positions through the model: its text loss equals a cross-entropy computed by hand
    # from the full logits of the text positions (after the camera/state prefix).
    model, proc = built.model, built.processor
    obs = proc.observation({"images": {c: torch.zeros(1, 16, 16, 3, dtype=torch.uint8) for c in model.cfg.cameras},
                            "state": torch.zeros(1, 4)})
    enc = model.encode(obs["images"], obs["state"], batch["input_ids"], batch["attention_mask"])
    logits = model.backbone.logits(enc.last[0, enc.prefix_len:])
    by_hand = torch.stack([F.cross_entropy(logits[p], torch.tensor(ids[p + 1]))
                           for p in range(start - 1, len(ids) - 1)])
    loss, count = text_loss(enc.last[:, enc.prefix_len:], batch["labels"], model.backbone.logits)
    assert count == len(ids) - start
    assert torch.allclose(loss, by_hand.mean(), atol=1e-5)
    unshifted = torch.stack([F.cross_entropy(logits[p], torch.tensor(ids[p])) for p in range(start, len(ids))])
    assert not torch.allclose(loss, unshifted.mean(), atol=1e-3)


def test_mask_structure() -> None:
    text = torch.tensor([[1, 1, 1, 0]])
    m = block_causal_mask(2, text)[0, 0]
    assert m.shape == (6, 6)
    assert m[:2, :2].all() and not m[:2, 2:].any()  # the prefix sees itself only
    for q in range(2, 5):
        assert m[q, :2].all()  # text sees the prefix
        assert m[q, 2:q + 1].all() and not m[q, q + 1:].any()  # and no later token
    assert not m[:5, 5].any() and m[5, 5]  # nobody attends to padding; padding sees itself only
    assert position_ids(2, text).tolist() == [[0, 1, 2, 3, 4, 4]]


def test_no_language_token_sees_a_later_one(built: Any, ds: Any) -> None:
    model = built.model
    data = items(ds, built)
    batch = built.processor.training_batch(batch_of(data, find(data, "text")))
    ids = batch["input_ids"]
    n = int(batch["attention_mask"][0].sum())
    enc = model.encode(batch["images"], batch["state"], ids, batch["attention_mask"])
    plen = enc.prefix_len
    for j in (n // 3, n // 2, n - 1):
        changed = ids.clone()
        changed[0, j] = (changed[0, j] + 7) % model.backbone.vocab_size
        other = model.encode(batch["images"], batch["state"], changed, batch["attention_mask"])
        for layer, (a, b) in enumerate(zip(enc.hidden, other.hidden, strict=True)):
            # Everything before token j (the prefix included) is untouched in every layer ...
            assert torch.equal(a[0, : plen + j], b[0, : plen + j]), f"layer {layer}: a token saw token {j}"
        # ... and the change is visible from token j on.
        assert not torch.allclose(enc.last[0, plen + j:plen + n], other.last[0, plen + j:plen + n])


def test_padding_never_enters_a_loss(built: Any, ds: Any) -> None:
    model, proc = built.model, built.processor
    data = items(ds, built)
    text_pos, action_pos = find(data, "text")[0], find(data, "actions")[0]
    pair = proc.training_batch(batch_of(data, [text_pos, action_pos]))
    assert pair["attention_mask"].sum(1).min() < pair["input_ids"].shape[1]  # one sample is padded
    # Padded text and padded chunk steps hold garbage: the losses must not move.
    pair["input_ids"][pair["attention_mask"] == 0] = 5
    pair["action_mask"][1, 2:] = False
    pair["actions"][1, 2:] = 1e6
    both = model(pair, generator=torch.Generator().manual_seed(1))
    text_only_ = model(proc.training_batch(batch_of(data, [text_pos])))
    assert torch.allclose(both["text_loss"], text_only_["text_loss"], atol=1e-5)
    assert int(both["action_values"]) == 2 * model.cfg.action_dim  # only the two real steps count
    assert torch.isfinite(both["flow_loss"]) and float(both["flow_loss"]) < 1e3

    # The flow loss is the mean over real entries only: NaN in a padded entry cannot reach it.
    pred, target = torch.zeros(2, 3, 2), torch.ones(2, 3, 2)
    mask = torch.ones(2, 3, 2, dtype=torch.bool)
    mask[1, 1:] = False
    pred[1, 1:] = float("nan")
    loss, count = flow_matching_loss(pred, target, mask)
    assert count == 8 and loss.item() == 1.0
    # Padding labels are IGNORE_INDEX, so no padded position is scored by the text loss.
    rows, cols, _ = next_token_targets(pair["labels"])
    assert pair["attention_mask"][rows, cols + 1].all()
    assert (pair["labels"][pair["attention_mask"] == 0] == IGNORE_INDEX).all()


def test_samples_train_the_head_their_targets_ask_for(built: Any, ds: Any) -> None:
    data = items(ds, built)
    model, proc = built.model, built.processor
    text = model(proc.training_batch(batch_of(data, find(data, "text", 2))))
    assert int(text["action_values"]) == 0 and float(text["flow_loss"]) == 0.0 and int(text["text_tokens"]) > 0
    actions = model(proc.training_batch(batch_of(data, find(data, "actions", 2))))
    assert int(actions["text_tokens"]) == 0 and float(actions["text_loss"]) == 0.0
    assert int(actions["action_values"]) > 0
    # Text and prefix never see the actions: the text loss of a batch does not depend on them.
    batch = proc.training_batch(batch_of(data, find(data, "text", 1) + find(data, "actions", 1)))
    first = model(batch)["text_loss"]
    batch["actions"] = torch.randn_like(batch["actions"])
    assert torch.equal(model(batch)["text_loss"], first)


def test_tiny_model_overfits_one_batch_in_both_heads(ds: Any) -> None:
    # Capacity, with every input the model can read (the last motion too, off by default with a goal head).
    built = build(ds, motion_input=True)
    model, proc = built.model, built.processor
    data = items(ds, built)
    batch = proc.training_batch(batch_of(data, find(data, "text", 4) + find(data, "actions", 4)))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(300):
        out = model(batch)
        optimizer.zero_grad()
        out["loss"].backward()
        optimizer.step()
    model.eval()
    final = model(batch, generator=torch.Generator().manual_seed(0))
    assert final["text_loss"].item() < 0.05
    rows = batch["predict_actions"].nonzero()[:, 0]
    sampled = model.sample_actions(batch["images"][rows], batch["state"][rows], batch["input_ids"][rows],
                                   batch["attention_mask"][rows], steps=10, generator=torch.Generator().manual_seed(0))
    error = (sampled - batch["actions"][rows]).pow(2)[batch["action_mask"][rows]].mean().item()
    initial = batch["actions"][rows].pow(2)[batch["action_mask"][rows]].mean().item()
    assert error < 0.05 * initial, (error, initial)


def test_text_only_drops_image_blocks() -> None:
    msgs = [{"role": "user", "content": [{"type": "image", "feature": "cam"}, {"type": "text", "text": "hi"}]}]
    assert text_only(msgs) == [{"role": "user", "content": "hi"}]


def test_unknown_setting_is_a_config_error(tmp_path: Path) -> None:
    from steerable.errors import ConfigError
    from steerable.policy.config import PolicyConfig

    with pytest.raises(ConfigError, match="state_mode"):
        PolicyConfig(state_mode="words")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unknown policy setting"):
        PolicyConfig.from_dict({"layers": 3})


@pytest.mark.parametrize("given", ["~/no-such-models/SmolVLM-256M-Instruct", "./no-such-model", "{tmp}/missing"])
def test_a_backbone_folder_that_does_not_exist_is_named(ds: Any, given: str, tmp_path: Path) -> None:
    """Not transformers' 'Repo id must be in the form ...': the folder, expanded, and what to give."""
    from steerable.errors import ConfigError

    value = given.replace("{tmp}", str(tmp_path))
    expanded = str(Path(value).expanduser())
    with pytest.raises(ConfigError, match="no such folder") as caught:
        build(ds, backbone=value)
    message = str(caught.value)
    assert expanded in message and "give 'tiny' or a local model folder" in message
    assert "Repo id" not in message
