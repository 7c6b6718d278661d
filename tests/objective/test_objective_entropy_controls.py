"""The entropy controls (harness/objective/entropy_control.py, docs/objective.md, "Entropy controls"): Clip-Cov, KL-Cov, the 80/20
rule's top-entropy mask, the adaptive entropy coefficient and the entropy bonus's aggregation -- hand-computed
values, equality with verl 0.9.1 and TRL 1.16 (the fixture of benchmarks/reference/entropy_controls.py) and the
config's refusals."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from pydantic import ValidationError

from harness.config import ConfigError, load_config
from harness.objective import ObjectiveConfig
from harness.objective.entropy_control import (
    AdaptiveEntropy,
    clip_cov_detached,
    kl_cov_penalised,
    token_cov,
    top_entropy_mask,
)
from harness.objective.policy import policy_loss

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "entropy_controls.json").read_text())
D = torch.float64


def _t(x) -> torch.Tensor:
    return torch.tensor(x, dtype=D)


def _cfg(**kw) -> ObjectiveConfig:
    return ObjectiveConfig(kl_coef=0.0, **kw)


# ----------------------------------------------------------------------------- hand-computed
def test_token_cov_by_hand():
    # A = [1, -1, (pad 9)], logp = [-1, -3, (pad 9)]: means 0 and -2 -> Cov = [1*1, (-1)(-1)] = [1, 1]
    cov = token_cov(_t([[1.0, -1.0, 9.0]]), _t([[-1.0, -3.0, 9.0]]), torch.tensor([[True, True, False]]))
    assert torch.allclose(cov[0, :2], _t([1.0, 1.0]), atol=1e-7)


def test_clip_cov_detaches_the_one_candidate_by_hand():
    # rho = 1 everywhere (no PPO clip binds); per-token A = [2, 0, 0, -2], logp = [-1, -2, -2, -3]: means 0 and -2
    # -> Cov = [2, 0, 0, 2]; (lb, ub) = (1.5, 2.5) holds tokens 0 and 3; clip_cov_ratio 0.25 of 4 -> one drawn
    adv, lp = _t([[2.0, 0.0, 0.0, -2.0]]), _t([[-1.0, -2.0, -2.0, -3.0]])
    m = torch.ones(1, 4, dtype=torch.bool)
    cfg = _cfg(clip="clip_cov", clip_cov_ratio=0.25, clip_cov_lb=1.5, clip_cov_ub=2.5, agg="token_mean")
    torch.manual_seed(0)
    detached = clip_cov_detached(torch.ones(1, 4, dtype=D), adv, lp, m, cfg)
    assert int(detached.sum()) == 1 and (detached[0, 0] or detached[0, 3])
    x = lp.clone().requires_grad_(True)
    torch.manual_seed(0)
    loss, metrics = policy_loss(cfg, x, lp, adv, m.to(D))
    loss.backward()
    # token_mean of -rho A over the kept tokens; d/dlogp = -A / 4 on them, 0 on the detached one
    kept = (~detached).to(D)
    assert loss.item() == pytest.approx(float(-(adv * kept).sum() / 4))
    assert x.grad[0].tolist() == pytest.approx((-adv * kept / 4)[0].tolist())
    assert metrics["clip_cov/frac"] == pytest.approx(0.25)
    assert metrics["clip/frac"] == 0.0  # the PPO clip's own fraction, apart


def test_kl_cov_penalises_the_top_token_by_hand():
    # per-token A = [2, 0, 0, -2]; kl_cov_ratio 0.25 of 4 tokens -> the top one by covariance
    adv, lp = _t([[2.0, 0.0, 0.0, -2.0]]), _t([[-1.0, -2.0, -2.5, -3.0]])
    m = torch.ones(1, 4, dtype=torch.bool)
    # means 0 and -2.125: Cov = [2*1.125, 0, 0, -2*-0.875] = [2.25, 0, 0, 1.75] -> token 0
    assert kl_cov_penalised(adv, lp, m, 0.25).tolist() == [[True, False, False, False]]
    old = lp - 0.1  # |logp - old| = 0.1, rho = e^0.1
    cfg = _cfg(clip="kl_cov", kl_cov_ratio=0.25, ppo_kl_coef=2.0, agg="token_mean")
    loss, metrics = policy_loss(cfg, lp, old, adv, m.to(D))
    # token_mean of -rho A (sum A = 0) + 2.0 * 0.1 on token 0
    assert loss.item() == pytest.approx((-0.0 * math.exp(0.1) + 2.0 * 0.1) / 4)
    assert metrics["kl_cov/frac"] == pytest.approx(0.25)


def test_top_entropy_mask_by_hand():
    # H = [0.125, 0.5, 0.875, 0.25, (pad 7)] (exact in float32, where the quantile is taken), quantile 0.5:
    # threshold = the median (0.25 + 0.5) / 2 = 0.375
    h = _t([[0.125, 0.5, 0.875, 0.25, 7.0]])
    m = _t([[1, 1, 1, 1, 0]])
    assert top_entropy_mask(h, m, 0.5).tolist() == [[False, True, True, False, False]]
    assert top_entropy_mask(h, m, 0.0).tolist() == [[False, False, True, False, False]]  # the highest only
    assert top_entropy_mask(h, m, 1.0).tolist() == [[True, True, True, True, False]]


def test_top_entropy_quantile_masks_the_policy_loss_and_the_bonus_by_hand():
    # rho = 1, A = 1: token loss -1; kept tokens 1 and 2 (above): seq_mean_token_mean = (-1 - 1) / 4; bonus
    # -0.1 * H on the kept tokens, aggregated by agg: -0.1 * (0.5 + 0.9) / 4
    h, m, lp = _t([[0.1, 0.5, 0.9, 0.3]]), _t([[1, 1, 1, 1]]), _t([[-1.0, -1.0, -1.0, -1.0]])
    cfg = _cfg(top_entropy_quantile=0.5, entropy_coef=0.1)
    loss, metrics = policy_loss(cfg, lp, lp, _t([1.0]), m, entropy=h)
    assert loss.item() == pytest.approx(-0.5 - 0.1 * 1.4 / 4)
    assert metrics["entropy/kept_frac"] == pytest.approx(0.5)
    # token_mean: the bonus is the mean over the kept tokens, -0.1 * 0.7
    loss, _ = policy_loss(_cfg(top_entropy_quantile=0.5, entropy_coef=0.1, entropy_agg="token_mean"), lp, lp,
                          _t([1.0]), m, entropy=h)  # fmt: skip
    assert loss.item() == pytest.approx(-0.5 - 0.1 * 0.7)


def test_entropy_agg_token_mean_is_the_mean_whatever_the_agg_by_hand():
    # H = 1 on 2 + 4 tokens, entropy_coef 0.1, A = 0 (no policy term): seq_mean_token_sum sums the bonus per row,
    # (-0.1 * 2 - 0.1 * 4) / 2 = -0.3; token_mean: -0.1 whatever the agg
    m = _t([[1, 1, 0, 0], [1, 1, 1, 1]])
    h, lp, adv = torch.ones(2, 4, dtype=D), torch.zeros(2, 4, dtype=D), torch.zeros(2, dtype=D)
    for agg, before in (("seq_mean_token_sum", -0.3), ("seq_mean_token_mean", -0.1), ("token_mean", -0.1)):
        old, _ = policy_loss(_cfg(agg=agg, entropy_coef=0.1), lp, lp, adv, m, entropy=h)
        new, metrics = policy_loss(_cfg(agg=agg, entropy_coef=0.1, entropy_agg="token_mean"), lp, lp, adv, m, entropy=h)
        assert old.item() == pytest.approx(before) and new.item() == pytest.approx(-0.1)
        assert metrics["loss/entropy"] == pytest.approx(-0.1)
    # a micro-batch of a mini-batch of 12 tokens: its 6 tokens' sum over 12
    part, _ = policy_loss(_cfg(entropy_coef=0.1, entropy_agg="token_mean"), lp, lp, adv, m, entropy=h, num_tokens=12)
    assert part.item() == pytest.approx(-0.05)


def test_entropy_agg_default_is_the_policy_agg():
    assert ObjectiveConfig().entropy_agg == "agg"


def test_adaptive_entropy_steps_by_hand():
    cfg = SimpleNamespace(entropy_coef=0.01, entropy_target=1.0, entropy_coef_delta=0.01, entropy_coef_min=0.0,
                          entropy_coef_max=0.025)  # fmt: skip
    ctl = AdaptiveEntropy.start(cfg)
    assert ctl.applied(cfg) == 0.0  # no measurement yet: no bonus (TRL: last entropy = inf)
    ctl.update(cfg, 0.5)  # below the target: up
    assert (ctl.coef, ctl.applied(cfg)) == (pytest.approx(0.02), pytest.approx(0.02))
    ctl.update(cfg, 0.9)  # up, capped at the max
    assert ctl.coef == pytest.approx(0.025)
    ctl.update(cfg, 1.5)  # above: down, and not applied while above
    assert (ctl.coef, ctl.applied(cfg)) == (pytest.approx(0.015), 0.0)
    for _ in range(3):
        ctl.update(cfg, 2.0)
    assert ctl.coef == 0.0  # floored at the min
    again = AdaptiveEntropy.start(cfg)
    again.load_state_dict(json.loads(json.dumps(ctl.state_dict())))
    assert again == ctl


def test_adaptive_without_a_controller_applies_no_bonus_first():
    h, m, lp = torch.ones(1, 3, dtype=D), torch.ones(1, 3, dtype=D), torch.zeros(1, 3, dtype=D)
    loss, _ = policy_loss(_cfg(use_adaptive_entropy=True, entropy_coef=0.5), lp, lp, _t([0.0]), m, entropy=h)
    assert loss.item() == 0.0
    loss, _ = policy_loss(_cfg(use_adaptive_entropy=True, entropy_coef=0.5), lp, lp, _t([0.0]), m, entropy=h,
                          extras={"entropy_coef": torch.tensor(0.2)})  # fmt: skip
    assert loss.item() == pytest.approx(-0.2)


# ----------------------------------------------------------------------------- equal to verl 0.9.1 and TRL 1.16
def _inputs(seed: int) -> dict:
    return {k: _t(v) for k, v in FIXTURE["inputs"][str(seed)].items()}


AGG = {"token-mean": "token_mean", "seq-mean-token-mean": "seq_mean_token_mean"}


@pytest.mark.parametrize("i", range(len(FIXTURE["cov"])))
def test_clip_cov_and_kl_cov_equal_verl(i):
    case = FIXTURE["cov"][i]
    x = _inputs(case["seed"])
    common = dict(eps_low=0.2, eps_high=0.28, agg=AGG[case["agg"]])
    if case["kind"] == "clip_cov":
        cfg = _cfg(clip="clip_cov", clip_cov_ratio=0.1, clip_cov_lb=0.2, clip_cov_ub=3.0, **common)
        torch.manual_seed(case["torch_seed"])
    else:
        cfg = _cfg(clip="kl_cov", kl_cov_ratio=0.1, ppo_kl_coef=1.0, **common)
    lp = x["logp"].clone().requires_grad_(True)
    loss, metrics = policy_loss(cfg, lp, x["old_logp"], x["adv"], x["mask"])
    loss.backward()
    assert loss.item() == pytest.approx(case["loss"], abs=1e-6)
    assert torch.allclose(lp.grad, _t(case["grad_logp"]), atol=1e-6)
    if case["kind"] == "clip_cov":
        assert metrics["clip_cov/frac"] == pytest.approx(case["frac"], abs=1e-6)


TRL_AGG = {"grpo": "seq_mean_token_mean", "dapo": "token_mean", "dr_grpo": "seq_mean_token_sum_norm"}


@pytest.mark.parametrize("i", range(len(FIXTURE["trl"])))
def test_top_entropy_quantile_and_entropy_bonus_equal_trl(i):
    case = FIXTURE["trl"][i]
    x = _inputs(100 + case["seed"])
    knobs = dict(eps_low=0.2, eps_high=0.28, agg=TRL_AGG[case["agg"]], entropy_coef=case["entropy_coef"])
    if case["agg"] == "dr_grpo":
        knobs["norm_constant"] = 12.0  # TRL's max_completion_length
    cfg = _cfg(top_entropy_quantile=case["quantile"], entropy_agg="token_mean", **knobs)
    lp = x["logp"].clone().requires_grad_(True)
    loss, _ = policy_loss(cfg, lp, x["old_logp"], x["adv"], x["mask"], entropy=x["entropy"])
    loss.backward()
    assert loss.item() == pytest.approx(case["loss"], abs=1e-6)
    assert torch.allclose(lp.grad, _t(case["grad_logp"]), atol=1e-6)
    if case["entropy_mask"] is not None:
        mask = top_entropy_mask(x["entropy"], x["mask"], case["quantile"])
        assert mask.tolist() == case["entropy_mask"]


def test_adaptive_entropy_equals_trl():
    ref = FIXTURE["adaptive"]
    cfg = SimpleNamespace(entropy_coef=ref["entropy_coef"], **ref["args"])
    ctl = AdaptiveEntropy.start(cfg)
    for h, want in zip(ref["window_entropies"], ref["trajectory"]):
        assert ctl.applied(cfg) == pytest.approx(want["applied"], abs=1e-12)
        ctl.update(cfg, h)
        assert ctl.coef == pytest.approx(want["coef"], abs=1e-12)


# ----------------------------------------------------------------------------- refusals
@pytest.mark.parametrize(
    "knobs, words",
    [
        (dict(clip="clip_cov", clip_cov_ratio=0.0), ["clip_cov_ratio", "greater than 0"]),
        (dict(clip="kl_cov", kl_cov_ratio=1.5), ["kl_cov_ratio", "less than or equal to 1"]),
        (dict(clip="kl_cov", ppo_kl_coef=-1.0), ["ppo_kl_coef", "greater than or equal to 0"]),
        (dict(top_entropy_quantile=1.2), ["top_entropy_quantile", "less than or equal to 1"]),
        (dict(use_adaptive_entropy=True, entropy_coef_delta=-0.1), ["entropy_coef_delta", "-0.1"]),
        (dict(entropy_agg="sum"), ["entropy_agg", "'sum'", "['agg', 'token_mean']"]),
        (dict(clip="clip_cov", dual_clip=3.0), ["dual_clip", "clip_cov", "None"]),
        # empty intervals: were they accepted, Clip-Cov would detach nothing (plain ppo, silently)
        (dict(clip="clip_cov", clip_cov_lb=5.0, clip_cov_ub=1.0), ["clip_cov_ub=1.0", "a number > clip_cov_lb"]),
        (dict(clip="clip_cov", clip_cov_lb=2.0, clip_cov_ub=2.0), ["clip_cov_ub=2.0", "a number > clip_cov_lb"]),
        (
            dict(use_adaptive_entropy=True, entropy_coef_min=0.5, entropy_coef_max=0.1),
            ["entropy_coef_max=0.1", "a number >= entropy_coef_min"],
        ),
    ],
)
def test_bad_values_are_refused_naming_the_knob(knobs, words):
    with pytest.raises(ValidationError) as e:
        ObjectiveConfig(**knobs)
    for w in words:
        assert w in str(e.value), (w, str(e.value))


@pytest.mark.parametrize(
    "overrides, knob",
    [
        (["objective.clip_cov_ratio=0.01"], "objective.clip_cov_ratio"),  # read only with clip: clip_cov
        (["objective.preset=clip_cov", "objective.kl_cov_ratio=0.1"], "objective.kl_cov_ratio"),
        (["objective.entropy_target=1.0"], "objective.entropy_target"),  # read only with use_adaptive_entropy
        (["objective.top_entropy_quantile=-0.5"], "objective.top_entropy_quantile"),
        (["objective.entropy_agg=mean"], "objective.entropy_agg"),
    ],
)
def test_run_config_refuses_before_a_model_loads(overrides, knob):
    with pytest.raises(ConfigError) as e:
        load_config("experiments/runs/smoke.yaml", overrides)
    assert knob in str(e.value)


@pytest.mark.parametrize("preset", ["clip_cov", "kl_cov", "top_entropy"])
def test_the_presets_load_in_the_run_config(preset):
    cfg = load_config("experiments/runs/smoke.yaml", [f"objective.preset={preset}"])
    assert cfg.objective.algorithm == preset
