"""One whole GRPO training step, prompt to optimizer step, in one file: read this before the trainer.

reference_grpo.py is GRPO's loss; this is the loop around it, for a dense model on one process
with transformers' own `generate`, in plain torch (the model is any transformers causal LM):

    1. collect   G samples per prompt: `model.generate(do_sample=True)`, groups contiguous
    2. score     a reward per response (the task's verifier, given as a function of the texts)
    3. advantage A_i = (r_i - mean(r)) / (std(r) + eps) within each group        (reference_grpo)
    4. pi_old, pi_ref: one no-grad forward each over the sampled responses
    5. update    the rows shuffled into mini-batches; per mini-batch: forward with gradient,
                 the clipped surrogate + beta k3 KL, the per-response mean, backward, gradient
                 clipping, one AdamW step

`RLTrainer.step` (harness/train/rl/step.py) with the `grpo` preset computes the same step: the test
(tests/train/test_reference_loop.py) runs both on the tiny model from the same weights,
prompts and seeds, and finds the same weights after the step (1e-6). Everything else in the trainer
is something this file leaves out (docs/architecture.md lists what each part adds): other objectives,
micro-batches, several processes, vLLM, MoE routing, mixed precision, checkpoints, evals, metrics.

Glossary: N prompts, G samples per prompt, B = N*G rows (each prompt's G rows contiguous),
P the widest prompt, T the longest response, M the response mask (B, T).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from harness.objective.reference_grpo import aggregate, clipped_surrogate, group_advantage, k3


def left_pad(rows: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Prompts -> input_ids (B, P) padded on the left, attention mask (B, P): how `generate` takes a batch."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    att = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, width - len(r) :] = torch.tensor(r, dtype=torch.long)
        att[i, width - len(r) :] = 1
    return ids, att


@dataclass(frozen=True)
class Settings:
    """The step's knobs, GRPO's defaults (DeepSeekMath: eps 0.2, beta 0.04)."""

    G: int = 8  # samples per prompt
    mini_batches: int = 1  # optimizer steps per batch; after the first, the policy is off-policy and the clip binds
    max_new_tokens: int = 64
    temperature: float = 1.0  # sampling, and the log-probs of the loss at the same temperature
    top_p: float = 1.0
    eps_low: float = 0.2
    eps_high: float = 0.2
    beta: float = 0.04  # the k3 KL to pi_ref, in the loss
    adv_eps: float = 1e-6
    grad_clip: float | None = 1.0  # the gradient's global L2 norm


def pad_of(tokenizer) -> int:
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id


@torch.no_grad()
def collect(model, tokenizer, prompts: list[list[int]], s: Settings, seed: int):
    """1. G samples of every prompt -> (rows, responses (B, T), mask M (B, T), truncated (B,)).
    A response ends with its first EOS (kept, and masked in); a row without one hit max_new_tokens."""
    pad_id, eos_id = pad_of(tokenizer), tokenizer.eos_token_id
    rows = [p for p in prompts for _ in range(s.G)]  # a prompt's G rows contiguous: its group
    ids, att = left_pad(rows, pad_id)
    torch.manual_seed(seed)  # generate draws each token with torch.multinomial on the global generator
    model.eval()
    out = model.generate(
        input_ids=ids, attention_mask=att, do_sample=True, temperature=s.temperature, top_p=s.top_p, top_k=0,
        max_new_tokens=s.max_new_tokens, pad_token_id=pad_id, eos_token_id=eos_id,
    )  # fmt: skip
    model.train()
    resp = out[:, ids.shape[1] :]  # (B, T)
    is_eos = resp == eos_id
    mask = (is_eos.long().cumsum(-1) - is_eos.long()) == 0  # up to and including the first EOS
    resp = torch.where(mask, resp, torch.full_like(resp, pad_id))
    return rows, resp, mask.float(), ~is_eos.any(-1)


def response_logp(
    model, rows: list[list[int]], resp: torch.Tensor, mask: torch.Tensor, pad_id: int, temperature: float
) -> torch.Tensor:
    """log pi(o_it | q_i, o_i<t) (B, T) of the sampled tokens, at the sampling temperature, 0 on padding.
    Each row is its prompt then its response, padded on the right; the logits at the position before
    a token predict it."""
    lens = mask.sum(-1).long().tolist()
    width = max(len(r) + n for r, n in zip(rows, lens))
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    att = torch.zeros_like(ids)
    for i, (r, n) in enumerate(zip(rows, lens)):
        ids[i, : len(r) + n] = torch.tensor(r + resp[i, :n].tolist(), dtype=torch.long)
        att[i, : len(r) + n] = 1
    logits = model(input_ids=ids, attention_mask=att).logits.float() / temperature  # (B, width, V)
    T = resp.shape[1]
    at = (torch.tensor([len(r) - 1 for r in rows]).unsqueeze(1) + torch.arange(T)).clamp(max=width - 1)  # (B, T)
    logits = logits.gather(1, at.unsqueeze(-1).expand(-1, -1, logits.shape[-1]))  # (B, T, V)
    logp = logits.gather(-1, resp.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)
    return logp * mask


def grpo_loss(logp, old_logp, ref_logp, mask, adv, *, eps_low: float, eps_high: float, beta: float):
    """The mini-batch's loss (reference_grpo.grpo_step's lines 2-5 on rows already given their advantage A (b,))."""
    m = mask > 0
    ratio = torch.exp(torch.where(m, logp - old_logp, 0.0))  # rho_it  (b, T)
    loss_tok = clipped_surrogate(ratio, adv.unsqueeze(-1).expand_as(logp), eps_low, eps_high)
    if beta > 0:
        loss_tok = loss_tok + beta * k3(logp, ref_logp)
    return aggregate(loss_tok, m, "response", None)  # 1/b sum_i 1/|o_i| sum_t M l_it


def update(model, optimizer, rows, resp, mask, adv, old_logp, ref_logp, s: Settings, shuffle_seed: int, pad_id: int):
    """5. The rows shuffled into s.mini_batches mini-batches; each: the loss with gradient, backward, the
    gradient clipped, one optimizer step. Returns each mini-batch's loss."""
    model.train()
    order = torch.randperm(len(rows), generator=torch.Generator().manual_seed(shuffle_seed)).tolist()
    size, losses = len(rows) // s.mini_batches, []
    for m in range(s.mini_batches):
        idx = order[m * size : (m + 1) * size]
        optimizer.zero_grad()
        logp = response_logp(model, [rows[i] for i in idx], resp[idx], mask[idx], pad_id, s.temperature)
        ref = None if ref_logp is None else ref_logp[idx]
        loss = grpo_loss(logp, old_logp[idx], ref, mask[idx], adv[idx], eps_low=s.eps_low, eps_high=s.eps_high,
                         beta=s.beta)  # fmt: skip
        loss.backward()
        if s.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), s.grad_clip)
        optimizer.step()
        losses.append(loss.item())
    return losses


def grpo_train_step(model, ref_model, optimizer, tokenizer, prompts: list[list[int]], reward_fn, s: Settings, *,
                    seed: int, shuffle_seed: int) -> dict:  # fmt: skip
    """One GRPO step of `model` (its AdamW `optimizer`) on `prompts` (token ids). ref_model: the frozen pi_ref
    (the initial weights); reward_fn(texts, truncated) -> one float a response; seed: the sampling's;
    shuffle_seed: the rows' order into mini-batches. Returns the step's rewards, advantages and mean loss."""
    pad_id = pad_of(tokenizer)
    rows, resp, mask, truncated = collect(model, tokenizer, prompts, s, seed)  # 1. G samples a prompt
    texts = [tokenizer.decode(resp[i][mask[i] > 0].tolist(), skip_special_tokens=True) for i in range(len(rows))]
    rewards = torch.tensor(reward_fn(texts, truncated.tolist()), dtype=torch.float32)  # 2. r (B,)
    adv = group_advantage(rewards, s.G, True, s.adv_eps).float()  # 3. A (B,)
    with torch.no_grad():  # 4. pi_old and pi_ref on the sampled tokens
        old_logp = response_logp(model, rows, resp, mask, pad_id, s.temperature)
        ref_logp = response_logp(ref_model, rows, resp, mask, pad_id, s.temperature) if s.beta > 0 else None
    losses = update(model, optimizer, rows, resp, mask, adv, old_logp, ref_logp, s, shuffle_seed, pad_id)  # 5.
    return {"rewards": rewards, "adv": adv, "loss": sum(losses) / len(losses), "texts": texts}
