"""TRL 1.16's reward-model loss on fixed random rewards -> tests/objective/fixtures/trl_reward_loss.json.

Calls trl.trainer.reward_trainer.RewardTrainer.compute_loss (TRL 1.16.0, reward_trainer.py, the method at
"def compute_loss") itself, unbound, on a stand-in trainer (its args, accelerator and metric store) and a
stand-in model whose logits are the given rewards: chosen rows first, then rejected rows (TRL's
collator). Cases: plain, with a margin column, with center_rewards_coefficient, both. The test
(tests/rm/test_rm_loss.py) compares harness.rm.loss.bt_loss to these numbers at 1e-6.

    python benchmarks/reference/trl_reward_loss.py     # needs trl==1.16 (the project venv has it)
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import torch
import trl
from trl.trainer.reward_trainer import RewardTrainer

OUT = Path(__file__).resolve().parents[2] / "tests" / "objective" / "fixtures" / "trl_reward_loss.json"
P = 7  # pairs


class _Rewards(torch.nn.Module):
    """A model whose logits (2P, 1) are the rewards it is given."""

    def forward(self, logits, **_):
        return SimpleNamespace(logits=logits)


def _trainer(coef: float | None) -> SimpleNamespace:
    identity = SimpleNamespace(gather=lambda x: x, gather_for_metrics=lambda x: x)
    model = _Rewards().eval()  # eval mode: TRL skips its token count
    return SimpleNamespace(
        model=model,
        args=SimpleNamespace(center_rewards_coefficient=coef),
        accelerator=identity,
        _metrics={"train": defaultdict(list), "eval": defaultdict(list)},
        _total_train_tokens=0,
        _tp_size=1,
    )


def trl_loss(chosen: torch.Tensor, rejected: torch.Tensor, margin: torch.Tensor | None, coef: float | None) -> float:
    me = _trainer(coef)
    inputs = {"logits": torch.cat([chosen, rejected]).unsqueeze(-1), "attention_mask": torch.ones(2 * P, 3)}
    if margin is not None:
        inputs["margin"] = margin
    return float(RewardTrainer.compute_loss(me, me.model, inputs))


def main() -> None:
    gen = torch.Generator().manual_seed(43)
    chosen = torch.randn(P, generator=gen, dtype=torch.float64) * 2
    rejected = torch.randn(P, generator=gen, dtype=torch.float64) * 2
    margin = torch.rand(P, generator=gen, dtype=torch.float64)
    cases = []
    for name, m, coef in (
        ("plain", None, None),
        ("margin", margin, None),
        ("center", None, 0.01),
        ("both", margin, 0.05),
    ):
        cases.append(
            {
                "name": name,
                "margin": None if m is None else m.tolist(),
                "center_rewards_coefficient": coef,
                "loss": trl_loss(chosen, rejected, m, coef),
            }
        )
    data = {"trl": trl.__version__, "chosen": chosen.tolist(), "rejected": rejected.tolist(), "cases": cases}
    OUT.write_text(json.dumps(data, indent=1) + "\n")
    print(OUT)


if __name__ == "__main__":
    main()
