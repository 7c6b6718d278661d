"""`train.share_prefix`: the trainer's forward over a prompt's G responses with the prompt run once.

The rows of a GRPO batch come in groups: G responses to one prompt, contiguous. The plain forward
(harness/models/logprobs.py `pack`) runs every row's prompt again: G times the prompt's tokens through
every layer, forward and backward. Here each run of identical consecutive prompts is one row of a
prefix forward (left-padded, positions 0..P_i - 1) whose KV cache is copied to the run's rows; the
responses then go through the model on that cache (positions P_i..P_i + T - 1), the gradient flowing
back through the cache to the prompt's single forward (the same sum over the group's rows that the
plain forward's backward takes). Prefix sharing for GRPO as in Prefix Grouper (arXiv 2506.05433).

The logits are those of the plain forward up to rounding: the prompt's products run on a batch of
another width, the attention over [prompt | response] is split in two calls. Measured and tested in
tests/models/test_prefix_groups.py (log-probs to 1e-5, gradients to 1e-4 relative).

Shapes: B rows, U distinct prompts (runs), P the widest prompt, T padded response length, V vocabulary.
"""

from __future__ import annotations

import torch

from harness.models.spans import span_mask


def prompt_groups(prompt_ids: list[list[int]]) -> tuple[list[int], torch.Tensor]:
    """-> (the first row of each run of identical consecutive prompts (U,), each row's run (B,) long)."""
    starts = [i == 0 or prompt_ids[i] != prompt_ids[i - 1] for i in range(len(prompt_ids))]
    return [i for i, s in enumerate(starts) if s], torch.tensor(starts, dtype=torch.long).cumsum(0) - 1


def left_pad(prompts: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """U id lists -> input_ids (U, P) left-padded, attention_mask (U, P): the layout of generate's rows
    (harness/rollout/hf.py) and of the prefix forward here."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    att = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, width - len(p) :] = torch.tensor(p, dtype=torch.long)
        att[i, width - len(p) :] = 1
    return ids, att


def grouped_response_logits(
    model,
    prompt_ids: list[list[int]],
    response_ids: torch.Tensor,
    response_mask: torch.Tensor,
    pad_id: int,
    keep: bool = True,
) -> torch.Tensor:
    """The logits (B, T, V) at the positions that predict each response token (row i, token t: the
    position P_i - 1 + t, as the plain forward's), the prompts run once per run of identical rows.
    Gradients flow unless under no_grad. The model: a transformers causal LM (or peft's / AdaptersOff).
    keep: the model takes `logits_to_keep` (the output head on the needed positions only)."""
    from transformers import DynamicCache

    dev = model.device
    firsts, run = prompt_groups(prompt_ids)
    ids, att = left_pad([prompt_ids[f] for f in firsts], pad_id)  # (U, P)
    ids, att, run = ids.to(dev), att.to(dev), run.to(dev)
    cache = DynamicCache()
    head = model(  # the prompts once: their KV cache and the logits predicting response token 0
        input_ids=ids,
        attention_mask=att,
        position_ids=(att.cumsum(-1) - 1).clamp(min=0),  # a left-padded row numbered from its first token
        past_key_values=cache,
        use_cache=True,
        **({"logits_to_keep": 1} if keep else {}),
    ).logits[:, -1:]  # (U, 1, V)
    first = head[run]  # (B, 1, V)
    T = response_ids.shape[1]
    if T == 1:
        return first
    cache.batch_select_indices(run)  # each row gets its prompt's keys and values (a differentiable gather)
    resp_att = span_mask(response_mask.to(dev))  # a trajectory's tool tokens are attended to (spans.py)
    position_ids = att.sum(-1)[run].unsqueeze(1) + torch.arange(T, device=dev)  # (B, T): P_i + t
    rest = model(  # the responses on their prompt's cache; the logit at t predicts token t + 1
        input_ids=response_ids.to(dev),
        attention_mask=torch.cat([att[run], resp_att], dim=1),  # (B, P + T)
        position_ids=position_ids,
        past_key_values=cache,
        use_cache=True,
        **({"logits_to_keep": torch.arange(T - 1, device=dev)} if keep else {}),
    ).logits[:, : T - 1]  # (B, T - 1, V)
    return torch.cat([first, rest], dim=1)
