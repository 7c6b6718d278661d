"""Reference outputs of the entropy controls, for tests/objective/test_objective_entropy_controls.py.

    python benchmarks/reference/entropy_controls.py   # rewrites tests/objective/fixtures/entropy_controls.json

On fixed random inputs with padding (finite garbage on the padded tokens), it runs:

  verl 0.9.1  verl/trainer/ppo/core_algos.py `compute_policy_loss_clip_cov` (l. 1743-1845) and
              `compute_policy_loss_kl_cov` (l. 1848-1925), their bodies copied below verbatim (verl imports Ray,
              Hydra and more; not installed in the project's environment), with `verl_F.masked_mean` /
              `masked_sum` (verl/utils/torch_functional.py l. 285-308) and the token-mean and seq-mean-token-mean
              branches of `agg_loss` (core_algos.py l. 1140-1203) copied as well;
  TRL 1.16    trl/trainer/grpo_trainer.py `get_high_entropy_mask` (l. 1380-1416, one process: the gather is the
              identity), the per-token loss of loss_type grpo / dapo / dr_grpo and its aggregation (l. 3084-3175),
              the entropy bonus and the adaptive update (l. 3186-3245), copied verbatim into `trl_loss` and
              `trl_adaptive` with `self` a namespace holding the config's values.

It stores the inputs and the reference's loss, its gradient w.r.t. the policy's log-probs, masks and the adaptive
coefficient's trajectory. Clip-Cov draws its tokens with torch.randperm: the fixture stores the seed set right
before the call, and the test sets the same seed before ours.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import torch

OUT = Path(__file__).resolve().parents[2] / "tests" / "objective" / "fixtures" / "entropy_controls.json"


# ----------------------------------------------------------------------------- verl 0.9.1 (copied)
class verl_F:  # noqa: N801 -- verl/utils/torch_functional.py
    @staticmethod
    def masked_sum(values, mask, axis=None):
        return (values * mask).sum(axis=axis)

    @staticmethod
    def masked_mean(values, mask, axis=None):
        s = verl_F.masked_sum(values, mask, axis)
        return s / (mask.sum(axis=axis) + 1e-8)


def agg_loss(loss_mat, loss_mask, loss_agg_mode, dp_size=1, batch_num_tokens=None, global_batch_size=None):
    if loss_agg_mode == "token-mean":
        if batch_num_tokens is None:
            batch_num_tokens = loss_mask.sum()
        loss = verl_F.masked_sum(loss_mat, loss_mask) / batch_num_tokens * dp_size
    elif loss_agg_mode == "seq-mean-token-mean":
        seq_mask = torch.sum(loss_mask, dim=-1)  # per-sequence token count
        seq_losses = torch.sum(loss_mat * loss_mask, dim=-1) / (seq_mask + 1e-8)  # token-mean
        seq_mask = (seq_mask > 0).float()  # exclude fully masked sequences
        if global_batch_size is None:
            global_batch_size = seq_mask.sum()
        loss = verl_F.masked_sum(seq_losses, seq_mask) / global_batch_size * dp_size  # seq-mean
    else:
        raise ValueError(f"Invalid loss_agg_mode: {loss_agg_mode}")
    return loss


def verl_clip_cov(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode, config):
    clip_cov_ratio = config.policy_loss.clip_cov_ratio if config.policy_loss.clip_cov_ratio is not None else 0.0002
    cliprange = config.clip_ratio
    cliprange_low = config.clip_ratio_low if config.clip_ratio_low is not None else cliprange
    cliprange_high = config.clip_ratio_high if config.clip_ratio_high is not None else cliprange
    clip_cov_ub = config.policy_loss.clip_cov_ub if config.policy_loss.clip_cov_ub is not None else 5.0
    clip_cov_lb = config.policy_loss.clip_cov_lb if config.policy_loss.clip_cov_lb is not None else 1.0

    assert clip_cov_ratio > 0, "clip_ratio should be larger than 0."

    negative_approx_kl = log_prob - old_log_prob
    ratio = torch.exp(negative_approx_kl)

    pg_losses1 = -advantages * ratio

    if cliprange_low is None:
        cliprange_low = cliprange
    if cliprange_high is None:
        cliprange_high = cliprange

    corr = torch.ones_like(advantages)
    pg_losses2 = -advantages * torch.clamp(ratio, 1 - cliprange_low, 1 + cliprange_high)
    clip_by_origin = (pg_losses2 > pg_losses1) & (response_mask > 0)

    cov_all = (advantages - verl_F.masked_mean(advantages, response_mask)) * (
        log_prob - verl_F.masked_mean(log_prob.detach(), response_mask)
    )
    cov_all[response_mask == 0] = -torch.inf
    cov_all[clip_by_origin] = -torch.inf

    clip_num = max(int(clip_cov_ratio * response_mask.sum().item()), 1)
    top_k_idx = (cov_all < clip_cov_ub) & (cov_all > clip_cov_lb) & (response_mask > 0)
    top_k_idx = torch.nonzero(top_k_idx)

    if len(top_k_idx) > 0:
        perm = torch.randperm(len(top_k_idx))
        top_k_idx = top_k_idx[perm[: min(clip_num, len(top_k_idx))]]
    else:
        top_k_idx = torch.empty((0, 2), device=cov_all.device, dtype=torch.long)

    corr[top_k_idx[:, 0], top_k_idx[:, 1]] = 0

    pg_clipfrac = verl_F.masked_mean((corr == 0).float(), response_mask)

    pg_losses = torch.maximum(pg_losses1, pg_losses2) * corr

    pg_loss = agg_loss(loss_mat=pg_losses, loss_mask=response_mask, loss_agg_mode=loss_agg_mode)
    return pg_loss, float(pg_clipfrac)


def verl_kl_cov(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode, config):
    kl_cov_ratio = config.policy_loss.kl_cov_ratio if config.policy_loss.kl_cov_ratio is not None else 0.0002
    ppo_kl_coef = config.policy_loss.ppo_kl_coef if config.policy_loss.ppo_kl_coef is not None else 1.0

    assert kl_cov_ratio > 0, "kl_cov_ratio should be larger than 0."

    negative_approx_kl = log_prob - old_log_prob
    abs_kl = negative_approx_kl.abs()
    ratio = torch.exp(negative_approx_kl)
    pg_losses1 = -advantages * ratio
    pg_losses_kl = -advantages * ratio + ppo_kl_coef * abs_kl
    pg_losses = pg_losses1

    all_valid = response_mask > 0
    all_valid_idx = torch.nonzero(all_valid.reshape(-1), as_tuple=True)[0]
    all_valid_adv = advantages[all_valid].detach().reshape(-1).cpu()
    all_valid_logp = log_prob[all_valid].detach().reshape(-1).cpu()

    k = min(kl_cov_ratio, len(all_valid_adv))

    if k != 0:
        cov_lst_all = (all_valid_adv - all_valid_adv.mean()) * (all_valid_logp - all_valid_logp.mean())
        k_percent_nums = max(1, int(len(cov_lst_all) * kl_cov_ratio))
        large_cov_idxs = torch.topk(cov_lst_all, k_percent_nums, largest=True).indices

        if len(large_cov_idxs) != 0:
            large_cov_idxs = all_valid_idx[large_cov_idxs]
            pg_losses[large_cov_idxs // advantages.shape[1], large_cov_idxs % advantages.shape[1]] = pg_losses_kl[
                large_cov_idxs // advantages.shape[1], large_cov_idxs % advantages.shape[1]
            ]

    pg_loss = agg_loss(loss_mat=pg_losses, loss_mask=response_mask, loss_agg_mode=loss_agg_mode)
    return pg_loss


# ----------------------------------------------------------------------------- TRL 1.16 (copied)
class _OneProcess:
    """accelerate on one process: pad_across_processes and gather are the identity."""

    def pad_across_processes(self, x, dim=0, pad_index=0):
        return x

    def gather(self, x):
        return x


def get_high_entropy_mask(self, entropies, mask, threshold):
    local = entropies[mask.bool()].float()

    # Use a negative pad_value as a sentinel because entropy values are always >= 0.
    # This guarantees that the sentinel cannot collide with any real entropy value.
    pad_value = -1e9

    # Pad across processes so that every rank has the same tensor length
    padded = self.accelerator.pad_across_processes(local, dim=0, pad_index=pad_value)
    gathered = self.accelerator.gather(padded)

    # Drop sentinel values (safe because no entropy can be negative)
    gathered = gathered[gathered != pad_value]

    if gathered.numel() == 0:
        return torch.zeros_like(entropies, dtype=torch.bool)

    entropy_threshold = torch.quantile(gathered, threshold)
    masked_entropies = entropies * mask.float()
    entropy_mask = masked_entropies >= entropy_threshold
    return entropy_mask & mask.bool()  # ensure padding tokens are always masked out


def trl_loss(self, per_token_logps, old_per_token_logps, advantages, mask, entropies):
    """grpo_trainer.py _compute_loss from the entropy mask to the entropy bonus (no KL, no IS correction, one
    process, no gradient accumulation), loss_type grpo / dapo / dr_grpo."""
    if self.top_entropy_quantile < 1.0:
        entropy_mask = get_high_entropy_mask(self, entropies, mask, 1 - self.top_entropy_quantile)
    else:
        entropy_mask = None
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(1)
    log_ratio = per_token_logps - old_per_token_logps
    log_importance_weights = log_ratio
    coef_1 = torch.exp(log_importance_weights)
    coef_2 = torch.clamp(coef_1, 1 - self.epsilon_low, 1 + self.epsilon_high)
    per_token_loss1 = coef_1 * advantages
    per_token_loss2 = coef_2 * advantages
    per_token_loss = -torch.min(per_token_loss1, per_token_loss2)
    if entropy_mask is not None:
        per_token_loss = per_token_loss * entropy_mask
    if self.loss_type in ["grpo", "sapo"]:
        loss = ((per_token_loss * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
    elif self.loss_type == "dr_grpo":
        loss = (per_token_loss * mask).sum() / (per_token_loss.size(0) * self.max_completion_length)
    elif self.loss_type in ["cispo", "dapo", "vespo"]:
        normalizer = mask.sum().clamp(min=1.0)  # num_items_in_batch of this one batch
        loss = (per_token_loss * mask).sum() / normalizer
    if self._entropy_bonus_enabled:
        effective_mask = mask if entropy_mask is None else mask * entropy_mask
        accumulation_factor = 1.0
        entropy_loss = (entropies * effective_mask).sum() / effective_mask.sum().clamp(min=1.0) / accumulation_factor
        if self.use_adaptive_entropy:
            apply_coef = self.entropy_coef if self._last_world_entropy <= self.args.entropy_target else 0.0
        else:
            apply_coef = self.entropy_coef
        loss = loss - apply_coef * entropy_loss
    return loss, entropy_mask


def trl_adaptive(self, window_entropies: list[float]) -> list[dict]:
    """The adaptive update at each optimizer-step boundary (one process; the window's mean entropy given)."""
    out = []
    for world_entropy in window_entropies:
        apply_coef = self.entropy_coef if self._last_world_entropy <= self.args.entropy_target else 0.0
        if world_entropy <= self.args.entropy_target:
            self.entropy_coef = min(self.entropy_coef + self.args.entropy_coef_delta, self.args.entropy_coef_max)
        else:
            self.entropy_coef = max(self.entropy_coef - self.args.entropy_coef_delta, self.args.entropy_coef_min)
        self._last_world_entropy = world_entropy
        out.append({"applied": apply_coef, "coef": self.entropy_coef})
    return out


# ----------------------------------------------------------------------------- inputs
def inputs(seed: int, B: int = 6, T: int = 12) -> dict:
    """Random log-probs, advantages (per token) and entropies with padding: each row has 2..T tokens; the padded
    tokens hold finite garbage (5.0)."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(2, T + 1, (B,), generator=g)
    mask = (torch.arange(T)[None, :] < lengths[:, None]).double()
    old = -torch.rand(B, T, generator=g, dtype=torch.float64) * 3.0
    logp = old + 0.3 * torch.randn(B, T, generator=g, dtype=torch.float64)
    adv = torch.randn(B, generator=g, dtype=torch.float64) * 2.0
    ent = torch.rand(B, T, generator=g, dtype=torch.float64) * 3.0
    garbage = torch.full_like(old, 5.0)
    pad = mask == 0
    return {
        "mask": mask,
        "old_logp": torch.where(pad, garbage, old),
        "logp": torch.where(pad, garbage, logp.clamp(max=-1e-3)),
        "adv": adv,
        "entropy": torch.where(pad, garbage, ent),
    }


def _grad(fn, x: dict) -> tuple[float, list]:
    lp = x["logp"].clone().requires_grad_(True)
    loss = fn(lp)
    loss.backward()
    return float(loss.detach()), lp.grad.tolist()


def _verl_config(**policy_loss) -> SimpleNamespace:
    return SimpleNamespace(
        clip_ratio=0.2, clip_ratio_low=0.2, clip_ratio_high=0.28, policy_loss=SimpleNamespace(**policy_loss)
    )


def cov_cases() -> list[dict]:
    cases = []
    for seed in range(4):
        x = inputs(seed)
        adv_tok = x["adv"][:, None].expand_as(x["logp"]).contiguous()
        for agg in ("token-mean", "seq-mean-token-mean"):
            cfg = _verl_config(clip_cov_ratio=0.1, clip_cov_lb=0.2, clip_cov_ub=3.0)
            torch.manual_seed(1000 + seed)
            loss, grad = _grad(
                lambda lp, x=x, a=adv_tok, g=agg, c=cfg: verl_clip_cov(x["old_logp"], lp, a, x["mask"], g, c)[0], x
            )
            torch.manual_seed(1000 + seed)
            frac = verl_clip_cov(x["old_logp"], x["logp"], adv_tok, x["mask"], agg, cfg)[1]
            cases.append(_case("clip_cov", seed, agg, x, loss, grad, torch_seed=1000 + seed, frac=frac))
            cfg = _verl_config(kl_cov_ratio=0.1, ppo_kl_coef=1.0)
            loss, grad = _grad(
                lambda lp, x=x, a=adv_tok, g=agg, c=cfg: verl_kl_cov(x["old_logp"], lp, a, x["mask"], g, c), x
            )
            cases.append(_case("kl_cov", seed, agg, x, loss, grad))
    return cases


def _case(kind: str, seed: int, agg: str, x: dict, loss: float, grad: list, **more) -> dict:
    """One comparison: the inputs are `inputs(seed)` (stored once per seed in the fixture's "inputs")."""
    return {"kind": kind, "seed": seed, "agg": agg, "loss": loss, "grad_logp": grad, **more}


def _trl_self(loss_type: str, quantile: float, coef: float, adaptive: bool = False, last: float = math.inf):
    return SimpleNamespace(
        accelerator=_OneProcess(),
        top_entropy_quantile=quantile,
        loss_type=loss_type,
        epsilon_low=0.2,
        epsilon_high=0.28,
        max_completion_length=12,
        entropy_coef=coef,
        use_adaptive_entropy=adaptive,
        _entropy_bonus_enabled=coef != 0.0 or adaptive,
        _last_world_entropy=last,
        args=SimpleNamespace(entropy_target=1.4, entropy_coef_delta=0.005, entropy_coef_min=0.0, entropy_coef_max=0.02),
    )


def trl_cases() -> list[dict]:
    cases = []
    for seed in range(3):
        x = inputs(100 + seed)
        for loss_type in ("grpo", "dapo", "dr_grpo"):
            for quantile, coef in ((0.2, 0.01), (0.5, 0.0), (0.0, 0.03), (1.0, 0.02)):
                me = _trl_self(loss_type, quantile, coef)
                out = {}

                def fn(lp, me=me, out=out, x=x):
                    loss, emask = trl_loss(me, lp, x["old_logp"], x["adv"], x["mask"], x["entropy"])
                    out["mask"] = None if emask is None else emask.tolist()
                    return loss

                loss, grad = _grad(fn, x)
                case = _case("trl", seed, loss_type, x, loss, grad, quantile=quantile, entropy_coef=coef)
                cases.append({**case, "entropy_mask": out["mask"]})
    return cases


def adaptive_case() -> dict:
    entropies = [2.0, 1.5, 1.3, 1.2, 1.39, 1.41, 1.0, 0.5, 0.4, 0.3, 0.2, 1.6, 1.7, 1.8, 1.9, 2.0, 2.1, 1.0]
    me = _trl_self("grpo", 1.0, 0.003, adaptive=True)
    return {"entropy_coef": 0.003, "args": vars(me.args), "window_entropies": entropies,
            "trajectory": trl_adaptive(me, entropies)}  # fmt: skip


def main() -> None:
    fixture = {
        "about": "written by benchmarks/reference/entropy_controls.py: verl 0.9.1 clip_cov / kl_cov and TRL 1.16 "
        "top_entropy_quantile, entropy bonus and adaptive entropy on random inputs with padding",
        "inputs": {str(s): {k: v.tolist() for k, v in inputs(s).items()} for s in (0, 1, 2, 3, 100, 101, 102)},
        "cov": cov_cases(),
        "trl": trl_cases(),
        "adaptive": adaptive_case(),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(fixture))
    print(f"wrote {OUT} ({len(fixture['cov'])} cov cases, {len(fixture['trl'])} TRL cases)")


if __name__ == "__main__":
    main()
