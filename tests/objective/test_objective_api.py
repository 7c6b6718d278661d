"""The snippet of docs/objective.md, "Public Python API" runs exactly as written."""

from __future__ import annotations

import math

import torch

import harness.objective as objective

SNIPPET = """
from harness.objective import (ObjectiveConfig, group_advantages, policy_loss,
                               kl_penalty, dpo_loss, pass_at_k)
cfg = ObjectiveConfig.preset("dapo", eps_high=0.3)   # or ObjectiveConfig(**knobs); unset knobs take defaults
adv = group_advantages(cfg, rewards, group_size)     # rewards (B,) -> (B,)
loss, metrics = policy_loss(cfg, logp, old_logp, adv, mask, ref_logp=None)
                                                     # adv (B,) or (B,T); metrics: dict[str, float]
k = kl_penalty(logp, ref_logp, "k3")                 # (B,T), estimator "k1" | "k2" | "k3"
loss, metrics = dpo_loss(cfg, pol_chosen, pol_rejected, ref_chosen, ref_rejected)
p = pass_at_k(n, c, k)                               # float
"""


def test_api_snippet_runs_as_written():
    g = torch.Generator().manual_seed(0)
    B, Tn = 8, 6
    logp = -torch.rand(B, Tn, generator=g).requires_grad_()
    ns = dict(
        rewards=torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0]),
        group_size=4,
        logp=logp,
        old_logp=logp.detach() - 0.05,
        mask=torch.ones(B, Tn),
        ref_logp=logp.detach() + 0.1,
        pol_chosen=torch.tensor([-3.0, -4.0]),
        pol_rejected=torch.tensor([-5.0, -4.5]),
        ref_chosen=torch.tensor([-3.5, -4.0]),
        ref_rejected=torch.tensor([-4.0, -4.0]),
        n=8,
        c=3,
    )
    # SNIPPET (the original design note's) rebinds `k` to the KL tensor and then passes it to pass_at_k(n, c, k).
    # With that one rename it is the snippet of docs/objective.md, "Public Python API" verbatim; without it pass_at_k
    # gets the tensor as k and refuses it loudly rather than guessing.
    fixed = SNIPPET.replace("k = kl_penalty(", "k_tok = kl_penalty(")
    assert fixed.count("k_tok") == 1
    ns["k"] = 4
    exec(compile(fixed, "docs/objective.md, Public Python API", "exec"), ns)
    cfg = ns["cfg"]
    assert (cfg.algorithm, cfg.eps_high, cfg.eps_low) == ("dapo", 0.3, 0.2)
    assert ns["adv"].shape == (B,)
    assert ns["k_tok"].shape == (B, Tn) and (ns["k_tok"] >= 0).all()
    assert ns["loss"].dim() == 0 and set(ns["metrics"]) >= {"rewards/chosen", "rewards/accuracy", "logps/chosen"}
    # pass@4 with 3 of 8 correct: 1 - C(5,4)/C(8,4) = 1 - 5/70
    assert isinstance(ns["p"], float) and math.isclose(ns["p"], 1 - 5 / 70, abs_tol=1e-12)


def test_api_snippet_verbatim_trips_on_the_shadowed_k():
    ns = dict(n=8, c=3, k=torch.zeros(2, 2))
    try:
        exec("from harness.objective import pass_at_k\np = pass_at_k(n, c, k)", ns)
    except TypeError:
        return
    raise AssertionError("pass_at_k accepted a (B, T) tensor as k")


def test_public_names():
    assert set(objective.__all__) == {
        "ObjectiveConfig",
        "group_advantages",
        "policy_loss",
        "kl_penalty",
        "dpo_loss",
        "pass_at_k",
        "PRESETS",
        "gae_advantages",
        "value_loss",
        "explained_variance",
        "overlong_penalty",
        "dynamic_sampling_keep",
        "aggregate",
        "importance_ratio",
        "inputs_needed",
        "Needs",
        "loss_mask",
        "batch_correction",
        "BatchCorrection",
        "advantages",
        "Scored",
        "loss",
        "LossInputs",
        "MODE_KNOBS",
        # a researcher's own modes, knobs and presets (docs/extending.md)
        "EXTENSIONS",
        "Knob",
        "Requires",
        "Hooks",
        "TokenLogits",
        "register",
        "register_baseline",
        "register_scale",
        "register_ratio",
        "register_clip",
        "register_agg",
        "register_kl_estimator",
        "register_extension",
        "register_preset",
    }
    for name in objective.__all__:
        assert getattr(objective, name) is not None
