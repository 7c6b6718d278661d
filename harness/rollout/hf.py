"""`rollout.backend=hf`: transformers `generate` on the training module itself.

The policy is shared with the trainer, so weight sync is a no-op. Sampler log-probs come
from the processed scores (after temperature / top-p), i.e. the distribution the tokens
were actually drawn from.
"""
from __future__ import annotations

import torch

from harness.rollout.base import RolloutBackend, RolloutBatch, SamplingParams


def left_pad(prompts: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """list of B id lists -> input_ids (B, P) left-padded, attention_mask (B, P)."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    att = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, width - len(p):] = torch.tensor(p, dtype=torch.long)
        att[i, width - len(p):] = 1
    return ids, att


class HFBackend(RolloutBackend):
    def __init__(self, model, tokenizer, max_batch: int = 256):
        self.model = model
        self.tokenizer = tokenizer
        self.max_batch = max_batch
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.eos_id = tokenizer.eos_token_id

    @torch.no_grad()
    def generate(self, prompts: list[list[int]], group_size: int, params: SamplingParams) -> RolloutBatch:
        rows = [p for p in prompts for _ in range(group_size)]  # groups contiguous
        gen = torch.Generator().manual_seed(params.seed)
        parts = [self._generate_chunk(rows[i:i + self.max_batch], params, int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))
                 for i in range(0, len(rows), self.max_batch)]
        width = max(p[0].shape[1] for p in parts)
        pad = lambda t, v: torch.nn.functional.pad(t, (0, width - t.shape[1]), value=v)  # noqa: E731
        ids = torch.cat([pad(p[0], self.pad_id) for p in parts])
        mask = torch.cat([pad(p[1], 0.0) for p in parts])
        logp = torch.cat([pad(p[2], 0.0) for p in parts])
        truncated = torch.cat([p[3] for p in parts])
        texts = [self.tokenizer.decode(r[m.bool()].tolist(), skip_special_tokens=True) for r, m in zip(ids, mask)]
        return RolloutBatch(prompt_ids=rows, response_ids=ids, response_mask=mask, sampler_logp=logp,
                            truncated=truncated, texts=texts)

    def _generate_chunk(self, rows: list[list[int]], params: SamplingParams, seed: int):
        input_ids, attention = left_pad(rows, self.pad_id)
        torch.manual_seed(seed)
        was_training = self.model.training
        self.model.eval()
        out = self.model.generate(
            input_ids=input_ids, attention_mask=attention, do_sample=True,
            temperature=params.temperature, top_p=params.top_p, top_k=0,
            max_new_tokens=params.max_new_tokens, pad_token_id=self.pad_id, eos_token_id=self.eos_id,
            output_scores=True, return_dict_in_generate=True)
        self.model.train(was_training)
        resp = out.sequences[:, input_ids.shape[1]:]  # (b, T)
        scores = torch.stack(out.scores, dim=1).float()  # (b, T, V) processed logits
        logp = torch.log_softmax(scores, dim=-1).gather(-1, resp.unsqueeze(-1)).squeeze(-1)
        is_eos = resp == self.eos_id
        # mask: tokens up to and including the first EOS
        before_eos = (is_eos.cumsum(-1) - is_eos.long()) == 0
        mask = before_eos.float()
        truncated = ~is_eos.any(-1)
        logp = torch.where(mask.bool(), logp, torch.zeros_like(logp))
        resp = torch.where(mask.bool(), resp, torch.full_like(resp, self.pad_id))
        return resp, mask, logp, truncated
