"""The vision-language backbone: an Idefics3 (SmolVLM family) model, tiny in code or from a folder.

`Backbone` exposes the pieces the policy drives itself: token embeddings, camera features
(vision tower + connector), the text transformer run on an arbitrary embedding sequence with a
custom mask (and a KV cache for generation), and the LM head.
"""

from __future__ import annotations

import inspect
import logging
from pathlib import Path
from typing import Any

import torch
from torch import nn

from steerable.errors import ConfigError
from steerable.policy.config import PolicyConfig

__all__ = ["Backbone", "backbone_folder", "build_backbone"]

logger = logging.getLogger(__name__)


class Backbone(nn.Module):
    """Wraps an image-text-to-text model whose parts follow the Idefics3 layout."""

    def __init__(self, vlm: nn.Module) -> None:
        super().__init__()
        self.vlm = vlm
        inner = getattr(vlm, "model", vlm)
        text = getattr(inner, "text_model", None) or getattr(inner, "language_model", None)
        head = getattr(vlm, "lm_head", None)
        if text is None or head is None or not hasattr(inner, "get_image_features"):
            raise ConfigError(f"{type(vlm).__name__} is not supported as a backbone: it needs a text model, an "
                              "lm_head and get_image_features (the Idefics3 / SmolVLM layout)")
        self.inner: Any = inner
        self.text: Any = text
        self.head: nn.Module = head
        params = inspect.signature(text.forward).parameters
        self._cache_arg = "cache" if "cache" in params else "past_key_values"

    @property
    def hidden_size(self) -> int:
        return int(self.text.config.hidden_size)

    @property
    def num_layers(self) -> int:
        return int(self.text.config.num_hidden_layers)

    @property
    def vocab_size(self) -> int:
        return int(self.text.get_input_embeddings().weight.shape[0])

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.text.get_input_embeddings()(ids)

    def image_tokens(self, pixels: torch.Tensor) -> torch.Tensor:
        """(B, C, 3, S, S) images in [-1, 1] -> (B, C * tokens_per_image, hidden)."""
        batch = pixels.shape[0]
        flat = pixels.reshape(-1, *pixels.shape[2:]).contiguous()
        if hasattr(self.inner, "vision_model") and hasattr(self.inner, "connector"):
            # Called directly: get_image_features would drop an all-zero (mid-grey) image as padding.
            seen = self.inner.vision_model(pixel_values=flat).last_hidden_state
            feats = self.inner.connector(seen)
        else:
            out = self.inner.get_image_features(pixel_values=flat)
            feats = out.pooler_output if hasattr(out, "pooler_output") else out
            if isinstance(feats, (list, tuple)):
                feats = torch.cat([f.reshape(-1, f.shape[-1]) for f in feats])
        return feats.reshape(batch, -1, feats.shape[-1])

    def run(self, embeds: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor,
            cache: Any = None, use_cache: bool = False) -> tuple[torch.Tensor, tuple[torch.Tensor, ...], Any]:
        """(last hidden state, every layer's hidden states, cache) for `embeds` under the boolean `mask`."""
        kwargs = {self._cache_arg: cache} if cache is not None else {}
        out = self.text(inputs_embeds=embeds, attention_mask=mask, position_ids=positions, use_cache=use_cache,
                        output_hidden_states=True, **kwargs)
        return out.last_hidden_state, tuple(out.hidden_states), cache  # the cache object is updated in place

    def new_cache(self) -> Any:
        from transformers import DynamicCache

        try:
            return DynamicCache(config=self.text.config)
        except TypeError:  # older transformers
            return DynamicCache()

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.head(hidden)


def backbone_folder(value: str) -> Path:
    """The folder `--policy.backbone` names (`~` expanded); a ConfigError when there is none.

    Checked before transformers sees the value: it would take a missing folder for a Hub repo id.
    """
    path = Path(value).expanduser()
    if not path.is_dir():
        raise ConfigError(f"--policy.backbone {value}: no such folder: {path} (give 'tiny' or a local model folder, "
                          "e.g. one made with `huggingface-cli download HuggingFaceTB/SmolVLM-256M-Instruct "
                          "--local-dir DIR`)")
    return path


def build_backbone(cfg: PolicyConfig, vocab_size: int) -> tuple[Backbone, int]:
    """(backbone, image size it expects): the tiny model in code, or the model at `cfg.backbone`."""
    if cfg.is_tiny:
        return Backbone(_tiny(cfg, vocab_size)), cfg.image_size
    path = backbone_folder(cfg.backbone)
    if not (path / "config.json").is_file():
        raise ConfigError(f"--policy.backbone {cfg.backbone}: not 'tiny' and not a folder with a config.json "
                          "(download the model first, e.g. "
                          "huggingface-cli download HuggingFaceTB/SmolVLM-256M-Instruct)")
    from transformers import AutoModelForImageTextToText

    try:
        vlm = AutoModelForImageTextToText.from_pretrained(str(path))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot load a vision-language model from {path}: {exc}") from None
    embeddings: Any = vlm.get_input_embeddings()
    if embeddings.weight.shape[0] < vocab_size:
        vlm.resize_token_embeddings(vocab_size)
    size = int(getattr(getattr(vlm.config, "vision_config", None), "image_size", cfg.image_size))
    logger.info("backbone %s loaded from %s", type(vlm).__name__, path)
    return Backbone(vlm), size


def _tiny(cfg: PolicyConfig, vocab_size: int) -> nn.Module:
    from transformers import Idefics3Config, Idefics3ForConditionalGeneration

    patches = cfg.image_size // cfg.tiny_patch_size
    if cfg.image_size % cfg.tiny_patch_size or patches % 2:
        raise ConfigError(f"policy.image_size ({cfg.image_size}) must be an even multiple of policy.tiny_patch_size "
                          f"({cfg.tiny_patch_size})")
    config = Idefics3Config(
        text_config={
            "model_type": "llama", "vocab_size": vocab_size, "hidden_size": cfg.tiny_hidden,
            "intermediate_size": cfg.tiny_hidden * 2, "num_hidden_layers": cfg.tiny_layers,
            "num_attention_heads": cfg.tiny_heads, "num_key_value_heads": cfg.tiny_heads,
            "max_position_embeddings": 4096, "tie_word_embeddings": False,
        },
        vision_config={
            "hidden_size": cfg.tiny_vision_hidden, "intermediate_size": cfg.tiny_vision_hidden * 2,
            "num_hidden_layers": cfg.tiny_vision_layers, "num_attention_heads": 2,
            "image_size": cfg.image_size, "patch_size": cfg.tiny_patch_size,
        },
        scale_factor=2, image_token_id=0,
    )
    config._attn_implementation = "sdpa"
    return Idefics3ForConditionalGeneration(config)
