"""`rollout.backend=hf`: transformers `generate` on the training module itself.

Sampler log-probs come from the processed scores (after temperature / top-p), i.e. the
distribution the tokens were actually drawn from, taken at each decoding step by the logits
processor that draws the token (harness/rollout/samplers.py; no (b, T, V) scores are kept).
Stop strings (`rollout.stop`) end a row with the token that completes the first one (kept, as EOS is;
`_StopStrings`, matched on the decoded text), and its text is cut after the stop string. Each row's end, its
mask and the joining of chunks of max_batch rows: hf_rows.py.

Rollout/train mismatch knobs (docs/studies.md (c)):
- `rollout.dtype` different from the policy's dtype (bfloat16 rollout, float32 training):
  generation runs on a copy of the policy in that dtype, kept here and refreshed by
  `sync_weights` after every update. Otherwise the policy module itself generates and
  weight sync is a no-op.
- `rollout.router_noise` = sigma > 0 (MoE only): N(0, sigma^2) noise on every router's
  logits during generation (harness.models.moe.noisy_routing), seeded from the rollout
  seed. Evaluation generates through the same backend, so it sees the same engine.
- `rollout.decode_attention: matmul` (a CPU lever, off by default): the one-token decoding steps of an sdpa model
  compute attention as products in fp32 instead of torch's fused CPU kernel (harness/models/decode_attention.py).
On an MoE model the expert choices made during generation are recorded and returned as
`extras["routing"]` (see `assemble_routing`), for routing replay and router metrics.

`rollout.compile` (auto: on CUDA): generate with a static KV cache, whose decoding forward transformers then runs
under torch.compile in "reduce-overhead" mode (CUDA graphs: one graph launch a token instead of a kernel launch an
op); the prompts are left-padded to a multiple of COMPILE_PAD_TO tokens so that the cache's shape, and the compiled
graph, repeat from one step to the next. Not with an MoE (its routing hooks), rollout.share_prefix (a dynamic cache
of its own) or router noise. On a CPU it was measured not to pay (docs/speed.md), and is off there by default.
"""

from __future__ import annotations

import copy
from contextlib import ExitStack

import torch

from harness import progress, threads
from harness.models.decode_attention import decoding_products
from harness.models.moe import is_moe, noisy_routing, record_routing
from harness.models.prefix_groups import left_pad, prompt_groups
from harness.parallel import full_params, full_tensor
from harness.rollout.base import RolloutBackend, RolloutBatch, SamplingParams, cut_at_stop
from harness.rollout.hf_rows import end_rows, join_chunks
from harness.rollout.row_seeds import RowSampler, row_seed
from harness.rollout.samplers import BatchSampler, GreedySampler, TokenSampler, processors

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
COMPILE_PAD_TO = 64  # rollout.compile: prompt width rounded up to this, so the static cache's shape repeats


def compiled_generate_kwargs(device_type: str) -> dict:
    """generate's arguments for rollout.compile: a static KV cache, the decoding forward under torch.compile
    (reduce-overhead: CUDA graphs on a GPU). transformers compiles it by itself only on an accelerator; on a CPU
    (rollout.compile=true set by hand) it is asked to compile there too."""
    from transformers import CompileConfig

    config = CompileConfig(fullgraph=False, mode="reduce-overhead" if device_type == "cuda" else "default")
    if device_type != "cuda":
        config._compile_all_devices = True  # transformers' own switch for compiling off an accelerator
    return {"cache_implementation": "static", "compile_config": config}


def pad_left_to(input_ids: torch.Tensor, attention: torch.Tensor, multiple: int, pad_id: int):
    """(b, P) left-padded rows padded further on the left to a width that is a multiple of `multiple` (masked
    positions: generate numbers a row's positions from its attention mask, so its tokens keep theirs)."""
    extra = -input_ids.shape[1] % multiple
    if not extra:
        return input_ids, attention
    pad = torch.nn.functional.pad
    return pad(input_ids, (extra, 0), value=pad_id), pad(attention, (extra, 0), value=0)


def assemble_routing(
    calls: list[list[torch.Tensor]],
    prompt_lens: torch.Tensor,
    resp_lens: torch.Tensor,
    prompt_width: int,
    resp_width: int,
) -> torch.Tensor:
    """Expert choices recorded during one cached `generate` -> per-row routing in the
    layout of the TRAINING forward (harness.models.logprobs.pack: prompt at positions
    [0, P_i), response token t at P_i + t, right padding).

    calls: per MoE layer (L), the router's (N, k) indices of each forward of generate:
        the left-padded prefill (b * prompt_width rows), then one (b, k) per decoding step;
        decoding step c (c >= 1) feeds response token c - 1.
    prompt_lens, resp_lens: (b,) P_i and response tokens n_i (EOS included).
    Returns (b, prompt_width + resp_width, L, k) long; -1 where nothing was routed
    (padding, positions >= P_i + n_i, and the last response token when no forward ran on it).
    """
    b = len(prompt_lens)
    k = calls[0][0].shape[-1]
    for layer in calls:
        if layer[0].shape[0] != b * prompt_width or any(x.shape[0] != b for x in layer[1:]):
            raise ValueError(
                f"unexpected routing record: prefill {tuple(layer[0].shape)}, decode "
                f"{sorted({tuple(x.shape) for x in layer[1:]})} for b={b}, prompt width {prompt_width}"
            )
    # (b, W, L, k) in the left-padded generation layout, W = prompt_width + decoding steps
    seq = torch.stack(
        [
            torch.cat([layer[0].view(b, prompt_width, k), *(x.view(b, 1, k) for x in layer[1:])], dim=1)
            for layer in calls
        ],
        dim=2,
    )
    W, S = seq.shape[1], prompt_width + resp_width
    prompt_lens, resp_lens = prompt_lens.to(seq.device), resp_lens.to(seq.device)  # on a GPU: the router's device
    pos = torch.arange(S, device=seq.device).unsqueeze(0)  # (1, S) position in the training layout
    src = pos + (prompt_width - prompt_lens).unsqueeze(1)  # (b, S) same token in the generation layout
    valid = (src < W) & (pos < (prompt_lens + resp_lens).unsqueeze(1))
    out = seq.gather(1, src.clamp(max=W - 1)[:, :, None, None].expand(-1, -1, seq.shape[2], k))
    return torch.where(valid[:, :, None, None], out.long(), torch.full_like(out, -1, dtype=torch.long))


def shared_prefix(model, rows: list[list[int]], input_ids: torch.Tensor, attention: torch.Tensor):
    """rollout.share_prefix: the KV cache of every row's prompt but its last token, computed once per run of
    identical consecutive rows (a prompt's G samples) and copied to each of them, for generate to go on from.
    input_ids, attention: (b, P) the left-padded rows. Returns a transformers DynamicCache of b rows, P - 1
    positions. The prefill then multiplies b / G times fewer rows; its logits round as a batch of other
    width does (a sampled token may differ at a near-tie: docs/speed.md)."""
    from transformers import DynamicCache

    firsts, run = prompt_groups(rows)
    ids, att = input_ids[firsts, :-1], attention[firsts, :-1]  # (U, P - 1)
    position_ids = (att.cumsum(-1) - 1).clamp(min=0)  # as generate numbers a left-padded row
    cache = DynamicCache(config=model.config)
    dev = model.device
    model(input_ids=ids.to(dev), attention_mask=att.to(dev), position_ids=position_ids.to(dev),
          past_key_values=cache, use_cache=True, logits_to_keep=1)  # fmt: skip
    cache.batch_select_indices(run.to(dev))
    return cache


class _StopStrings:
    """generate's stopping criterion for rollout.stop: a row is done once its decoded response (special
    tokens skipped, as RolloutBatch.texts) contains a stop string. (transformers' own stop_strings
    match the vocabulary's token strings, special tokens included: "<bos>" would end a row on "o".)"""

    def __init__(self, tokenizer, stops: tuple[str, ...], prompt_width: int):
        self.tokenizer, self.stops, self.prompt_width = tokenizer, stops, prompt_width

    def __call__(self, input_ids: torch.Tensor, scores, **kwargs) -> torch.Tensor:
        texts = self.tokenizer.batch_decode(input_ids[:, self.prompt_width :], skip_special_tokens=True)
        return torch.tensor([any(s in t for s in self.stops) for t in texts], device=input_ids.device)


class HFBackend(RolloutBackend):
    """dtype: None or "float32" | "bfloat16" (the rollout engine's precision); router_noise:
    std of the noise on router logits during generation (MoE only)."""

    def __init__(
        self,
        model,
        tokenizer,
        max_batch: int = 256,
        dtype: str | None = None,
        router_noise: float = 0.0,
        seeding: str = "batch",
        share_prefix: bool = False,
        compile: bool = False,
        min_new_tokens: int = 0,
        decode_attention: str = "model",
    ):
        self.model = model
        # rollout.decode_attention: matmul = a CPU's one-row decoding attention as products (models/decode_attention.py)
        self.decode_products = decode_attention == "matmul"
        self.min_new_tokens = min_new_tokens  # rollout.min_new_tokens: EOS masked before that many tokens
        self.share_prefix = share_prefix  # rollout.share_prefix: a prompt's G rows share one prefill (shared_prefix)
        self.seeding = seeding  # rollout.seeding: batch (one seed per chunk) | prompt (one per row: row_seeds.py)
        self.tokenizer = tokenizer
        self.max_batch = max_batch
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.eos_id = tokenizer.eos_token_id
        self.moe = is_moe(model)
        if router_noise > 0 and not self.moe:
            raise ValueError(
                f"rollout.router_noise={router_noise} needs an MoE model (this one has a single expert per layer)"
            )
        self.router_noise = float(router_noise)
        # rollout.compile: a static cache under torch.compile, where nothing hooks the forward or brings its own cache
        self.compile = bool(compile) and not self.moe and not share_prefix and self.router_noise == 0
        if share_prefix and self.moe:  # a folder whose architecture the config check could not know
            raise ValueError(
                "rollout.share_prefix=true with an MoE model: the routing record reads generate's own prefill of "
                "every row; set rollout.share_prefix=false"
            )
        if dtype is not None and dtype not in DTYPES:
            raise ValueError(f"rollout.dtype={dtype!r} is unknown; allowed: {list(DTYPES)}")
        # a separate engine copy only when its precision differs from the policy's
        self.engine = model
        if dtype is not None and DTYPES[dtype] != model.dtype:
            self.engine = copy.deepcopy(model).to(DTYPES[dtype]).eval().requires_grad_(False)

    @torch.no_grad()
    def sync_weights(self, model: torch.nn.Module) -> None:
        """Copy the policy's weights into the engine copy (cast to its dtype); no-op when shared."""
        if self.engine is model:
            return
        for dst, src in zip(self.engine.parameters(), model.parameters(), strict=True):
            dst.copy_(full_tensor(src))  # a sharded policy (FSDP): all-gathered

    @torch.no_grad()
    def generate(self, prompts: list[list[int]], group_size: int, params: SamplingParams) -> RolloutBatch:
        threads.tick()  # fewer torch threads while another process holds a core (harness/threads.py)
        rows = [p for p in prompts for _ in range(group_size)]  # groups contiguous
        gen = torch.Generator().manual_seed(params.seed)
        parts = []
        for i in range(0, len(rows), self.max_batch):
            chunk_seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen))
            row_seeds = self._row_seeds(params, group_size, range(i, min(i + self.max_batch, len(rows))))
            parts.append(self._generate_chunk(rows[i : i + self.max_batch], params, chunk_seed, row_seeds))
            progress.advance(len(rows[i : i + self.max_batch]))  # an eval's progress line (harness/progress.py)
        ids, mask, logp, truncated, routing = join_chunks(parts, self.pad_id)  # hf_rows.py
        # each row's tokens under its mask, from 2 reads of the whole batch (not 2 a row)
        kept = [[t for t, k in zip(r, m) if k] for r, m in zip(ids.tolist(), mask.bool().tolist())]
        texts = [cut_at_stop(self.tokenizer.decode(r, skip_special_tokens=True), params.stop) for r in kept]
        extras = {"routing": routing} if self.moe else {}
        return RolloutBatch(
            prompt_ids=rows,
            response_ids=ids,
            response_mask=mask,
            sampler_logp=logp,
            truncated=truncated,
            texts=texts,
            extras=extras,
        )

    def _row_seeds(self, params: SamplingParams, group_size: int, rows: range) -> list[int] | None:
        """rollout.seeding=prompt: each row's seed, from its prompt's index in the whole batch and its sample number."""
        if self.seeding != "prompt":
            return None
        return [row_seed(params.seed, params.first_prompt + r // group_size, r % group_size) for r in rows]

    def _generate_chunk(self, rows: list[list[int]], params: SamplingParams, seed: int, row_seeds=None):
        """row_seeds: None (one seed for the chunk: torch.manual_seed(seed)) or one per row (RowSampler)."""
        model = self.engine
        # on the model's device: generate copies each step's logits to input_ids' device, so ids left on the
        # host would run the draw (softmax, cumsum or multinomial over (b, V)) on the CPU of a GPU run
        input_ids, attention = (t.to(model.device) for t in left_pad(rows, self.pad_id))
        compiled = compiled_generate_kwargs(model.device.type) if self.compile else {}
        if compiled:  # a static cache's shape (and the compiled graph) repeats across steps
            input_ids, attention = pad_left_to(input_ids, attention, COMPILE_PAD_TO, self.pad_id)
        # the last processor draws the token and records its log-prob; generate's argmax takes it (samplers.py)
        if params.temperature == 0:  # greedy (ReMax's baseline response): no draw, no seed
            sampler: TokenSampler = GreedySampler()
        else:
            sampler = RowSampler(row_seeds) if row_seeds is not None else BatchSampler()
        torch.manual_seed(seed)
        was_training = model.training
        model.eval()
        # full_params: a sharded policy's (FSDP) whole weights; decoding_products: rollout.decode_attention=matmul
        with full_params(model), decoding_products(model, self.decode_products), ExitStack() as hooks:
            if self.router_noise > 0:  # entered first: the recorder sees the noisy choices
                hooks.enter_context(noisy_routing(model, self.router_noise, seed))
            calls = hooks.enter_context(record_routing(model)) if self.moe else None
            stops = (
                {"stopping_criteria": [_StopStrings(self.tokenizer, params.stop, input_ids.shape[1])]}
                if params.stop
                else {}
            )
            cache = shared_prefix(model, rows, input_ids, attention) if self.share_prefix else None
            out = model.generate(
                input_ids=input_ids,
                attention_mask=attention,
                past_key_values=cache,  # rollout.share_prefix: each distinct prompt prefilled once
                do_sample=False,
                logits_processor=processors(params.temperature, params.top_p, sampler),
                max_new_tokens=params.max_new_tokens,
                min_new_tokens=min(self.min_new_tokens, params.max_new_tokens) or None,
                pad_token_id=self.pad_id,
                eos_token_id=self.eos_id,
                return_dict_in_generate=True,
                **stops,
                **compiled,  # rollout.compile: static cache, torch.compile
            )
        model.train(was_training)
        resp = out.sequences[:, input_ids.shape[1] :]  # (b, T)
        logp = sampler.sampled_logp()  # (b, T) of the drawn tokens (a row's after its end: masked below)
        resp, mask, logp, truncated = end_rows(resp, logp, self.eos_id, self.pad_id, params.stop, self.tokenizer)
        routing = None
        if calls is not None:
            routing = assemble_routing(calls, attention.sum(-1), mask.sum(-1).long(), input_ids.shape[1], resp.shape[1])
        return resp, mask, logp, truncated, routing
