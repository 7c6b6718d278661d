"""The hf backend's rows from what `generate` returned: each row ended at its EOS or stop string, the chunks joined.

    resp, mask, logp, truncated = end_rows(resp, logp, eos_id, pad_id, stop, tokenizer)   # one chunk, (b, T) each
    ids, mask, logp, truncated, routing = join_chunks(parts, pad_id)                      # every chunk, (B, T)

A row ends with its first EOS, or with the token that completes its first stop string (rollout.stop), which
is kept (as EOS is); the mask covers the tokens up to and including it, and the ids after it are pad_id and
their log-probs 0. A row with neither is truncated. Chunks (at most max_batch rows each) are right-padded to
the widest; an MoE's routing (b, S, L, k) is padded with -1.
"""

from __future__ import annotations

import torch

from harness.rollout.base import stop_index


def end_rows(resp: torch.Tensor, logp: torch.Tensor, eos_id: int, pad_id: int, stop: tuple[str, ...], tokenizer):
    """(resp (b, T) with pad_id after each row's end, mask (b, T) float, logp (b, T) 0 after the end, truncated
    (b,) bool) of generate's response tokens resp (b, T) and their sampler log-probs logp (b, T)."""
    is_eos = resp == eos_id
    if stop:  # a stop string ends a row like EOS: mark the token that completes it as its end
        for i in range(resp.shape[0]):
            at = stop_index(tokenizer, resp[i].tolist(), stop)
            if at is not None and not is_eos[i, :at].any():
                is_eos[i, at] = True
    # mask: tokens up to and including the first EOS (or the token that completes a stop string)
    before_eos = (is_eos.cumsum(-1) - is_eos.long()) == 0
    mask = before_eos.float()
    truncated = ~is_eos.any(-1)
    logp = torch.where(mask.bool(), logp, torch.zeros_like(logp))
    resp = torch.where(mask.bool(), resp, torch.full_like(resp, pad_id))
    return resp, mask, logp, truncated


def join_chunks(parts: list[tuple], pad_id: int):
    """(ids, mask, logp (B, T), truncated (B,), routing (B, S, L, k) or None) of the chunks' (resp, mask, logp,
    truncated, routing or None), in order, each right-padded to the widest."""
    width = max(p[0].shape[1] for p in parts)
    pad = lambda t, v: torch.nn.functional.pad(t, (0, width - t.shape[1]), value=v)  # noqa: E731
    ids = torch.cat([pad(p[0], pad_id) for p in parts])
    mask = torch.cat([pad(p[1], 0.0) for p in parts])
    logp = torch.cat([pad(p[2], 0.0) for p in parts])
    truncated = torch.cat([p[3] for p in parts])
    routing = None
    if parts[0][4] is not None:  # (B, S, L, k), S = widest prompt + response of all chunks, -1 padded
        S = max(p[4].shape[1] for p in parts)
        routing = torch.cat(
            [torch.nn.functional.pad(p[4], (0, 0, 0, 0, 0, S - p[4].shape[1]), value=-1) for p in parts]
        )
    return ids, mask, logp, truncated, routing
