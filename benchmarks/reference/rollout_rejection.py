# ruff: noqa: UP045 -- the verl functions below are verbatim (Optional[...] as verl writes it)
"""verl 0.9.1's rejection sampling, its IS weights' batch normalisation and NeMo-RL's sequence logprob-error mask on fixed random inputs: writes
tests/objective/fixtures/rollout_rejection.json, which tests/objective/test_objective_rollout_rejection.py compares
harness/objective/batch_correction.py to (masks exactly, weights to 1e-6).

    python benchmarks/reference/rollout_rejection.py

verl imports Ray-side modules (DataProto, its config classes) and is not installed in the project's environment
(`pip download verl==0.9.1 --no-deps` and read the wheel), so its functions are copied VERBATIM below from
verl/trainer/ppo/rollout_corr_helper.py 0.9.1:

  SAFETY_BOUND, SUPPORTED_ROLLOUT_RS_OPTIONS, TOKEN_LEVEL_ROLLOUT_RS_OPTIONS   lines 75-90
  _parse_rollout_is_threshold                                               lines 93-131
  _parse_rollout_rs_thresholds                                              lines 132-196
  compute_rollout_rejection_mask                                            lines 197-415
  compute_rollout_correction_weights                                        lines 522-659

with verl/utils/torch_functional.py's masked_sum and masked_mean (lines 273-308) as `verl_F`; and NeMo-RL's
`compute_and_apply_seq_logprob_error_masking` (nemo_rl/algorithms/grpo.py lines 2513-2647, commit
7ea279abf of github.com/NVIDIA-NeMo/RL; `BatchedDataDict` a plain dict here, its prints kept), whose inputs carry
one leading column it drops (`[:, 1:]`: the first token of NeMo's rows has no log-prob). Their metrics
functions (compute_rs_metrics, compute_is_metrics) are replaced by stubs returning {}: the metrics are not compared.
torch.distributed is not initialised here, so the batch mean is the local masked mean, as on one process.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Optional

import torch

OUT = Path(__file__).resolve().parents[2] / "tests" / "objective" / "fixtures" / "rollout_rejection.json"


# ---------------------------------------------------------------------------------------------------- verl (verbatim)
def masked_sum(values: torch.Tensor, mask: torch.Tensor, axis: int | tuple[int, ...] | None = None) -> torch.Tensor:
    """Compute sum of tensor values where mask is True.

    NaN values outside the mask are replaced with zeros to prevent
    contaminating the sum.

    Args:
        values: Input tensor containing values to sum.
        mask: Boolean or numeric mask tensor (same shape as values).
            Non-zero values indicate elements to include.
        axis: Dimension(s) along which to sum. None sums all elements.

    Returns:
        torch.Tensor: Sum of masked values, reduced along specified axis.
    """
    # If NaNs exist out of mask, replace NaNs in values with a value that
    # won't affect the sum (e.g., 0 for masked regions)
    valid_values = torch.where(mask.bool(), values, 0.0)
    return (valid_values * mask).sum(axis=axis)


def masked_mean(values, mask, axis=None):
    """
    Compute the mean of `values` over elements selected by `mask`.

    Args:
        values (Tensor): Input tensor.
        mask (Tensor): Boolean or numeric mask of the same shape as `values`.
        axis (int or tuple of int, optional): Dimension(s) along which to compute the mean.
            Defaults to None (over all elements).

    Returns:
        Tensor: Masked mean, with shape equal to `values` reduced over `axis`.
    """
    s = masked_sum(values, mask, axis)
    return s / (mask.sum(axis=axis) + 1e-8)


verl_F = SimpleNamespace(masked_sum=masked_sum, masked_mean=masked_mean)


def compute_rs_metrics(**_):  # stub: verl's rejection metrics are not compared
    return {}


def compute_is_metrics(**_):  # stub: verl's IS metrics are not compared
    return {}


SAFETY_BOUND = 20.0

SUPPORTED_ROLLOUT_RS_OPTIONS: set[str] = {
    "token_k1",
    "token_k2",
    "token_k3",
    "seq_sum_k1",
    "seq_sum_k2",
    "seq_sum_k3",
    "seq_mean_k1",
    "seq_mean_k2",
    "seq_mean_k3",
    "seq_max_k2",
    "seq_max_k3",
}
TOKEN_LEVEL_ROLLOUT_RS_OPTIONS: set[str] = {"token_k1", "token_k2", "token_k3"}


def _parse_rollout_is_threshold(threshold_spec: str | float) -> tuple[float, Optional[float]]:
    if isinstance(threshold_spec, bool):
        raise TypeError(
            "rollout_is_threshold must be specified as a float or a string threshold specification, not a boolean."
        )
    if isinstance(threshold_spec, int | float):
        upper = float(threshold_spec)
        lower = None
    elif isinstance(threshold_spec, str):
        spec = threshold_spec.strip()
        if not spec:
            raise ValueError("rollout_is_threshold must not be an empty string.")
        if "_" in spec:
            lower_str, upper_str = spec.split("_", 1)
            try:
                lower = float(lower_str)
                upper = float(upper_str)
            except ValueError as exc:
                raise ValueError(f"Invalid rollout_is_threshold '{threshold_spec}'.") from exc
        else:
            try:
                upper = float(spec)
            except ValueError as exc:
                raise ValueError(f"Invalid rollout_is_threshold '{threshold_spec}'.") from exc
            lower = None
    else:
        raise TypeError("rollout_is_threshold must be a float or a string threshold specification.")

    if upper <= 0:
        raise ValueError(f"rollout_is_threshold upper bound must be positive, got {upper}.")
    if lower is not None:
        if lower <= 0:
            raise ValueError(f"rollout_is_threshold lower bound must be positive, got {lower}.")
        if lower > upper:
            raise ValueError("rollout_is_threshold lower bound must be <= upper bound.")

    return upper, lower


def _parse_rollout_rs_thresholds(
    options: list[str], threshold_spec: Optional[str | float]
) -> dict[str, dict[str, Optional[float]]]:
    if threshold_spec is None:
        raise ValueError("rollout_rs_threshold must be provided for rejection sampling.")

    if isinstance(threshold_spec, int | float):
        raw_specs: list[str] = [str(threshold_spec)]
    elif isinstance(threshold_spec, str):
        raw_specs = [part.strip() for part in threshold_spec.split(",") if part.strip()]
    else:
        raise TypeError("rollout_rs_threshold must be a string or numeric value specifying per-option thresholds.")

    if not raw_specs:
        raise ValueError("rollout_rs_threshold must contain at least one threshold value.")

    if len(raw_specs) not in (1, len(options)):
        raise ValueError(
            f"rollout_rs_threshold expects either one threshold shared by all options or exactly "
            f"{len(options)} thresholds to match the provided rollout_rs options."
        )

    if len(raw_specs) == 1 and len(options) > 1:
        raw_specs = raw_specs * len(options)

    thresholds: dict[str, dict[str, Optional[float]]] = {}
    for option, spec in zip(options, raw_specs, strict=False):
        if option.endswith("k1"):
            if "_" in spec:
                lower_str, upper_str = spec.split("_", 1)
            else:
                upper_str = spec
                lower_str = str(1.0 / float(upper_str))
            try:
                lower = float(lower_str)
                upper = float(upper_str)
            except ValueError as exc:
                raise ValueError(f"Invalid numeric threshold '{spec}' for option '{option}'.") from exc
            if lower <= 0 or upper <= 0:
                raise ValueError(f"Thresholds for option '{option}' must be positive, got {spec}.")
            if lower > upper:
                raise ValueError(f"Thresholds for option '{option}' must be lower <= upper, got {spec}.")
            thresholds[option] = {
                "lower": lower,
                "upper": upper,
            }
        else:
            if "_" in spec:
                raise ValueError(
                    f"rollout_rs_threshold for option '{option}' must provide a single upper bound "
                    f"without '_'. Received '{spec}'."
                )
            try:
                upper = float(spec)
            except ValueError as exc:
                raise ValueError(f"Invalid numeric threshold '{spec}' for option '{option}'.") from exc
            if upper <= 0:
                raise ValueError(f"Threshold for option '{option}' must be positive, got {spec}.")
            thresholds[option] = {
                "lower": None,
                "upper": upper,
            }
    return thresholds


def compute_rollout_rejection_mask(
    log_ratio: torch.Tensor,
    response_mask: torch.Tensor,
    rollout_rs: str = "token_k1",
    rollout_rs_threshold: Optional[str | float] = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Compute hard trust region mask using divergence estimators.

    This function enforces a hard trust region constraint by masking tokens/sequences
    where the estimated divergence (between training and rollout policies) exceeds
    a threshold. Unlike PPO's soft clipping, this provides a hard boundary.

    Multiple rejection criteria can be supplied via a comma separated `rollout_rs` string.
    All requested options must pass for a token/sequence to remain valid.

    Supported KL divergence-based modes (ideal = 0.0 unless noted):
    - "token_k{1,2,3}": Token-level divergences.
    - "seq_sum_k{1,2,3}": Sum of token divergences per sequence.
    - "seq_mean_k{1,2,3}": Mean of token divergences per sequence.
    - "seq_max_k{2,3}": Maximum token divergence per sequence.

    Args:
        log_ratio: Log ratio of training policy probability to rollout policy probability,
            shape (batch_size, seq_length).
        response_mask: Binary mask for valid tokens (1=valid, 0=padding),
            shape (batch_size, seq_length).
        rollout_rs: Comma separated rejection sampling options (e.g. "token_k1,seq_sum_k3").
        rollout_rs_threshold: Threshold specification string (required). Provide one entry per
            rollout_rs option separated by commas. Each entry must be a positive number.
            For K1-style options (``*k1``), specify ``lower_upper`` (e.g. ``"0.1_1.2"``)
            to denote lower/upper ratio bounds; other options accept a single upper bound.

    Returns:
        Tuple containing:
            modified_response_mask: Response mask with trust region violations masked (0=rejected),
                shape (batch_size, seq_length).
            metrics: Dictionary of trust region metrics (all scalars).
    """
    if rollout_rs is None or not isinstance(rollout_rs, str):
        raise ValueError("rollout_rs must be a non-empty string (comma separated for multiple options).")
    if rollout_rs_threshold is None:
        raise ValueError("rollout_rs_threshold must be provided for rejection sampling.")

    if log_ratio.shape[0] == 0:
        return response_mask, {}

    # rollout_rs supports chained criteria via comma separation (e.g. "token_k1,seq_mean_k3").
    #            Every listed option must pass; combined_mask aggregates them via logical AND.
    option_modes = [opt.strip() for opt in rollout_rs.split(",") if opt.strip()]
    if not option_modes:
        raise ValueError("rollout_rs must contain at least one valid option.")

    normalized_options: list[str] = []
    seen: set[str] = set()
    for opt in option_modes:
        if opt not in SUPPORTED_ROLLOUT_RS_OPTIONS:
            raise ValueError(
                f"Invalid rollout_rs option: {opt}. Must be one of {sorted(SUPPORTED_ROLLOUT_RS_OPTIONS)}."
            )
        if opt not in seen:
            normalized_options.append(opt)
            seen.add(opt)

    threshold_specs = _parse_rollout_rs_thresholds(normalized_options, rollout_rs_threshold)

    log_ratio_safe: torch.Tensor = torch.clamp(log_ratio, min=-SAFETY_BOUND, max=SAFETY_BOUND)
    token_k1: torch.Tensor = -log_ratio_safe
    token_k2: torch.Tensor = 0.5 * log_ratio_safe**2
    token_k3: torch.Tensor = torch.exp(log_ratio_safe) - 1.0 - log_ratio_safe

    response_mask_bool: torch.Tensor = response_mask.bool()
    seq_valid_mask: torch.Tensor = response_mask.sum(dim=-1) > 0
    # combined_mask accumulates per-option passes; any failure flips tokens to 0.
    combined_mask: torch.Tensor = torch.ones_like(response_mask, dtype=log_ratio.dtype)
    metrics: dict[str, float] = {}

    def _sequence_sum(values: torch.Tensor) -> torch.Tensor:
        return verl_F.masked_sum(values, response_mask, axis=-1)

    def _sequence_mean(values: torch.Tensor) -> torch.Tensor:
        return verl_F.masked_mean(values, response_mask, axis=-1)

    def _sequence_max(values: torch.Tensor) -> torch.Tensor:
        mask_bool = response_mask.bool()
        neg_inf = torch.tensor(float("-inf"), device=values.device, dtype=values.dtype)
        masked_values = values.masked_fill(~mask_bool, neg_inf)
        max_values = masked_values.max(dim=-1).values
        return torch.where(max_values == neg_inf, torch.zeros_like(max_values), max_values)

    for option_name in normalized_options:
        thresholds_info = threshold_specs[option_name]
        is_k1_option = option_name.endswith("k1")
        upper_value = thresholds_info["upper"]
        lower_value = thresholds_info["lower"]
        apply_lower_threshold = is_k1_option
        lower_log: Optional[float] = None
        upper_log: Optional[float] = None

        if is_k1_option:
            if lower_value is None or upper_value is None:
                raise ValueError(
                    f"rollout_rs_threshold for option '{option_name}' must specify both lower and upper bounds."
                )
            lower_log = math.log(lower_value)
            upper_log = math.log(upper_value)
        else:
            if upper_value is None:
                raise ValueError(f"rollout_rs_threshold for option '{option_name}' must specify an upper bound.")

        level = "sequence" if option_name not in TOKEN_LEVEL_ROLLOUT_RS_OPTIONS else "token"

        per_token_stat: torch.Tensor
        per_sequence_stat: Optional[torch.Tensor] = None
        token_keep_bool: torch.Tensor

        if option_name == "token_k1":
            if lower_log is None:
                raise ValueError("Threshold specification for token_k1 must include lower and upper bounds.")
            per_token_stat = token_k1
            token_keep_bool = (per_token_stat >= lower_log) & (per_token_stat <= upper_log)
        elif option_name == "token_k2":
            per_token_stat = token_k2
            token_keep_bool = per_token_stat <= upper_value
        elif option_name == "token_k3":
            per_token_stat = token_k3
            token_keep_bool = per_token_stat <= upper_value
        elif option_name.startswith("seq_sum"):
            if option_name.endswith("k1"):
                if lower_log is None:
                    raise ValueError(
                        f"Threshold specification for option '{option_name}' must include lower and upper bounds."
                    )
                seq_stat = _sequence_sum(token_k1)
                seq_keep_bool_direct = (seq_stat >= lower_log) & (seq_stat <= upper_log)
            elif option_name.endswith("k2"):
                seq_stat = _sequence_sum(token_k2)
                seq_keep_bool_direct = seq_stat <= upper_value
            elif option_name.endswith("k3"):
                seq_stat = _sequence_sum(token_k3)
                seq_keep_bool_direct = seq_stat <= upper_value
            else:
                raise ValueError(f"Unsupported rollout_rs option: {option_name}.")
            per_sequence_stat = seq_stat
            token_keep_bool = seq_keep_bool_direct.unsqueeze(-1).expand_as(response_mask_bool)
            per_token_stat = seq_stat.unsqueeze(-1).expand_as(response_mask)
        elif option_name.startswith("seq_mean"):
            if option_name.endswith("k1"):
                if lower_log is None:
                    raise ValueError(
                        f"Threshold specification for option '{option_name}' must include lower and upper bounds."
                    )
                seq_stat = _sequence_mean(token_k1)
                seq_keep_bool_direct = (seq_stat >= lower_log) & (seq_stat <= upper_log)
            elif option_name.endswith("k2"):
                seq_stat = _sequence_mean(token_k2)
                seq_keep_bool_direct = seq_stat <= upper_value
            elif option_name.endswith("k3"):
                seq_stat = _sequence_mean(token_k3)
                seq_keep_bool_direct = seq_stat <= upper_value
            else:
                raise ValueError(f"Unsupported rollout_rs option: {option_name}.")
            per_sequence_stat = seq_stat
            token_keep_bool = seq_keep_bool_direct.unsqueeze(-1).expand_as(response_mask_bool)
            per_token_stat = seq_stat.unsqueeze(-1).expand_as(response_mask)
        elif option_name.startswith("seq_max"):
            if option_name.endswith("k2"):
                seq_stat = _sequence_max(token_k2)
                seq_keep_bool_direct = seq_stat <= upper_value
            elif option_name.endswith("k3"):
                seq_stat = _sequence_max(token_k3)
                seq_keep_bool_direct = seq_stat <= upper_value
            else:
                raise ValueError(f"Unsupported rollout_rs option: {option_name}.")
            per_sequence_stat = seq_stat
            token_keep_bool = seq_keep_bool_direct.unsqueeze(-1).expand_as(response_mask_bool)
            per_token_stat = seq_stat.unsqueeze(-1).expand_as(response_mask)
        else:
            raise ValueError(f"Unsupported rollout_rs option: {option_name}.")

        metrics_upper_threshold = upper_log if is_k1_option else upper_value
        metrics_lower_threshold = lower_log if (is_k1_option and lower_log is not None) else 0.0

        token_keep_mask = token_keep_bool.to(dtype=log_ratio.dtype)
        combined_mask = combined_mask * token_keep_mask
        seq_keep_bool_tensor = (~((~token_keep_bool) & response_mask_bool)).all(dim=-1)

        option_metrics = compute_rs_metrics(
            option_name=option_name,
            rs_statistic=per_token_stat,
            response_mask=response_mask,
            seq_valid_mask=seq_valid_mask,
            level=level,
            per_sequence_values=per_sequence_stat,
            rollout_rs_threshold=metrics_upper_threshold,
            rollout_rs_threshold_lower=metrics_lower_threshold,
            apply_lower_threshold=apply_lower_threshold,
        )
        metrics.update(option_metrics)

        token_masked_fraction = verl_F.masked_mean(1 - token_keep_mask, response_mask).item()
        seq_valid_float = seq_valid_mask.float()
        if seq_valid_float.sum() > 0:
            seq_keep_float = seq_keep_bool_tensor.to(dtype=log_ratio.dtype)
            seq_masked_fraction = (((1.0 - seq_keep_float) * seq_valid_float).sum() / seq_valid_float.sum()).item()
        else:
            seq_masked_fraction = 0.0
        metrics[f"rollout_rs_{option_name}_masked_fraction"] = token_masked_fraction
        metrics[f"rollout_rs_{option_name}_seq_masked_fraction"] = seq_masked_fraction

    final_mask = combined_mask
    metrics["rollout_rs_masked_fraction"] = verl_F.masked_mean(1 - final_mask, response_mask).item()
    final_keep_bool = (final_mask > 0.5) & response_mask_bool
    seq_has_masked: torch.Tensor = (~final_keep_bool & response_mask_bool).any(dim=-1)
    metrics["rollout_rs_seq_masked_fraction"] = seq_has_masked.float().mean().item()

    modified_response_mask: torch.Tensor = (response_mask * final_mask).to(dtype=response_mask.dtype)
    return modified_response_mask, metrics


def compute_rollout_correction_weights(
    log_ratio: torch.Tensor,
    response_mask: torch.Tensor,
    rollout_is: str = "token",
    rollout_is_threshold: str | float = 2.0,
    rollout_is_batch_normalize: bool = False,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Compute importance sampling weights to correct for off-policy distribution shifts.

    This function calculates IS weights (π_train / π_rollout) using log ratios for numerical stability.
    It supports multiple aggregation levels and truncates extreme weights to prevent training instability.

    Key design:
    - Log-space computations to avoid overflow
    - Truncation of extreme weights (TIS: Truncated Importance Sampling)
    - Optional batch normalization (normalize to mean=1.0)
    - Metrics tracking for weight distribution analysis

    Args:
        log_ratio: Log ratio of training policy probability to rollout policy probability,
            shape (batch_size, seq_length).
        response_mask: Binary mask for valid tokens (1=valid, 0=padding),
            shape (batch_size, seq_length).
        rollout_is: IS weight aggregation level, must be one of:
            - "token": Per-token weights (biased, low variance)
            - "sequence": Per-sequence weight (product of tokens; unbiased, high variance)
        rollout_is_threshold: Threshold specification for IS weights.
            - Single float or float-like string: TIS, clamp weights to the upper bound
            - "lower_upper" string: IcePop, zero weights outside [lower, upper]
        rollout_is_batch_normalize: Whether to normalize IS weights to have mean=1.0 per batch,
            default False.

    Returns:
        Tuple containing:
            rollout_is_weights: Truncated IS weights (masked to zero for padding tokens),
                shape (batch_size, seq_length). If batch_normalize=True, normalized to mean=1.0.
            metrics: Dictionary of IS weight metrics (all scalars), including:
                - rollout_is_mean/max/min: Statistic of weights (before batch normalization)
                - rollout_is_eff_sample_size: Effective sample size (ESS)
                - rollout_is_seq_*: Sequence-level weight statistics
                - rollout_is_batch_norm_factor: Normalization factor (only if batch_normalize=True)
    """
    # Validate input parameters
    valid_is_levels = {"token", "sequence"}
    if rollout_is not in valid_is_levels:
        raise ValueError(f"Invalid rollout_is: {rollout_is}. Must be one of {valid_is_levels}.")
    rollout_is_threshold_upper, rollout_is_threshold_lower = _parse_rollout_is_threshold(rollout_is_threshold)
    use_icepop = rollout_is_threshold_lower is not None

    # Compute IS weights from log ratio (handles different aggregation levels)
    if rollout_is == "token":
        # Per-token IS weight: exp(log(π_train/π_rollout)) with safety clamp
        log_ratio_for_metrics: torch.Tensor = log_ratio
        log_ratio_safe: torch.Tensor = torch.clamp(log_ratio, min=-SAFETY_BOUND, max=SAFETY_BOUND)
        raw_rollout_is_weights: torch.Tensor = torch.exp(log_ratio_safe)

    elif rollout_is == "sequence":
        # Sequence-level IS weight: product of token ratios (exp(sum(log ratios)))
        log_ratio_sum: torch.Tensor = verl_F.masked_sum(log_ratio, response_mask, axis=-1).unsqueeze(
            -1
        )  # Shape: (batch_size, 1)
        log_ratio_for_metrics = log_ratio_sum

        log_ratio_sum_safe: torch.Tensor = torch.clamp(log_ratio_sum, min=-SAFETY_BOUND, max=SAFETY_BOUND)
        raw_rollout_is_weights = torch.exp(log_ratio_sum_safe).expand_as(log_ratio)  # Broadcast to sequence length

    else:
        raise ValueError(f"Unsupported rollout_is: {rollout_is}")

    # Zero out weights for padding tokens using response mask
    raw_rollout_is_weights = raw_rollout_is_weights * response_mask

    # Apply TIS for a single upper bound and IcePop for a lower_upper string.
    if not use_icepop:
        rollout_is_weights = raw_rollout_is_weights.clamp(max=rollout_is_threshold_upper)
    else:
        assert rollout_is_threshold_lower is not None
        token_kept_mask = (raw_rollout_is_weights >= rollout_is_threshold_lower) & (
            raw_rollout_is_weights <= rollout_is_threshold_upper
        )
        rollout_is_weights = torch.where(
            token_kept_mask, raw_rollout_is_weights, torch.zeros_like(raw_rollout_is_weights)
        )

    # Compute IS weight metrics.
    metrics: dict[str, float] = compute_is_metrics(
        rollout_is_weights=rollout_is_weights,
        raw_rollout_is_weights=raw_rollout_is_weights,
        log_ratio_for_metrics=log_ratio_for_metrics,
        response_mask=response_mask,
        rollout_is=rollout_is,
        rollout_is_threshold=rollout_is_threshold_upper,
        rollout_is_threshold_lower=rollout_is_threshold_lower,
    )
    if use_icepop:
        assert rollout_is_threshold_lower is not None
        oob_mask = (raw_rollout_is_weights < rollout_is_threshold_lower) | (
            raw_rollout_is_weights > rollout_is_threshold_upper
        )
        metrics["rollout_is_oob_ratio"] = verl_F.masked_mean(oob_mask.float(), response_mask).item()

    # Detach weights to prevent gradient flow (mathematically required by IS theory)
    # IS weights change the measure, not the objective. See §3.2.2 in docs/algo/rollout_corr_math.md
    rollout_is_weights = rollout_is_weights.detach()

    # Apply batch normalization if requested
    if rollout_is_batch_normalize:
        # Compute mean based on aggregation level
        mask_float = response_mask.to(dtype=rollout_is_weights.dtype)
        if rollout_is == "token":
            # Token-level: normalize over all token weights
            if torch.distributed.is_available() and torch.distributed.is_initialized():
                weights_mean = verl_F.distributed_masked_mean(rollout_is_weights, mask_float)
            else:
                weights_mean = verl_F.masked_mean(rollout_is_weights, response_mask)
        elif rollout_is == "sequence":
            # Sequence-level: normalize over sequence weights (one weight per sequence)
            # For each sequence, compute mean over valid tokens (they all have the same weight)
            # then average across sequences
            seq_weights = verl_F.masked_mean(rollout_is_weights, response_mask, axis=-1)  # (batch_size,)
            seq_mask = (response_mask.sum(dim=-1) > 0).to(dtype=rollout_is_weights.dtype)
            if torch.distributed.is_available() and torch.distributed.is_initialized():
                weights_mean = verl_F.distributed_masked_mean(seq_weights, seq_mask)
            else:
                weights_mean = (seq_weights * seq_mask).sum() / seq_mask.sum().clamp_min(1e-8)
        else:
            raise ValueError(f"Unsupported rollout_is: {rollout_is}")

        # Normalize to mean=1.0 (avoid division by zero)
        if weights_mean > 1e-8:
            rollout_is_weights = rollout_is_weights / weights_mean
            metrics["rollout_is_batch_norm_factor"] = weights_mean.item()
        else:
            metrics["rollout_is_batch_norm_factor"] = 1.0

    return rollout_is_weights, metrics


# ---------------------------------------------------------------------------------------------------- NeMo-RL (verbatim)
BatchedDataDict = dict


def compute_and_apply_seq_logprob_error_masking(
    train_data: BatchedDataDict,
    rewards: torch.Tensor,
    seq_logprob_error_threshold: Optional[float],
) -> dict:
    """Compute sequence-level logprob error metrics and optionally mask high-error sequences.

    This function computes the multiplicative probability error per sequence
    (same calculation as token_mult_prob_error but aggregated per-sequence) and
    optionally masks sequences that exceed the configured threshold.

    Args:
        train_data: Training data dict containing token_mask, sample_mask,
                   prev_logprobs, and generation_logprobs. If masking is applied,
                   sample_mask will be updated in-place.
        rewards: Reward tensor for computing statistics on masked sequences.
        seq_logprob_error_threshold: If set, mask sequences with mult_prob_error
                                    exceeding this threshold. If None, only compute metrics.

    Returns:
        Dict with keys: max_seq_mult_prob_error, mean_seq_mult_prob_error,
        min_seq_mult_prob_error, max/mean/min_seq_mult_prob_error_after_mask,
        num_masked_seqs, masked_correct_pct
    """
    # Compute sequence-level logprob error metrics (always)
    token_mask = train_data["token_mask"][:, 1:]
    sample_mask = train_data["sample_mask"]
    prev_logprobs = train_data["prev_logprobs"][:, 1:]
    generation_logprobs = train_data["generation_logprobs"][:, 1:]
    lp_error = torch.abs(generation_logprobs - prev_logprobs)

    # Use combined mask exactly as in loss function
    mask = token_mask * sample_mask.unsqueeze(-1)

    # Calculate sequence-level multiplicative prob error.
    #
    # NOTE: When a sequence is fully masked (mask.sum == 0), it should not contribute to
    # min/mean/max statistics; otherwise, it would yield a spurious 0 due to denominator
    # clamping and incorrectly drag min_seq_mult_prob_error to 0.
    denom = mask.sum(dim=-1)
    valid_seq_mask = denom > 0

    # EXACT same calculation as token_mult_prob_error but per-sequence (for valid sequences)
    seq_mult_prob_error = torch.zeros_like(denom, dtype=lp_error.dtype)
    if valid_seq_mask.any():
        num = (torch.exp(lp_error * mask) * mask).sum(dim=-1)
        seq_mult_prob_error[valid_seq_mask] = num[valid_seq_mask] / denom[valid_seq_mask].clamp(min=1)

        valid_errors = seq_mult_prob_error[valid_seq_mask]
        max_seq_mult_prob_error = valid_errors.max().item()
        mean_seq_mult_prob_error = valid_errors.mean().item()
        min_seq_mult_prob_error = valid_errors.min().item()
    else:
        max_seq_mult_prob_error = 0.0
        mean_seq_mult_prob_error = 0.0
        min_seq_mult_prob_error = 0.0

    # Apply sequence-level masking if configured
    num_masked_seqs = 0
    masked_correct_pct = 0.0

    # After-mask metrics (same as before if no threshold)
    max_seq_mult_prob_error_after_mask = max_seq_mult_prob_error
    mean_seq_mult_prob_error_after_mask = mean_seq_mult_prob_error
    min_seq_mult_prob_error_after_mask = min_seq_mult_prob_error

    if seq_logprob_error_threshold is not None:
        print(
            f"▶ Applying sequence-level logprob error masking (threshold={seq_logprob_error_threshold})...",
            flush=True,
        )

        original_sample_mask = sample_mask.clone()

        # Create mask for sequences below threshold
        seq_error_mask = (seq_mult_prob_error <= seq_logprob_error_threshold).float() * original_sample_mask

        diff_mask = original_sample_mask - seq_error_mask
        num_masked_seqs = int(diff_mask.sum().item())

        if num_masked_seqs > 0:
            diff_mask_bool = diff_mask.bool()
            masked_correct_count = int((rewards.view(-1)[diff_mask_bool] == 1).sum().item())
            masked_correct_pct = masked_correct_count / num_masked_seqs

        # Compute after-mask metrics (only for sequences that passed the threshold)
        kept_mask = seq_error_mask.bool() & valid_seq_mask
        if kept_mask.sum() > 0:
            kept_errors = seq_mult_prob_error[kept_mask]
            max_seq_mult_prob_error_after_mask = kept_errors.max().item()
            mean_seq_mult_prob_error_after_mask = kept_errors.mean().item()
            min_seq_mult_prob_error_after_mask = kept_errors.min().item()
        else:
            # All sequences were masked
            max_seq_mult_prob_error_after_mask = 0.0
            mean_seq_mult_prob_error_after_mask = 0.0
            min_seq_mult_prob_error_after_mask = 0.0

        # Update sample_mask in train_data
        train_data["sample_mask"] = seq_error_mask

        print(
            f"  Masked {num_masked_seqs} sequences with mult_prob_error > {seq_logprob_error_threshold}",
            flush=True,
        )
        if num_masked_seqs > 0:
            print(
                f"  • {masked_correct_count}/{num_masked_seqs} masked sequences were correct (reward=1)"
                f" → {masked_correct_pct:.2%}",
                flush=True,
            )

    return {
        "max_seq_mult_prob_error": max_seq_mult_prob_error,
        "mean_seq_mult_prob_error": mean_seq_mult_prob_error,
        "min_seq_mult_prob_error": min_seq_mult_prob_error,
        "max_seq_mult_prob_error_after_mask": max_seq_mult_prob_error_after_mask,
        "mean_seq_mult_prob_error_after_mask": mean_seq_mult_prob_error_after_mask,
        "min_seq_mult_prob_error_after_mask": min_seq_mult_prob_error_after_mask,
        "num_masked_seqs": num_masked_seqs,
        "masked_correct_pct": masked_correct_pct,
    }


# ===============================================================================
# Training & Validation
# ===============================================================================


# ---------------------------------------------------------------------------------------------------- the fixture
B, T = 10, 6
LENGTHS = [6, 4, 1, 6, 0, 3, 6, 2, 5, 6]  # padding on the right, one row without a response token
REJECTION = (  # (rollout_rs, rollout_rs_threshold): every option, the k1 bounds both ways, a chain
    ("token_k1", 1.3),
    ("token_k1", "0.7_1.5"),
    ("token_k2", 0.02),
    ("token_k3", 0.02),
    ("seq_sum_k1", "0.6_1.8"),
    ("seq_sum_k2", 0.15),
    ("seq_sum_k3", 0.15),
    ("seq_mean_k1", 1.1),
    ("seq_mean_k2", 0.035),
    ("seq_mean_k3", 0.035),
    ("seq_max_k2", 0.1),
    ("seq_max_k3", 0.1),
    ("token_k1,seq_mean_k3", "0.7_1.6,0.04"),
    ("token_k2,seq_max_k3,seq_sum_k1", "0.08,0.12,0.6_1.8"),
)
SEQ_ERROR = (1.22, 1.25, 1.4)  # NeMo-RL's thresholds on the mean exp(|log-prob error|): some rows masked at each
NORMALIZE = (("token", 2.0), ("token", "0.5_2.0"), ("sequence", 3.0), ("sequence", "0.2_5.0"))


def _inputs() -> dict:
    gen = torch.Generator().manual_seed(7)
    old = -torch.rand(B, T, generator=gen, dtype=torch.float64) * 3
    rollout = old + 0.25 * torch.randn(B, T, generator=gen, dtype=torch.float64)  # sampler/trainer gaps
    mask = (torch.arange(T)[None, :] < torch.tensor(LENGTHS)[:, None]).to(torch.float64)
    return {"old_logp": old, "rollout_logp": rollout, "mask": mask}


def build() -> dict:
    x = _inputs()
    log_ratio = x["old_logp"] - x["rollout_logp"]
    out = {"inputs": {k: v.tolist() for k, v in x.items()}, "rejection": [], "normalize": [], "seq_logprob_error": []}
    for options, threshold in REJECTION:
        mask, _ = compute_rollout_rejection_mask(log_ratio, x["mask"], options, threshold)
        out["rejection"].append({"rollout_rs": options, "threshold": threshold, "mask": mask.tolist()})
    for level, threshold in NORMALIZE:
        w, _ = compute_rollout_correction_weights(
            log_ratio, x["mask"], level, threshold, rollout_is_batch_normalize=True
        )
        raw, _ = compute_rollout_correction_weights(log_ratio, x["mask"], level, threshold)
        out["normalize"].append(
            {"rollout_is": level, "threshold": threshold, "weights": w.tolist(), "raw": raw.tolist()}
        )
    for threshold in SEQ_ERROR:
        pad = torch.zeros(B, 1, dtype=torch.float64)  # NeMo's rows: the first column is dropped by [:, 1:]
        data = {
            "token_mask": torch.cat([pad, x["mask"]], 1),
            "sample_mask": torch.ones(B, dtype=torch.float64),
            "prev_logprobs": torch.cat([pad, x["old_logp"]], 1),
            "generation_logprobs": torch.cat([pad, x["rollout_logp"]], 1),
        }
        got = compute_and_apply_seq_logprob_error_masking(data, torch.zeros(B), threshold)
        out["seq_logprob_error"].append(
            {"threshold": threshold, "sample_mask": data["sample_mask"].tolist(), "metrics": got}
        )
    return out


if __name__ == "__main__":
    OUT.write_text(json.dumps(build(), indent=1) + "\n")
    print(f"wrote {OUT}")
