"""PPO's value model: a copy of the policy's transformer with a scalar head (InstructGPT-style
critic, arXiv 2203.02155). V(s_t) is read at the position whose logits predict response
token t, i.e. the state before that token. Shapes: B rows, T response length, H hidden."""

from __future__ import annotations

import copy

import torch
from torch import nn

from harness.models.logprobs import pack


class ValueModel(nn.Module):
    def __init__(self, policy: nn.Module):
        super().__init__()
        self.backbone = copy.deepcopy(policy.get_decoder())  # initialised from the (warm-started) policy
        self.backbone.requires_grad_(True)
        hidden = policy.config.hidden_size
        self.head = nn.Linear(hidden, 1)
        nn.init.zeros_(self.head.weight)  # V = 0 at start: the first advantages are the returns
        nn.init.zeros_(self.head.bias)

    def forward(
        self, prompt_ids: list[list[int]], response_ids: torch.Tensor, mask: torch.Tensor, pad_id: int
    ) -> torch.Tensor:
        """-> values (B, T), 0 on padding."""
        dev = self.head.weight.device
        ids, att, index = pack(prompt_ids, response_ids, mask, pad_id, device=dev)
        h = self.backbone(
            input_ids=ids.to(dev), attention_mask=att.to(dev), use_cache=False
        ).last_hidden_state  # (B, L, H)
        h = h.gather(1, index.to(dev).unsqueeze(-1).expand(-1, -1, h.shape[-1]))  # (B, T, H)
        return self.head(h.float()).squeeze(-1) * mask.to(dev)
