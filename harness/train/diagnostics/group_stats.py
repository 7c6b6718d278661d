"""Per-prompt-group statistics of each step, for the difficulty-bias study (docs/studies.md (b)).

Shapes: N prompt groups, G = group size, B = N*G rows (groups contiguous), T response length.

`group_records(ep, adv, mask, step)` returns step metrics plus one record per group, which
ride inside the step's metric record under `rundir.GROUP_RECORDS` and are written to
DIR/groups.jsonl by `RunDir.flush` (so they are kept in the checkpoint and flushed after
it, like every metric: see harness/train/core/rundir.py). A record:

    step, group (index within the step), difficulty, G, k (correct answers), p = k/G,
    reward_mean, reward_std (POPULATION std of the rewards the objective sees),
    abs_adv_sum = sum_i |A_i| over the group's G advantages, as the objective uses them

With binary rewards (k ones, G-k zeros) and the group-mean baseline, u_i = r_i - p, so
    sum_i |u_i| = k(1-p) + (G-k)p = 2G p(1-p)                 (scale: none)
    std_pop = sqrt(p(1-p))  =>  sum_i |A_i| = 2G sqrt(p(1-p))  (scale: group_std, std: population)
At G = 16 a prompt solved once (p = 1/16) gets 2G sqrt(p(1-p)) / (2G p(1-p)) = 1/sqrt(p(1-p))
~ 4.1x the mass of no-std scaling, against 2x at p = 1/2: about 2x the relative weight.

Step metrics:
    groups/zero_var_frac  share of the trained groups whose rewards are all equal (no signal);
                          after dynamic sampling, unlike groups/zero_std_frac (first round, before it)
    adv/share_extreme     share of the batch's sum|A| from extreme groups (p < 0.2 or p > 0.8)
and, every `train.grad_share_every` steps, `extreme_grad_share`:
    grad/share_extreme    ||g_E|| / (||g_E|| + ||g_R||): g_E the policy-loss gradient of the
                          extreme groups' rows, g_R that of the other rows, both at the rollout
                          policy (ratio 1) with the WHOLE batch's denominators, so g_E + g_R is
                          the gradient of the step's loss on the whole batch. In [0, 1], and
                          defined even when g_E and g_R cancel (||g_E|| / ||g_E + g_R|| is not).
    grad/norm_extreme, grad/norm_rest, grad/norm_total (= ||g_E + g_R||), perf/grad_share_seconds
    (counted inside the step's perf/update_seconds)
"""

from __future__ import annotations

import math
import time

import torch

from harness.objective import inputs_needed
from harness.objective.aggregation import batch_denominators
from harness.train.core.batch import Batch
from harness.train.core.episode import Episode
from harness.train.core.forward import forward_loss
from harness.train.core.rundir import GROUP_RECORDS
from harness.train.core.step_context import StepContext

P_LOW, P_HIGH = 0.2, 0.8  # extreme groups: p < P_LOW (hard for the policy) or p > P_HIGH (easy)


def group_p(ep: Episode) -> torch.Tensor:
    """(N,) fraction of correct answers per group, p = k/G."""
    return ep.correct.view(-1, ep.group_size).float().mean(-1)


def extreme_rows(ep: Episode) -> torch.Tensor:
    """(B,) bool: the rows of groups with p < P_LOW or p > P_HIGH."""
    p = group_p(ep)
    return ((p < P_LOW) | (p > P_HIGH)).repeat_interleave(ep.group_size)


def _row_abs_adv(adv: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """(B,) |A_i|: sequence advantages (B,) as they are; per-token ones (B, T) (critic) as the
    mean of |A_t| over the row's response tokens."""
    a = adv.detach().abs().double().cpu()
    if a.dim() == 1:
        return a
    m = (mask.detach().cpu() > 0).double() if mask is not None else torch.ones_like(a)
    return (a * m).sum(-1) / m.sum(-1).clamp(min=1)


def group_records(ep: Episode, adv: torch.Tensor, mask: torch.Tensor | None, step: int) -> dict:
    """adv: (B,) or (B, T) as the objective uses it; mask: (B, T) (only for per-token adv).
    Returns {groups/zero_var_frac, adv/share_extreme, GROUP_RECORDS: [one dict per group]}."""
    G = ep.group_size
    r = ep.rewards.detach().double().cpu().view(-1, G)  # (N, G)
    k = ep.correct.view(-1, G).sum(-1)  # (N,)
    abs_adv = _row_abs_adv(adv, mask).view(-1, G).sum(-1)  # (N,) sum_i |A_i|
    std = r.std(dim=-1, correction=0) if G > 1 else torch.zeros(r.shape[0], dtype=r.dtype)
    same = r.amax(-1) == r.amin(-1)
    p = k.double() / G
    extreme = (p < P_LOW) | (p > P_HIGH)
    total = float(abs_adv.sum())
    ks, ps, stds, sames, sums = k.tolist(), p.tolist(), std.tolist(), same.tolist(), abs_adv.tolist()  # one read each
    records = [
        {
            "step": int(step),
            "group": i,
            "difficulty": prob.difficulty,
            "G": G,
            "k": int(ks[i]),
            "p": float(ps[i]),
            "reward_mean": float(r[i].mean()),
            "reward_std": float(0.0 if sames[i] else stds[i]),
            "abs_adv_sum": float(sums[i]),
        }
        for i, prob in enumerate(ep.problems)
    ]
    return {
        "groups/zero_var_frac": float(same.double().mean()) if len(same) else float("nan"),
        "adv/share_extreme": float(abs_adv[extreme].sum()) / total if total > 0 else float("nan"),
        GROUP_RECORDS: records,
    }


def extreme_grad_share(sc: StepContext, batch: Batch, ep: Episode) -> dict[str, float]:
    """Gradient-norm share of the extreme groups (see the module docstring). One extra
    forward/backward over the batch's rows, split in two; the model's .grad is left empty.

    sc: the step's context (its policy, components, forwards); batch: as for policy_update (its routing
    (B,S,L,k) replayed when objective.routing_replay).
    The ratio is taken against the current policy (= the rollout policy, before the update), so
    the gradient is the update's first-step direction. The loss is the update's own (core/forward.py
    forward_loss), so every input the objective needs is there (SimKO's top-K, λ-GRPO's λ from
    `sc.components`); the components' .grad is left empty too."""
    t0 = time.perf_counter()
    model, probe = sc.model, sc.probe()  # ratio 1, no observer fed
    obj, tr = sc.cfg.objective, sc.cfg.train
    rows_e = extreme_rows(ep)
    num_seqs, num_tokens = batch_denominators(batch.mask)  # the whole batch's: g_E + g_R = g_total exactly
    live = torch.ones(len(rows_e), dtype=torch.bool)
    needs = inputs_needed(obj)
    if needs.adv_only_gradient:  # A = 0 rows (zero-variance groups) give an exactly zero gradient: skip them
        a = batch.adv.detach().cpu()
        live = (a != 0).any(-1) if a.dim() == 2 else a != 0
    params = [q for q in model.parameters() if q.requires_grad]
    model.train()
    grads: dict[str, list[torch.Tensor | None]] = {}
    for name, sel in (("extreme", rows_e & live), ("rest", ~rows_e & live)):
        model.zero_grad(set_to_none=True)
        for part in batch.rows(sel.nonzero().flatten().tolist()).micro_batches(tr.micro_batch_size):
            forward_loss(probe, part, (num_seqs, num_tokens))[0].backward()
        grads[name] = [None if q.grad is None else q.grad.detach().float().clone() for q in params]
    model.zero_grad(set_to_none=True)
    for c in sc.components:
        c.zero_grad()

    def norm(gs) -> float:
        return math.sqrt(sum(float((g**2).sum()) for g in gs if g is not None))

    total = [ge if gr is None else (gr if ge is None else ge + gr) for ge, gr in zip(grads["extreme"], grads["rest"])]
    ne, nr = norm(grads["extreme"]), norm(grads["rest"])
    return {
        "grad/share_extreme": ne / (ne + nr) if ne + nr > 0 else float("nan"),
        "grad/norm_extreme": ne,
        "grad/norm_rest": nr,
        "grad/norm_total": norm(total),
        "perf/grad_share_seconds": time.perf_counter() - t0,
    }  # inside perf/update_seconds of the step
