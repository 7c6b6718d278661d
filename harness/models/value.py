"""PPO's value model: a copy of the policy's transformer with a scalar head (InstructGPT-style
critic, arXiv 2203.02155). V(s_t) is read at the position whose logits predict response
token t, i.e. the state before that token. Shapes: B rows, T response length, H hidden."""

from __future__ import annotations

import copy

import torch
from torch import nn

from harness.models.logprobs import pack, pad_multiple


class ValueModel(nn.Module):
    def __init__(self, policy: nn.Module, init: nn.Module | None = None):
        """init: a reward model (a sequence classifier with one label: model.critic_init) whose transformer and
        score head the critic starts from, instead of the policy's transformer and a zero head."""
        super().__init__()
        source = init.base_model if init is not None else policy.get_decoder()
        self.backbone = copy.deepcopy(source)  # initialised from the (warm-started) policy, or the reward model
        self.backbone.requires_grad_(True)
        hidden = (init or policy).config.hidden_size
        self.head = nn.Linear(hidden, 1)
        nn.init.zeros_(self.head.weight)  # V = 0 at start: the first advantages are the returns
        nn.init.zeros_(self.head.bias)
        if init is not None:
            score = score_head(init)
            with torch.no_grad():
                self.head.weight.copy_(score.weight)
                if score.bias is not None:
                    self.head.bias.copy_(score.bias)

    def forward(
        self, prompt_ids: list[list[int]], response_ids: torch.Tensor, mask: torch.Tensor, pad_id: int
    ) -> torch.Tensor:
        """-> values (B, T), 0 on padding. Packed as the policy's forwards are (padded_widths)."""
        dev = self.head.weight.device
        ids, att, index = pack(prompt_ids, response_ids, mask, pad_id, device=dev, multiple=pad_multiple())
        h = self.backbone(
            input_ids=ids.to(dev), attention_mask=att.to(dev), use_cache=False
        ).last_hidden_state  # (B, L, H)
        h = h.gather(1, index.to(dev).unsqueeze(-1).expand(-1, -1, h.shape[-1]))  # (B, T, H)
        return self.head(h.float()).squeeze(-1) * mask.to(dev)


def score_head(model: nn.Module) -> nn.Linear:
    """A sequence classifier's head (transformers names it `score` or `classifier`), one output."""
    head = getattr(model, "score", None) or getattr(model, "classifier", None)
    if not isinstance(head, nn.Linear) or head.out_features != 1:
        raise ValueError(f"{type(model).__name__} has no linear score head with one output to start a critic from")
    return head


def load_critic_init(path: str, dtype: torch.dtype = torch.float32) -> nn.Module:
    """model.critic_init's reward model (AutoModelForSequenceClassification), to start a critic from."""
    from transformers import AutoModelForSequenceClassification  # heavy: only where a critic is built from it

    return AutoModelForSequenceClassification.from_pretrained(path, local_files_only=True, dtype=dtype)
