"""`HierarchicalPolicy`: backbone + state encoder + action expert, and the loss dict a batch drives.

The backbone sequence is `[camera tokens | state tokens | chat text]` under the block-causal mask
of `masks`. The state tokens read the processor's model state (state, last motion, object offsets).
The action expert reads the backbone's last layers and, beside them (`expert_context`), the model
state as one more token and, at each text position whose word names an object of the dataset's
object description (`steerable.policy.objects`), that object's state: the named objects' positions reach the expert
directly, as the plain baseline needed them (benchmarks/README.md, "bc_baseline.py"), and the text
the backbone writes never depends on them. The text head is scored on the target turns (shift done in
`losses`); the action expert reads the last `expert_layers` backbone layers for samples that carry
actions. A high-level sample (no actions) trains text only, one without a target actions only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from steerable.policy.backbone import Backbone
from steerable.policy.config import PolicyConfig
from steerable.policy.expert import ActionExpert, sample_time
from steerable.policy.goal import OFFSET_GAINS, GoalHead, checks_from_cameras, goal_features, has_goal_head
from steerable.policy.grounding import OBJECT_FEATURES, grounded_layout, object_fields, object_match
from steerable.policy.keypoints import Keypoints, KeypointTokens
from steerable.policy.locate import Locator
from steerable.policy.losses import flow_matching_loss, text_loss
from steerable.policy.masks import block_causal_mask, position_ids
from steerable.policy.objects import RELATION_WIDTH
from steerable.policy.processor import model_state_dim

__all__ = ["Encoded", "HierarchicalPolicy"]


@dataclass
class Encoded:
    """A backbone pass: last hidden state, every layer's states, which keys are real, prefix length."""

    last: torch.Tensor
    hidden: tuple[torch.Tensor, ...]
    valid: torch.Tensor
    prefix_len: int
    cache: Any = None
    # What the expert reads beside the backbone: (B, K, hidden) added at the text positions that name
    # an object, and the model state as one (B, 1, hidden) token; None where the config has neither.
    named: torch.Tensor | None = None
    state_token: torch.Tensor | None = None
    # The locator's estimate of the located state values (B, located), before detaching; None without one.
    located: torch.Tensor | None = None
    # The goal head's (B, P) estimate of where the command ends (before detaching), what the expert reads of it
    # as one (B, 1, hidden) token, and what it came from (`GoalHead.read`, detached: a camera step check's
    # input); None without a goal head.
    goal: torch.Tensor | None = None
    goal_token: torch.Tensor | None = None
    evidence: torch.Tensor | None = None
    # The keypoint net's tokens and places, and the command's (B, N) choice among them; None without.
    keypoints: Keypoints | None = None
    choice: torch.Tensor | None = None


class HierarchicalPolicy(nn.Module):
    """Text head and action expert over one vision-language backbone. Inputs are already normalised."""

    def __init__(self, cfg: PolicyConfig, backbone: Backbone) -> None:
        super().__init__()
        if cfg.action_dim < 1:
            raise ValueError("PolicyConfig.action_dim must be set (from the dataset) before building the model")
        self.cfg = cfg
        self.backbone = backbone
        width = backbone.hidden_size
        if cfg.expert_layers > backbone.num_layers:
            raise ValueError(f"expert_layers={cfg.expert_layers} but the backbone has {backbone.num_layers} layers")
        self.state_bins: nn.Embedding | None = None
        self.state_proj: nn.Linear | None = None
        state_in = model_state_dim(cfg)
        if cfg.state_mode == "bins" and cfg.state_dim:
            self.state_bins = nn.Embedding(cfg.state_bins, width)
            self.state_dim_embed = nn.Parameter(torch.randn(state_in, width) * 0.02)
        elif cfg.state_mode == "projector" and cfg.state_dim:
            self.state_proj = nn.Linear(state_in, width)
        self.expert_state: nn.Linear | None = None
        if cfg.expert_reads_state and cfg.state_mode != "none" and cfg.state_dim:
            self.expert_state = nn.Linear(state_in, width)
        self.done_attn: nn.MultiheadAttention | None = None
        if cfg.done_head:
            heads = cfg.expert_heads if width % cfg.expert_heads == 0 else 1
            self.done_query = nn.Parameter(torch.randn(1, 1, width) * 0.02)
            self.done_norm = nn.LayerNorm(width)
            self.done_attn = nn.MultiheadAttention(width, heads, batch_first=True)
            self.done_out = nn.Sequential(nn.LayerNorm(width), nn.Linear(width, width), nn.GELU(), nn.Linear(width, 1))
        # The step check reads the command's relation (`objects.command_relation`: where the moved object stands
        # from its target) or, from the cameras, the goal head's evidence (`GoalHead.read`; that check is built
        # last, so every other part starts as before), and, with `check_context`, the pooled context.
        self.check_out = self._check_head(RELATION_WIDTH) if cfg.done_head and cfg.step_check else None
        self.object_in: nn.Module | None = None
        grounded = grounded_layout(cfg)
        # With `fine_offsets`, the magnifications of the object description's scales (see `OBJECT_FEATURES`).
        self.fine_scales: tuple[float, ...] = grounded.scales.fine_offsets if grounded and cfg.fine_offsets else ()
        if grounded is not None:
            features = OBJECT_FEATURES + 3 * len(self.fine_scales)
            self.object_in = nn.Sequential(nn.Linear(features, width), nn.GELU(), nn.Linear(width, width))
            self.register_buffer("object_fields", object_fields(cfg, grounded, state_in), persistent=False)
            self.register_buffer("object_match", object_match(cfg, grounded, backbone.vocab_size), persistent=False)
        self.locator: Locator | None = None
        if cfg.locate_key:
            self.locator = Locator(cfg, cfg.cameras.index(cfg.locate_camera), cfg.locate_width)
        self.goal: GoalHead | None = None
        # The state dimensions the actions command: what a goal (the goal head's, a keypoint's place) is in.
        self.register_buffer("pose_index", torch.tensor([s for _, s in cfg.pose_pairs], dtype=torch.long),
                             persistent=False)
        if has_goal_head(cfg):  # from pixels what grounding reads from a state that holds the objects
            self.goal = GoalHead(cfg, width, backbone.vocab_size)
            with torch.no_grad():
                self.goal.embed.weight.copy_(backbone.embed(torch.arange(backbone.vocab_size)))
            self.goal_in = nn.Sequential(nn.Linear(len(cfg.pose_pairs) * (2 + len(OFFSET_GAINS)), width), nn.GELU(),
                                         nn.Linear(width, width))
        self.keypoints = None
        if cfg.keypoints and cfg.cameras:
            pose = len(cfg.pose_pairs) if cfg.state_mode != "none" and cfg.state_dim else 0
            self.keypoints = KeypointTokens(len(cfg.cameras), cfg.keypoints, cfg.keypoint_width, width, pose)
        # Whether a loss learns where commands end (`goal_loss`): the goal head's or the keypoints' places.
        self.learns_goals = self.goal is not None or bool(self.keypoints and self.keypoints.chosen_in)
        self.camera_embed = nn.Parameter(torch.zeros(max(len(cfg.cameras), 1), 1, width))
        self.expert = ActionExpert(cfg.action_dim, cfg.chunk_size, width, cfg.expert_hidden, cfg.expert_heads,
                                   cfg.expert_layers)
        if cfg.freeze_vision:
            for p in backbone.inner.vision_model.parameters():
                p.requires_grad_(False)
        self.check_cameras = checks_from_cameras(cfg)  # implies the goal head and the check
        if self.check_cameras and self.goal is not None:
            self.check_out = self._check_head(self.goal.evidence_width)

    def _check_head(self, evidence: int) -> nn.Module:
        width = self.backbone.hidden_size
        self.check_norm = nn.LayerNorm(width)  # over the pooled context (`check_context`)
        return nn.Sequential(nn.Linear((width if self.cfg.check_context else 0) + evidence, width), nn.GELU(),
                             nn.Linear(width, width), nn.GELU(), nn.Linear(width, 1))

    def calibrate(self, normalizer: Any) -> None:
        """Give the parts that work in state units the processor's normalisation (the locator)."""
        if self.locator is not None:
            self.locator.calibrate(normalizer)

    # -- encoding -------------------------------------------------------------------------------

    def state_tokens(self, state: torch.Tensor) -> torch.Tensor:
        """(B, S) state in [-1, 1] -> (B, n, hidden) prefix tokens (n = S for bins, 1 for the projector)."""
        if self.state_bins is not None:
            n = self.cfg.state_bins
            bins = ((state.clamp(-1, 1) + 1) / 2 * n).long().clamp(0, n - 1)
            return self.state_bins(bins) + self.state_dim_embed[None]
        if self.state_proj is not None:
            return self.state_proj(state)[:, None]
        return state.new_zeros(state.shape[0], 0, self.backbone.hidden_size)

    def prefix(self, images: torch.Tensor | None, state: torch.Tensor | None) -> tuple[torch.Tensor, Keypoints | None]:
        """The prefix embeddings: every camera's tokens (with a per-camera embedding) and keypoint tokens,
        then the state; and the keypoints found (None without)."""
        parts, points = [], None
        if images is not None and images.shape[1]:
            batch, cams = images.shape[:2]
            feats = self.backbone.image_tokens(images.to(self.backbone.text.dtype))
            feats = feats.reshape(batch, cams, -1, feats.shape[-1]) + self.camera_embed[None, :cams]
            parts.append(feats.flatten(1, 2))
            if self.keypoints is not None:
                pose = None if state is None else state[:, cast(torch.Tensor, self.pose_index)]
                points = self.keypoints(images, pose)
                parts.append(points.tokens.to(feats.dtype))
        if state is not None:
            parts.append(self.state_tokens(state.to(self.backbone.text.dtype)))
        if not parts:
            raise ValueError("the prefix needs cameras or a state")
        return torch.cat(parts, dim=1), points

    def named_objects(self, input_ids: torch.Tensor, state: torch.Tensor | None) -> torch.Tensor | None:
        """(B, T, hidden): at each token that names an object (`cfg.object_tokens`), that object's
        state (normalised fields and offset from the end effector, through `object_in`); else 0."""
        if self.object_in is None or state is None:
            return None
        padded = torch.cat([state, state.new_zeros(state.shape[0], 1), state.new_ones(state.shape[0], 1)], dim=1)
        fields = cast(torch.Tensor, self.object_fields)  # registered buffers
        table = cast(torch.Tensor, self.object_match)
        read = padded[:, fields]  # (B, O, 7)
        if self.fine_scales:
            offset = read[..., 4:7]
            read = torch.cat([read, *(torch.tanh(scale * offset) for scale in self.fine_scales)], dim=-1)
        objects = self.object_in(read.to(self.backbone.text.dtype))  # (B, O, hidden)
        match = table[input_ids.clamp(0, int(table.shape[0]) - 1)].to(objects.dtype)
        return torch.bmm(match, objects.expand(input_ids.shape[0], -1, -1))

    def encode(self, images: torch.Tensor | None, state: torch.Tensor | None, input_ids: torch.Tensor,
               attention_mask: torch.Tensor, *, use_cache: bool = False, acting: torch.Tensor | None = None
               ) -> Encoded:
        """The backbone pass and what the expert reads beside it. `acting` (B,) marks the rows that will
        act (low-level samples; default all): only they get a goal (`GoalHead`), whose per-word reading
        of a long high-level prompt cost four times a training step for nothing."""
        located = None
        if self.locator is not None and state is not None:
            if images is None:
                raise ValueError("this policy locates objects from its cameras: it needs camera frames")
            located = self.locator(images)
            state = self.locator.splice(state, located.detach())
        prefix, points = self.prefix(images, state)
        embeds = torch.cat([prefix, self.backbone.embed(input_ids).to(prefix.dtype)], dim=1)
        plen = prefix.shape[1]
        mask = block_causal_mask(plen, attention_mask)
        positions = position_ids(plen, attention_mask)
        cache = self.backbone.new_cache() if use_cache else None
        last, hidden, cache = self.backbone.run(embeds, mask, positions, cache=cache, use_cache=use_cache)
        ones = torch.ones(attention_mask.shape[0], plen, dtype=torch.bool, device=attention_mask.device)
        valid = torch.cat([ones, attention_mask.bool()], dim=1)
        named = self.named_objects(input_ids, state)
        if named is not None:
            named = torch.cat([named.new_zeros(named.shape[0], plen, named.shape[2]), named], dim=1)
        token = None
        if self.expert_state is not None and state is not None:
            token = self.expert_state(state.to(self.backbone.text.dtype))[:, None]
        goal = goal_token = evidence = None
        if self.goal is not None and images is not None and state is not None:
            # Where the command ends, from the cameras and its words alone (`GoalHead`), for the rows that
            # act, their text cut to its longest (prompts are right-padded); zeros elsewhere.
            pose = state[:, cast(torch.Tensor, self.pose_index)].float()
            goal = pose.new_zeros(pose.shape)
            evidence = pose.new_zeros(len(pose), self.goal.evidence_width)
            rows = torch.arange(len(pose), device=pose.device) if acting is None else torch.nonzero(acting.bool())[:, 0]
            if rows.numel():
                words = attention_mask[rows]
                width = max(int(words.sum(1).max()), 1)
                found, read = self.goal.read(images[rows], input_ids[rows, :width], words[:, :width])
                goal = goal.index_put((rows,), found.to(goal.dtype))
                evidence = evidence.index_put((rows,), read.detach().to(evidence.dtype))
            goal_token = self.goal_in(goal_features(goal.detach(), pose).to(last.dtype))[:, None]
        choice = None
        if self.keypoints is not None and points is not None and points.places is not None and state is not None:
            pose = state[:, cast(torch.Tensor, self.pose_index)]  # the chosen place is the expert's goal token
            choice, goal_token = self.keypoints.choose(last[:, plen:], attention_mask, points, pose)
        return Encoded(last, hidden, valid, plen, cache, named, token, located, goal, goal_token, evidence, points,
                       choice)

    def contexts(self, enc: Encoded, rows: torch.Tensor | None = None) -> tuple[list[torch.Tensor], torch.Tensor]:
        """What each expert layer cross-attends to (rows `rows` of the batch), and which keys are real:
        the last `expert_layers` backbone layers, plus the named objects and the state token."""
        pick = (lambda x: x) if rows is None else (lambda x: x[rows])
        layers = [pick(h) for h in enc.hidden[-self.cfg.expert_layers:]]
        valid = pick(enc.valid)
        if enc.named is not None:
            named = pick(enc.named).to(layers[0].dtype)
            layers = [h + named for h in layers]
        if enc.state_token is not None:
            token = pick(enc.state_token).to(layers[0].dtype)
            layers = [torch.cat([h, token], dim=1) for h in layers]
            valid = torch.cat([valid, valid.new_ones(valid.shape[0], 1)], dim=1)
        if enc.goal_token is not None:
            token = pick(enc.goal_token).to(layers[0].dtype)
            layers = [torch.cat([h, token], dim=1) for h in layers]
            valid = torch.cat([valid, valid.new_ones(valid.shape[0], 1)], dim=1)
        return layers, valid

    def done_head_logits(self, ctx: list[torch.Tensor], valid: torch.Tensor, relation: torch.Tensor | None = None
                         ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(B,) logits that the command is complete (from what the expert reads: its last context) and, with
        `step_check` and the commands' `relation` (or the goal head's evidence), that a command reported done
        took: one pooling, two outputs."""
        assert self.done_attn is not None
        keys = self.done_norm(ctx[-1])
        query = self.done_query.expand(keys.shape[0], -1, -1).to(keys.dtype)
        pooled = self.done_attn(query, keys, keys, key_padding_mask=~valid.bool(), need_weights=False)[0][:, 0]
        check = None
        if self.check_out is not None and relation is not None:
            # Detached: the check learns from what the done head pools and changes none of it, so it
            # cannot change how the low level acts or when it reports done.
            joined = relation.to(pooled.dtype)
            if self.cfg.check_context:
                joined = torch.cat([self.check_norm(pooled.detach()), joined], dim=-1)
            check = self.check_out(joined).squeeze(-1)
        return self.done_out(pooled).squeeze(-1), check

    @torch.no_grad()
    def check_probability(self, images: torch.Tensor | None, state: torch.Tensor | None, input_ids: torch.Tensor,
                          attention_mask: torch.Tensor, relation: torch.Tensor | None) -> torch.Tensor:
        """(B,) probability that each command (the low-level prompt), reported done, took (`step_check`),
        given its (B, 4) `relation` (`objects.command_relation`), or from the cameras (`checks_from_cameras`)."""
        if self.check_out is None:
            raise ValueError("this policy has no step check (trained without --policy.step_check)")
        enc = self.encode(images, state, input_ids, attention_mask)
        ctx, valid = self.contexts(enc)
        check = self.done_head_logits(ctx, valid, enc.evidence if self.check_cameras else relation)[1]
        assert check is not None
        return torch.sigmoid(check.float())

    # -- training -------------------------------------------------------------------------------

    def forward(self, batch: dict[str, Any], generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        """The loss dict of a prepared batch: `loss`, `text_loss`, `flow_loss`, `text_tokens`, `action_values`."""
        enc = self.encode(batch.get("images"), batch.get("state"), batch["input_ids"], batch["attention_mask"],
                          acting=batch["predict_actions"])
        t_loss, n_text = text_loss(enc.last[:, enc.prefix_len:], batch["labels"], self.backbone.logits)
        f_loss, n_act = enc.last.sum() * 0.0, 0
        if "actions" in batch:
            mask = batch["action_mask"].bool() & batch["predict_actions"].bool()[:, None, None]
            rows = torch.nonzero(mask.flatten(1).any(1), as_tuple=True)[0]
            if rows.numel():
                # `flow_samples` draws of (noise, time) per sample: the expert is cheap beside the
                # backbone pass that every draw shares, and each draw is more signal for it.
                draws = self.cfg.flow_samples
                rows = rows.repeat_interleave(draws)
                actions = batch["actions"][rows].to(enc.last.dtype)
                noise = torch.randn(actions.shape, device=actions.device, dtype=actions.dtype, generator=generator)
                t = sample_time(rows.numel(), actions.device, generator).to(actions.dtype)
                noisy = t[:, None, None] * noise + (1 - t[:, None, None]) * actions
                ctx, valid = self.contexts(enc, rows)
                velocity = self.expert(noisy, t, ctx, valid)
                f_loss, n_act = flow_matching_loss(velocity, noise - actions, mask[rows])
                n_act //= draws
        d_loss, n_done = enc.last.sum() * 0.0, 0
        c_loss = enc.last.sum() * 0.0
        if self.done_attn is not None and "done" in batch:
            checked = batch["check"] >= 0 if "check" in batch and self.check_out is not None else None
            either = batch["done"] >= 0 if checked is None else (batch["done"] >= 0) | checked
            labelled = torch.nonzero(either, as_tuple=True)[0]
            if labelled.numel():
                ctx, valid = self.contexts(enc, labelled)
                relation = enc.evidence if self.check_cameras else batch.get("relation")  # the check's input
                relation = relation[labelled] if checked is not None and relation is not None else None
                logits, check = self.done_head_logits(ctx, valid, relation)
                done = batch["done"][labelled].float()
                has_done = done >= 0
                if has_done.any():
                    d_loss = F.binary_cross_entropy_with_logits(logits.float()[has_done], done[has_done])
                n_done = int(has_done.sum())
                if check is not None and checked is not None:
                    labels = batch["check"][labelled].float()
                    has_check = labels >= 0
                    if has_check.any():
                        c_loss = F.binary_cross_entropy_with_logits(check.float()[has_check], labels[has_check])
        l_loss = enc.last.sum() * 0.0
        if self.locator is not None and enc.located is not None:
            l_loss = self.locator.loss(enc.located, batch["state"])
        g_loss = enc.last.sum() * 0.0
        if "goal" in batch and self.learns_goals:  # the goal head or the keypoints (never both: PolicyConfig)
            target = batch["goal"][:, cast(torch.Tensor, self.pose_index)]
            known = torch.isfinite(target).all(-1) & batch["predict_actions"].bool()
            places = None if enc.keypoints is None else enc.keypoints.places
            if bool(known.any()) and enc.goal is not None:
                g_loss = GoalHead.loss(enc.goal[known], target[known])
            elif bool(known.any()) and places is not None and enc.choice is not None:
                g_loss = KeypointTokens.loss(places[known], enc.choice[known], target[known])
        loss = (self.cfg.text_loss_weight * t_loss + self.cfg.flow_loss_weight * f_loss
                + self.cfg.done_loss_weight * (d_loss + c_loss) + self.cfg.locate_loss_weight * l_loss
                + self.cfg.goal_loss_weight * g_loss)
        return {
            "loss": loss,
            "text_loss": t_loss.detach(),
            "flow_loss": f_loss.detach(),
            "done_loss": d_loss.detach(),
            "check_loss": c_loss.detach(),
            "locate_loss": l_loss.detach(),
            "goal_loss": g_loss.detach(),
            "done_labels": torch.tensor(n_done),
            "text_tokens": torch.tensor(n_text),
            "action_values": torch.tensor(n_act),
        }

    # -- actions --------------------------------------------------------------------------------

    @torch.no_grad()
    def sample_actions(self, images: torch.Tensor | None, state: torch.Tensor | None, input_ids: torch.Tensor,
                       attention_mask: torch.Tensor, *, steps: int | None = None, noise: torch.Tensor | None = None,
                       generator: torch.Generator | None = None, guide: Any = None,
                       done: list[torch.Tensor] | None = None) -> torch.Tensor:
        """A normalised (B, chunk_size, action_dim) chunk, integrated in `steps` Euler steps from `noise`,
        or else from noise drawn and scaled by `cfg.flow_noise` (0: from the prior's mean, zeros).
        `guide(x, t, velocity)`, when given, returns the velocity to step with from the expert's
        (`velocity(x)`): real-time chunking's guidance (`steerable.policy.rtc`). `done`, a list, gets
        the (B,) probability that each command is complete (policies with a done head)."""
        enc = self.encode(images, state, input_ids, attention_mask)
        ctx, valid = self.contexts(enc)
        if done is not None and self.done_attn is not None:
            done.append(torch.sigmoid(self.done_head_logits(ctx, valid)[0].float()))
        batch = input_ids.shape[0]
        shape = (batch, self.cfg.chunk_size, self.cfg.action_dim)
        if noise is not None:
            x = noise
        elif self.cfg.flow_noise > 0:
            x = torch.randn(shape, generator=generator, device=input_ids.device) * self.cfg.flow_noise
        else:  # the path from the prior's mean
            x = torch.zeros(shape, device=input_ids.device)
        x = x.to(enc.last.dtype)
        n = steps or self.cfg.flow_steps
        dt = -1.0 / n
        for i in range(n):
            t = torch.full((batch,), 1.0 + i * dt, device=x.device, dtype=x.dtype)
            if guide is None:
                x = x + dt * self.expert(x, t, ctx, valid)
            else:
                x = x + dt * guide(x, t, lambda y, t=t: self.expert(y, t, ctx, valid))
        return x.float()
