"""PRIME's implicit process reward model pi_phi (arXiv 2502.01456, docs/objective.md, "PRIME"): a copy of
the (warm-started) policy whose log-probs of the sampled tokens, against the reference's, are the
token rewards prime_beta * (log pi_phi - log pi_ref). Shapes: B rows, T response length."""

from __future__ import annotations

import copy

import torch
from torch import nn

from harness.models.logprobs import response_logprobs


class ImplicitPRM(nn.Module):
    def __init__(self, policy: nn.Module, temperature: float):
        super().__init__()
        self.lm = copy.deepcopy(policy).requires_grad_(True)  # initialised from the (warm-started) policy
        self.temperature = temperature  # the sampler's, like the policy's and the reference's log-probs

    @property
    def device(self) -> torch.device:
        return self.lm.device

    def forward(
        self, prompt_ids: list[list[int]], response_ids: torch.Tensor, mask: torch.Tensor, pad_id: int
    ) -> torch.Tensor:
        """-> log pi_phi of the response tokens (B, T), 0 off `mask`."""
        logp, _, _ = response_logprobs(self.lm, prompt_ids, response_ids, mask, pad_id, self.temperature)
        return logp
