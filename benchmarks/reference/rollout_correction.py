"""The rollout correction as TRL 1.16 and verl 0.9.1 compute it, on fixed random inputs with padding: writes
tests/objective/fixtures/rollout_correction.json, which tests/objective/test_objective_rollout_correction.py
compares harness/objective/rollout_correction.py to (1e-6).

    python benchmarks/reference/rollout_correction.py          # needs TRL 1.16 (requirements-bench.txt)

What is whose:
  - TRL's importance-sampling weight (GRPOConfig.vllm_importance_sampling_mode, _clip_min, _clip_max) is computed
    inline in GRPOTrainer._generate_and_score_completions: its lines are copied VERBATIM below
    (`trl_importance_sampling_ratio`, from trl/trainer/grpo_trainer.py 1.16.0, lines 2660-2708; self.* become
    arguments, the min_val / max_val conditionals are joined on one line each); the script checks that the
    installed file still holds the lines that compute.
  - TRL's off-policy sequence mask is a static method, called as is: GRPOTrainer.get_off_policy_mask.
  - verl's `compute_rollout_correction_weights` (verl/trainer/ppo/rollout_corr_helper.py 0.9.1, lines 522-657)
    imports Ray-side modules (DataProto, its config classes): its weight computation is copied VERBATIM below
    (`verl_rollout_is_weights`, the metrics and batch normalisation left out), with verl_F.masked_sum
    (verl/utils/torch_functional.py 0.9.1, line 273). verl is not installed in the project's environment:
    `pip download verl==0.9.1 --no-deps` and read the wheel.
M2PO (2510.01161) has no TRL or verl 0.9.1 code; its test is hand-computed.
"""

from __future__ import annotations

import inspect
import json
import math
from pathlib import Path

import torch
import trl
from trl.trainer.grpo_trainer import GRPOTrainer

OUT = Path(__file__).resolve().parents[2] / "tests" / "objective" / "fixtures" / "rollout_correction.json"
B, T = 8, 7
LENGTHS = [7, 5, 1, 6, 3, 7, 2, 4]  # padding on the right of the shorter rows
TRL_MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")
BOUNDS = ((None, 3.0), (0.5, 5.0), (0.8, 1.2), (0.9, None))  # (clip_min, clip_max): TRL's default, IcePop's, ...
OFF_POLICY = (0.0, 0.02, 0.1, 0.5)  # delta
VERL_THRESHOLDS = (2.0, 1.5, "0.5_5.0", "0.8_1.2")  # TIS (upper) and IcePop (lower_upper)


# ---------------------------------------------------------------------------------------------------- TRL (verbatim)
def trl_importance_sampling_ratio(old_per_token_logps, sampling_per_token_logps, mask, mode, clip_min, clip_max):
    """trl/trainer/grpo_trainer.py 1.16.0, lines 2662-2703 (self.* replaced by the arguments)."""
    per_token_logps_diff = (old_per_token_logps - sampling_per_token_logps) * mask
    # Tokens whose sampling logprob was NaN (unavailable from vLLM) get a zero difference, so their
    # importance ratio is exactly 1 (no correction) rather than propagating NaN through the loss.
    per_token_logps_diff = torch.nan_to_num(per_token_logps_diff, nan=0.0)

    sequence_level_is = mode in ["sequence_mask", "sequence_truncate"]
    if sequence_level_is:
        per_sequence_logps_diff = per_token_logps_diff.sum(dim=-1, keepdim=True)
        logps_diff = per_sequence_logps_diff
    else:
        logps_diff = per_token_logps_diff

    vllm_importance_sampling_ratio = torch.exp(logps_diff)

    if mode in ["sequence_truncate", "token_truncate"]:
        vllm_importance_sampling_ratio = torch.clamp(
            vllm_importance_sampling_ratio,
            min=clip_min,
            max=clip_max,
        )
    elif mode in ["sequence_mask", "token_mask"]:
        min_val = clip_min if clip_min is not None else -math.inf
        max_val = clip_max if clip_max is not None else math.inf

        invalid_mis_mask = (vllm_importance_sampling_ratio < min_val) | (vllm_importance_sampling_ratio > max_val)
        vllm_importance_sampling_ratio = vllm_importance_sampling_ratio.masked_fill(invalid_mis_mask, value=0.0)
    return vllm_importance_sampling_ratio


def _check_trl_source() -> None:
    """The copied lines are the installed TRL's (whitespace aside)."""
    src = " ".join(inspect.getsource(GRPOTrainer).split())
    for line in (
        "per_token_logps_diff = (old_per_token_logps - sampling_per_token_logps) * mask",
        "per_token_logps_diff = torch.nan_to_num(per_token_logps_diff, nan=0.0)",
        "per_sequence_logps_diff = per_token_logps_diff.sum(dim=-1, keepdim=True)",
        "vllm_importance_sampling_ratio = torch.exp(logps_diff)",
        "invalid_mis_mask = (vllm_importance_sampling_ratio < min_val) | (",
        "vllm_importance_sampling_ratio = vllm_importance_sampling_ratio.masked_fill( invalid_mis_mask, value=0.0 )",
    ):
        assert line in src, f"TRL {trl.__version__} no longer holds: {line}"


# --------------------------------------------------------------------------------------------------- verl (verbatim)
SAFETY_BOUND = 20.0  # verl/trainer/ppo/rollout_corr_helper.py 0.9.1, line 75


def masked_sum(values, mask, axis=None):  # verl/utils/torch_functional.py 0.9.1, line 273
    valid_values = torch.where(mask.bool(), values, 0.0)
    return (valid_values * mask).sum(axis=axis)


def _parse_rollout_is_threshold(threshold_spec):  # rollout_corr_helper.py 0.9.1, lines 93-129 (checks left out)
    if isinstance(threshold_spec, int | float):
        upper = float(threshold_spec)
        lower = None
    else:
        lower_str, upper_str = threshold_spec.strip().split("_", 1)
        lower = float(lower_str)
        upper = float(upper_str)
    return upper, lower


def verl_rollout_is_weights(log_ratio, response_mask, rollout_is, rollout_is_threshold):
    """rollout_corr_helper.py 0.9.1, compute_rollout_correction_weights lines 570-607 and 628: verbatim but for the
    lines that only feed its metrics (log_ratio_for_metrics) and the argument checks."""
    rollout_is_threshold_upper, rollout_is_threshold_lower = _parse_rollout_is_threshold(rollout_is_threshold)
    use_icepop = rollout_is_threshold_lower is not None

    if rollout_is == "token":
        log_ratio_safe: torch.Tensor = torch.clamp(log_ratio, min=-SAFETY_BOUND, max=SAFETY_BOUND)
        raw_rollout_is_weights: torch.Tensor = torch.exp(log_ratio_safe)
    elif rollout_is == "sequence":
        log_ratio_sum: torch.Tensor = masked_sum(log_ratio, response_mask, axis=-1).unsqueeze(-1)
        log_ratio_sum_safe: torch.Tensor = torch.clamp(log_ratio_sum, min=-SAFETY_BOUND, max=SAFETY_BOUND)
        raw_rollout_is_weights = torch.exp(log_ratio_sum_safe).expand_as(log_ratio)
    raw_rollout_is_weights = raw_rollout_is_weights * response_mask
    if not use_icepop:
        rollout_is_weights = raw_rollout_is_weights.clamp(max=rollout_is_threshold_upper)
    else:
        token_kept_mask = (raw_rollout_is_weights >= rollout_is_threshold_lower) & (
            raw_rollout_is_weights <= rollout_is_threshold_upper
        )
        rollout_is_weights = torch.where(
            token_kept_mask, raw_rollout_is_weights, torch.zeros_like(raw_rollout_is_weights)
        )
    return rollout_is_weights.detach()


# ------------------------------------------------------------------------------------------------------- the inputs
def inputs() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(45)
    mask = (torch.arange(T).unsqueeze(0) < torch.tensor(LENGTHS).unsqueeze(1)).float()
    old = -torch.rand(B, T, generator=g) * 3.0  # log pi_old (the trainer's)
    sampler = old + 0.6 * torch.randn(B, T, generator=g)  # log pi_rollout: the sampler's, off by ~0.6 nats
    logp = old + 0.1 * torch.randn(B, T, generator=g)  # log pi_theta now
    garbage = torch.full((B, T), float("nan"))  # padding holds garbage: the code must not read it
    old, sampler, logp = (torch.where(mask > 0, x, garbage) for x in (old, sampler, logp))
    adv = torch.tensor([1.0, -0.5, -1.2, 0.7, -0.3, 0.0, -2.0, -0.8])
    return {"mask": mask, "old_logp": old, "rollout_logp": sampler, "logp": logp, "adv": adv}


def _clean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The references read padding as 0 (TRL multiplies the log-ratio by the mask; NaN * 0 is NaN, so they are
    given zeros there, as their callers' padded tensors hold)."""
    return torch.where(mask > 0, x, torch.zeros_like(x))


def cases(x: dict[str, torch.Tensor]) -> dict[str, list]:
    m = x["mask"]
    old, sampler, logp = (_clean(x[k], m) for k in ("old_logp", "rollout_logp", "logp"))
    trl_is = [
        {
            "mode": mode,
            "clip_min": lo,
            "clip_max": hi,
            "w": trl_importance_sampling_ratio(old, sampler, m, mode, lo, hi).expand(B, T).tolist(),
        }
        for mode in TRL_MODES
        for lo, hi in BOUNDS
        if hi is not None or mode.endswith("_mask")  # torch.clamp needs a bound: TRL's truncate modes need C_max
    ]
    off = [
        {
            "threshold": d,
            "keep": GRPOTrainer.get_off_policy_mask(x["adv"].unsqueeze(1), logp, sampler, m, d).expand(B, T).tolist(),
        }
        for d in OFF_POLICY
    ]
    verl = [
        {"rollout_is": level, "threshold": th, "w": verl_rollout_is_weights(old - sampler, m, level, th).tolist()}
        for level in ("token", "sequence")
        for th in VERL_THRESHOLDS
    ]
    return {"trl_importance_sampling": trl_is, "trl_off_policy_mask": off, "verl_rollout_is": verl}


def _json(t: torch.Tensor) -> list:
    return [[None if math.isnan(v) else v for v in row] for row in t.tolist()] if t.dim() == 2 else t.tolist()


def main() -> None:
    _check_trl_source()
    x = inputs()
    out = {
        "source": f"benchmarks/reference/rollout_correction.py; trl {trl.__version__}, verl 0.9.1 (copied)",
        "inputs": {k: _json(v) for k, v in x.items()},
        **cases(x),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {OUT}: {len(out['trl_importance_sampling'])} TRL IS cases, {len(out['verl_rollout_is'])} verl")


if __name__ == "__main__":
    main()
