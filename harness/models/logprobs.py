"""Per-token log-probs (and entropies) of sampled responses under a model.

Shapes: B rows, P_i prompt length of row i, T padded response length, V vocabulary.
The logits are divided by the sampling temperature, so that at the first inner step the
trainer's log-probs equal the sampler's (the importance ratio starts at 1).

train.pad_to_multiple_of: inside `padded_widths(m)` (the trainer's forwards: harness/train/core/scoring.py,
forward.py) a packed row length L is rounded up to a multiple of m, the extra positions padding after every row
(causal attention: no earlier position sees them). A run then meets a few widths instead of one per step, and
what a device does once per new shape (on CUDA, such as building cuDNN's attention graph for a sequence length)
is done in the first steps. The output head runs on the real positions only.

train.chunked_head: inside `chunked_head(C)` (the same forwards) `response_forward` takes the model's final hidden
states instead of its logits and runs the head on C positions at a time, each chunk recomputed in the backward
(harness/models/chunked_head.py): no forward holds the (B, T, V) logits.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
from collections.abc import Callable, Iterator
from contextlib import nullcontext

import torch

from harness.models.chunked_head import ChunkedTokenLogits, head_stats, hidden_instead_of_logits
from harness.models.lora import AdaptersOff
from harness.models.moe import replay_routing
from harness.models.prefix_groups import grouped_response_logits
from harness.models.spans import span_lengths
from harness.models.token_stats import token_stats
from harness.objective.extensions import TokenLogits
from harness.objective.router_aux import AUX_KEY

_PAD_TO: contextvars.ContextVar[int] = contextvars.ContextVar("pad_to_multiple_of", default=1)
_HEAD_CHUNK: contextvars.ContextVar[int] = contextvars.ContextVar("head_chunk_tokens", default=0)


@contextlib.contextmanager
def chunked_head(chunk_tokens: int) -> Iterator[None]:
    """train.chunked_head: the `response_forward`s inside run the output head on `chunk_tokens` positions at a
    time, recomputed in the backward (harness/models/chunked_head.py); 0: the whole logits, as outside."""
    token = _HEAD_CHUNK.set(int(chunk_tokens))
    try:
        yield
    finally:
        _HEAD_CHUNK.reset(token)


@contextlib.contextmanager
def padded_widths(multiple: int) -> Iterator[None]:
    """The forwards inside pack their rows to a width that is a multiple of `multiple` (train.pad_to_multiple_of;
    1: the longest row's own length, as outside)."""
    token = _PAD_TO.set(int(multiple))
    try:
        yield
    finally:
        _PAD_TO.reset(token)


def pad_multiple() -> int:
    """The multiple the current forwards pack to (padded_widths; 1 outside it)."""
    return _PAD_TO.get()


def round_up(width: int, multiple: int) -> int:
    """`width` rounded up to a multiple of `multiple` (>= 1)."""
    return -(-width // multiple) * multiple


def packed_width(prompt_lens: list[int], lengths: list[int], multiple: int = 1) -> int:
    """The length L of packed rows: the longest prompt + response (at least the longest prompt + 1), rounded up to
    a multiple of `multiple`."""
    return round_up(max([p + r for p, r in zip(prompt_lens, lengths)] + [max(prompt_lens, default=0) + 1]), multiple)


def pack(
    prompt_ids: list[list[int]],
    response_ids: torch.Tensor,
    response_mask: torch.Tensor,
    pad_id: int,
    lengths: list[int] | None = None,
    device=None,
    multiple: int = 1,
):
    """Right-padded prompt+response sequences, built on `device` (None: response_ids').

    Returns input_ids (B, L), attention_mask (B, L), and index (B, T): the position whose
    logits predict response token t of row i (= P_i - 1 + t). lengths: each row's response span (1 + its last
    position with response_mask > 0: harness/models/spans.py; a single-turn row's mask is a prefix, and its span
    the count of its tokens), known on the host (Batch.mask_spans); None reads them from response_mask (one
    device->host read). Only the width L needs them on the host: the rows are
    laid out on the device, so a micro-batch's packing waits on nothing there. multiple: L rounded up to a
    multiple of it (packed_width; train.pad_to_multiple_of), the extra positions pad_id with attention 0.
    """
    B, T = response_ids.shape
    dev = response_ids.device if device is None else torch.device(device)
    lens = [len(p) for p in prompt_ids]
    if lengths is None:
        lengths = span_lengths(response_mask).tolist()
    L = packed_width(lens, lengths, multiple)
    # the prompts, -1 past each one's end, sent in one copy: (B, P)
    host = torch.full((B, max(lens, default=0)), -1, dtype=torch.long)
    for i, p in enumerate(prompt_ids):
        host[i, : len(p)] = torch.tensor(p, dtype=torch.long)
    prompts = torch.nn.functional.pad(host.to(dev, non_blocking=True), (0, L - host.shape[1]), value=-1)  # (B, L)
    plen = (prompts >= 0).sum(-1, keepdim=True)  # (B, 1) P_i
    rlen = torch.as_tensor(lengths, dtype=torch.long).to(dev, non_blocking=True).unsqueeze(1)  # (B, 1)
    at = torch.arange(L, device=dev).unsqueeze(0) - plen  # (B, L) the response token at each position
    resp = response_ids.to(dev).long().gather(1, at.clamp(0, max(T - 1, 0))) if T else torch.zeros_like(at)
    ids = torch.where(prompts >= 0, prompts, torch.where((at >= 0) & (at < rlen), resp, pad_id))
    att = (at < rlen).long()
    index = (plen - 1 + torch.arange(T, device=dev).unsqueeze(0)).clamp(max=L - 1)
    return ids, att, index


def takes_logits_to_keep(model) -> bool:
    """Whether `model(...)` computes its output head on chosen positions only (transformers' causal LMs:
    `logits_to_keep`, an int or the positions); a model without it gets the head on every position. A LoRA
    policy (peft) and its adapters-off reference pass it on to their base model."""
    owner = getattr(model, "model", model) if isinstance(model, AdaptersOff) else model
    get_base = getattr(owner, "get_base_model", None)
    return _forward_takes_logits_to_keep(type(get_base() if callable(get_base) else owner))


@functools.cache
def _forward_takes_logits_to_keep(cls: type) -> bool:
    try:
        return "logits_to_keep" in inspect.signature(cls.forward).parameters
    except (AttributeError, TypeError, ValueError):
        return False


def replay_choices(routing: torch.Tensor, width: int) -> torch.Tensor:
    """Rollout routing (B, S, L, k) in pack's layout (RolloutBatch.extras["routing"]) ->
    the (L, B, width, k) choices `replay_routing` forces on a packed forward of `width`
    positions (-1, i.e. the router's own choice, where the rollout routed nothing)."""
    if routing.shape[1] < width:
        routing = torch.nn.functional.pad(routing, (0, 0, 0, 0, 0, width - routing.shape[1]), value=-1)
    return routing[:, :width].permute(2, 0, 1, 3).long()


def response_logprobs(
    model,
    prompt_ids: list[list[int]],
    response_ids: torch.Tensor,
    response_mask: torch.Tensor,
    pad_id: int,
    temperature: float = 1.0,
    with_entropy: bool = False,
    model_kwargs: dict | None = None,
    routing: torch.Tensor | None = None,
):
    """logp (B, T) of the response tokens, 0 on padding; entropy (B, T) of the full
    next-token distribution if with_entropy else None. Gradients flow unless under no_grad.
    routing: (B, S, L, k) expert choices to replay (MoE routing replay, R3 2510.11370), or None
    for the model's own routing."""
    logp, entropy, _, out = _response_logits(
        model, prompt_ids, response_ids, response_mask, pad_id, temperature, with_entropy, model_kwargs, routing
    )
    return logp, entropy, out


def response_forward(
    model,
    prompt_ids: list[list[int]],
    response_ids: torch.Tensor,
    response_mask: torch.Tensor,
    pad_id: int,
    temperature: float = 1.0,
    *,
    with_entropy: bool = False,
    routing: torch.Tensor | None = None,
    head: Callable[[TokenLogits], dict] | None = None,
    share_prefix: bool = False,
    lengths: list[int] | None = None,
    router_aux: bool = False,
):
    """`response_logprobs` plus what `head` reads from the same forward's logits -> (logp (B, T),
    entropy (B, T) or None, head's tensors: a dict, {} without a head). head gets the forward's
    TokenLogits (harness/objective/extensions.py: logits (B, T, V) at the temperature, their
    log-sum-exp, the mask, the sampled tokens): an extension's `old_forward` / `train_forward`
    (SimKO's top-K log-probs). Gradients flow unless under no_grad. share_prefix: train.share_prefix (each run
    of identical prompts through the model once: harness/models/prefix_groups.py). lengths: each row's span of
    response_mask (`pack`; None: read from the mask). router_aux: an MoE's forward also
    returns its router's load-balancing loss (`output_router_logits=True`: transformers' `out.aux_loss`, with its
    gradient) in the extras, as `router_aux_loss` (objective/router_aux.py)."""
    kwargs = {"output_router_logits": True} if router_aux else None
    rows = (model, prompt_ids, response_ids, response_mask, pad_id, temperature, with_entropy, kwargs, routing)
    if _HEAD_CHUNK.get() > 0:  # train.chunked_head: no (B, T, V) logits held (chunked_head.py)
        logp, entropy, view, out = _chunked_response_stats(
            *rows, share_prefix=share_prefix, lengths=lengths, chunk_tokens=_HEAD_CHUNK.get()
        )
    else:
        logp, entropy, (logits, logz, mask), out = _response_logits(*rows, share_prefix, head is not None, lengths)
        view = TokenLogits(logits, logz, mask, response_ids)
    extras = head(view) if head is not None else {}
    if router_aux:
        extras[AUX_KEY] = out.aux_loss  # transformers' load_balancing_loss_func over the forward's tokens
    return logp, entropy, extras


def _model_logits(rows, share_prefix, lengths):
    """The model's forward over `rows` (response_forward's) -> (logits (B, T, V) at the response positions, out).
    share_prefix: each run of identical prompts through the model once (prefix_groups.py; out is then None)."""
    model, prompt_ids, response_ids, response_mask, pad_id, _, _, model_kwargs, routing = rows
    if share_prefix:
        if routing is not None or model_kwargs:
            raise ValueError("train.share_prefix: no routing replay and no extra model arguments (an MoE is refused)")
        keep = takes_logits_to_keep(model)
        return grouped_response_logits(model, prompt_ids, response_ids, response_mask, pad_id, keep), None
    return _packed_logits(model, prompt_ids, response_ids, response_mask, pad_id, model_kwargs, routing, lengths)


def _chunked_response_stats(*rows, share_prefix, lengths, chunk_tokens: int):
    """`_response_logits`' (logp (B, T), entropy (B, T) or None) from the final hidden states, the head run by
    chunks of positions (chunked_head.py), the view a hook reads them through (ChunkedTokenLogits), and the
    model's output (its aux_loss with output_router_logits; None under share_prefix)."""
    model, prompt_ids, response_ids, response_mask, pad_id, temperature, with_entropy, model_kwargs, routing = rows
    with hidden_instead_of_logits(model) as head:  # the "logits" below are the hidden states (B, T, d)
        hidden, out = _model_logits(rows, share_prefix, lengths)
    mask = response_mask.to(hidden.device)
    logp, logz, entropy = head_stats(head, hidden, response_ids, temperature, with_entropy, chunk_tokens)
    view = ChunkedTokenLogits(head, hidden, logz, mask, response_ids, temperature, chunk_tokens)
    return logp * mask, entropy * mask if with_entropy else None, view, out


def _packed_logits(model, prompt_ids, response_ids, response_mask, pad_id, model_kwargs, routing, lengths=None):
    """The plain forward: every row [prompt | response] (pack) -> (logits (B, T, V) in the model's dtype, out).
    Inside padded_widths the rows are packed to its multiple; the output head still runs on the real positions."""
    if lengths is None:
        lengths = span_lengths(response_mask).tolist()  # one device->host read (the trainer passes them)
    multiple = pad_multiple()
    ids, att, index = pack(prompt_ids, response_ids, response_mask, pad_id, lengths, model.device, multiple)
    replay = replay_routing(model, replay_choices(routing, ids.shape[1])) if routing is not None else nullcontext()
    kwargs, first = dict(model_kwargs or {}), 0
    if takes_logits_to_keep(model):  # the output head only where a response token is predicted (not the prompts)
        first = min(len(p) for p in prompt_ids) - 1  # = index.min(), known on the host
        end = packed_width([len(p) for p in prompt_ids], lengths)  # the rows' own width: no head on the padding
        kwargs["logits_to_keep"] = torch.arange(first, end, device=ids.device)  # (end - first,)
    with replay:
        out = model(input_ids=ids, attention_mask=att, use_cache=False, **kwargs)
    V = out.logits.shape[-1]
    return out.logits.gather(1, (index - first).unsqueeze(-1).expand(-1, -1, V)), out


def _response_logits(
    model,
    prompt_ids,
    response_ids,
    response_mask,
    pad_id,
    temperature,
    with_entropy,
    model_kwargs,
    routing,
    share_prefix=False,
    keep_logits=False,
    lengths=None,
):
    """One forward -> (logp (B, T), entropy or None, (logits (B, T, V), logz (B, T), mask (B, T)), out).
    share_prefix (train.share_prefix): each run of identical prompts goes through the model once
    (harness/models/prefix_groups.py; out is then None). keep_logits: a head reads the (B, T, V) logits at the
    temperature; without, they are None and the token statistics are taken a few rows at a time."""
    rows = (model, prompt_ids, response_ids, response_mask, pad_id, temperature, with_entropy, model_kwargs, routing)
    logits, out = _model_logits(rows, share_prefix, lengths)
    mask = response_mask.to(logits.device)
    if not keep_logits:  # a few rows at a time, bit for bit the whole-tensor formulas (token_stats.py)
        logp, logz, entropy = token_stats(logits, response_ids, temperature, with_entropy)
        return logp * mask, entropy * mask if with_entropy else None, (None, logz, mask), out
    logits = logits.float() / temperature  # (B, T, V)
    logz = torch.logsumexp(logits, dim=-1)  # (B, T)
    tok = response_ids.to(logits.device).unsqueeze(-1)
    logp = (logits.gather(-1, tok).squeeze(-1) - logz) * mask
    entropy = None
    if with_entropy:
        probs = torch.softmax(logits, dim=-1)
        entropy = (logz - (probs * logits).sum(-1)) * mask  # H = log Z - E_p[logit]
    return logp, entropy, (logits, logz, mask), out
