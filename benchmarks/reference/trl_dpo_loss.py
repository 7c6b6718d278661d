"""TRL 1.16's DPO losses on fixed random log-probs -> tests/objective/fixtures/trl_dpo_loss.json.

Calls trl.trainer.dpo_trainer.DPOTrainer._compute_loss (TRL 1.16.0, dpo_trainer.py, the method at
"def _compute_loss": TRL 1.16 has no separate dpo_loss method, the loss types live there) itself, unbound,
on a stand-in trainer (the attributes it reads: beta, loss_types, loss_weights, label_smoothing,
args.discopop_tau, ld_alpha None, f_divergence_type reverse_kl, precompute_ref_logps True so the
reference log-probs come from the inputs, use_weighting False, an identity accelerator, the metric
store) and a stand-in model. The model's per-token log-probs (2B, T-1) spread each row's sequence
log-prob s_i evenly over its completion tokens (s_i * mask / |y_i|), so TRL's sum over tokens gives
back s_i and the gradient w.r.t. s (2B,) is the gradient w.r.t. the sequence log-probs; rows are
chosen first, then rejected (TRL's collator), each with one prompt token before its completion.

For every loss type the harness implements (harness/objective/dpo_losses.py), and two mixes of several
(TRL's loss_type list with loss_weights: the harness's dpo_loss_weights), the fixture holds TRL's
loss and its gradient w.r.t. the policy's chosen and rejected sequence log-probs; the test
(tests/objective/test_trl_dpo_losses.py) compares harness.objective.dpo_loss to them at 1e-6.

    python benchmarks/reference/trl_dpo_loss.py     # needs trl==1.16 (make bench-venv)
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import torch
import trl
from trl.trainer.dpo_trainer import DPOTrainer

OUT = Path(__file__).resolve().parents[2] / "tests" / "objective" / "fixtures" / "trl_dpo_loss.json"
B = 8  # pairs

# (name, TRL loss_type list, loss_weights, beta, label_smoothing, discopop_tau)
CASES = (
    ("sigmoid", ["sigmoid"], None, 0.1, 0.0, 0.05),
    ("sigmoid_beta0.5", ["sigmoid"], None, 0.5, 0.0, 0.05),
    ("hinge", ["hinge"], None, 0.1, 0.0, 0.05),
    ("ipo", ["ipo"], None, 0.1, 0.0, 0.05),
    ("ipo_beta0.5", ["ipo"], None, 0.5, 0.0, 0.05),
    ("exo_pair", ["exo_pair"], None, 0.1, 1e-3, 0.05),
    ("exo_pair_eps0.2", ["exo_pair"], None, 0.1, 0.2, 0.05),
    ("nca_pair", ["nca_pair"], None, 0.1, 0.0, 0.05),
    ("robust", ["robust"], None, 0.1, 0.1, 0.05),
    ("bco_pair", ["bco_pair"], None, 0.1, 0.0, 0.05),
    ("sppo_hard", ["sppo_hard"], None, 0.1, 0.0, 0.05),
    ("aot", ["aot"], None, 0.1, 0.0, 0.05),
    ("aot_eps0.1", ["aot"], None, 0.1, 0.1, 0.05),
    ("aot_unpaired", ["aot_unpaired"], None, 0.1, 0.0, 0.05),
    ("aot_unpaired_eps0.1", ["aot_unpaired"], None, 0.1, 0.1, 0.05),
    ("apo_zero", ["apo_zero"], None, 0.1, 0.0, 0.05),
    ("apo_down", ["apo_down"], None, 0.1, 0.0, 0.05),
    ("discopop", ["discopop"], None, 0.1, 0.0, 0.05),
    ("discopop_tau0.5", ["discopop"], None, 0.1, 0.0, 0.5),
    ("sigmoid_norm", ["sigmoid_norm"], None, 0.1, 0.0, 0.05),
    ("mpo", ["sigmoid", "bco_pair"], [0.8, 0.2], 0.1, 0.0, 0.05),  # MPO 2411.10442's DPO + BCO mix
    ("mix_ipo_robust_discopop", ["ipo", "robust", "discopop"], [1.0, 0.5, 2.0], 0.2, 0.1, 0.1),
)


class _Spread(torch.nn.Module):
    """A model whose per-token log-probs (2B, T-1) are each row's sequence log-prob spread evenly over its
    completion tokens; entropy, mean logits and top-1 are zeros (TRL only logs them)."""

    def __init__(self, seq: torch.Tensor, shift_mask: torch.Tensor):
        super().__init__()
        self.seq, self.shift_mask = seq, shift_mask  # (2B,) with grad, (2B, T-1)

    def forward(self, **_):
        per_token = self.seq[:, None] * self.shift_mask / self.shift_mask.sum(1, keepdim=True)
        zeros = torch.zeros_like(self.shift_mask)
        return SimpleNamespace(log_probs=per_token, entropy=zeros, mean_logits=zeros, is_top1=zeros.bool())


def _trainer(model, loss_types, weights, beta, eps, tau) -> SimpleNamespace:
    identity = SimpleNamespace(
        gather=lambda x: x, gather_for_metrics=lambda x: x, device=torch.device("cpu"), unwrap_model=lambda m: m
    )
    return SimpleNamespace(
        model=model.eval(),  # eval mode: TRL skips its token count
        accelerator=identity,
        aux_loss_enabled=False,
        ld_alpha=None,
        precompute_ref_logps=True,
        f_divergence_type="reverse_kl",
        loss_types=loss_types,
        loss_weights=weights or [1.0] * len(loss_types),
        beta=beta,
        label_smoothing=eps,
        use_weighting=False,
        args=SimpleNamespace(discopop_tau=tau),
        _metrics={"train": defaultdict(list), "eval": defaultdict(list)},
        _total_train_tokens=0,
        _tp_size=1,
    )


def _inputs(lengths: torch.Tensor, ref_chosen: torch.Tensor, ref_rejected: torch.Tensor) -> dict:
    """TRL's collated batch: one prompt token, then each row's completion (lengths (2B,)), padded."""
    T = 1 + int(lengths.max())
    completion_mask = torch.zeros(2 * B, T, dtype=torch.long)
    for i, n in enumerate(lengths.tolist()):
        completion_mask[i, 1 : 1 + n] = 1
    attention = completion_mask.clone()
    attention[:, 0] = 1
    return {
        "input_ids": torch.ones(2 * B, T, dtype=torch.long),
        "attention_mask": attention,
        "completion_mask": completion_mask,
        "ref_chosen_logps": ref_chosen,
        "ref_rejected_logps": ref_rejected,
    }


def trl_case(data: dict, loss_types, weights, beta, eps, tau) -> dict:
    pol = torch.tensor(data["pol_chosen"] + data["pol_rejected"], dtype=torch.float64, requires_grad=True)
    lengths = torch.tensor(data["chosen_lengths"] + data["rejected_lengths"])
    f64 = dict(dtype=torch.float64)  # (a list of floats would become float32 first)
    inputs = _inputs(lengths, torch.tensor(data["ref_chosen"], **f64), torch.tensor(data["ref_rejected"], **f64))
    model = _Spread(pol, inputs["completion_mask"][:, 1:].double())
    me = _trainer(model, loss_types, weights, beta, eps, tau)
    loss = DPOTrainer._compute_loss(me, me.model, inputs, return_outputs=False)
    (grad,) = torch.autograd.grad(loss, pol)
    return {"loss": float(loss), "grad_chosen": grad[:B].tolist(), "grad_rejected": grad[B:].tolist()}


def main() -> None:
    gen = torch.Generator().manual_seed(47)
    ref = -(torch.rand(2 * B, generator=gen, dtype=torch.float64) * 30 + 5)  # sequence log-prob sums
    pol = ref + torch.randn(2 * B, generator=gen, dtype=torch.float64) * 3
    lengths = torch.randint(3, 25, (2 * B,), generator=gen)
    data = {
        "pol_chosen": pol[:B].tolist(),
        "pol_rejected": pol[B:].tolist(),
        "ref_chosen": ref[:B].tolist(),
        "ref_rejected": ref[B:].tolist(),
        "chosen_lengths": lengths[:B].tolist(),
        "rejected_lengths": lengths[B:].tolist(),
    }
    cases = []
    for name, loss_types, weights, beta, eps, tau in CASES:
        out = trl_case(data, loss_types, weights, beta, eps, tau)
        cases.append(
            {
                "name": name,
                "loss_type": loss_types,
                "loss_weights": weights,
                "beta": beta,
                "label_smoothing": eps,
                "discopop_tau": tau,
                **out,
            }
        )
    OUT.write_text(json.dumps({"trl": trl.__version__, **data, "cases": cases}, indent=1) + "\n")
    print(OUT)


if __name__ == "__main__":
    main()
