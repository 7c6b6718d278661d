"""policy_update (harness/train/rl/update.py) on a tiny model and a hand-built batch, not end to end:
micro-batching changes no gradient (docs/objective.md, "Aggregation"), mini_batches=K takes K optimizer steps,
one plain-SGD step equals a step along the gradient of policy_loss on the whole batch, and the
returned metrics are those of docs/objective.md, "Metrics". Shapes: B = 4 rows, T = 5 response tokens."""

import pytest
import torch
from transformers import LlamaForCausalLM

from harness.config import load_config
from harness.models.logprobs import response_logprobs
from harness.models.tiny import tiny_dense_config
from harness.objective import policy_loss
from harness.train.core.batch import Batch
from harness.train.core.components import Trained
from harness.train.core.step_context import StepContext
from harness.train.rl.update import policy_update

PAD = 0


@pytest.fixture(autouse=True)
def _one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def _model(seed=0):
    torch.manual_seed(seed)
    return LlamaForCausalLM(
        tiny_dense_config(
            num_hidden_layers=1, hidden_size=32, intermediate_size=64, num_attention_heads=2, num_key_value_heads=1
        )
    ).float()


def _cfg(*overrides):
    return load_config(
        "experiments/runs/smoke.yaml",
        [
            "tracking.mlflow=false",
            "train.prompts_per_step=2",
            "train.group_size=2",
            "train.mini_batches=1",
            "rollout.temperature=1.0",
            "train.grad_clip=null",
            "objective.kl_coef=0",
            *overrides,
        ],
    )


def _batch(model, old_shift=0.0):
    g = torch.Generator().manual_seed(1)
    prompts = [[1, 5, 6], [1, 7], [1, 8, 9, 10], [1, 11]]
    resp = torch.randint(3, 30, (4, 5), generator=g)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.float32)
    resp = resp * mask.long()
    with torch.no_grad():
        lp, _, _ = response_logprobs(model, prompts, resp, mask, PAD, 1.0)
    return Batch(
        prompts, resp, mask, mask, lp.clone(), adv=torch.tensor([1.0, -1.0, 0.5, -0.5]), old_logp=lp + old_shift * mask
    )


class CountingSGD(torch.optim.SGD):
    steps = 0

    def step(self, closure=None):
        self.steps += 1
        return super().step(closure)


def _update(cfg, batch, single_pass, seed=0, lr=0.1):
    model = _model(seed)
    opt = CountingSGD(model.parameters(), lr=lr)
    sc = StepContext(cfg, Trained("policy", model, opt), (), None, torch.device("cpu"), PAD, single_pass)
    out = policy_update(sc, batch, torch.Generator().manual_seed(0))
    return model, opt, out


def _params(model):
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def test_micro_batch_of_one_gives_the_same_step_as_the_whole_batch():
    batch = _batch(_model())
    whole, _, m_whole = _update(_cfg(), batch, single_pass=True)
    micro, _, m_micro = _update(_cfg("train.micro_batch_size=1"), batch, single_pass=True)
    assert torch.allclose(_params(whole), _params(micro), atol=1e-7, rtol=0)
    assert m_micro["loss/policy"] == pytest.approx(m_whole["loss/policy"], abs=1e-7)
    assert m_micro["grad/norm"] == pytest.approx(m_whole["grad/norm"], rel=1e-5)
    assert m_micro["entropy"] == pytest.approx(m_whole["entropy"], rel=1e-5)


def test_sequence_metrics_do_not_depend_on_the_micro_batches():
    """GSPO's ratio mean and clip fractions are means over sequences: merged over micro-batches by their
    sequences, not their tokens (rows here have 5, 2, 3 and 1 tokens), they equal the whole batch's."""
    batch = _batch(_model(), old_shift=0.3)  # ratios away from 1, some clipped
    cfg = ("objective.preset=gspo",)
    _, _, whole = _update(_cfg(*cfg), batch, single_pass=False)
    _, _, micro = _update(_cfg(*cfg, "train.micro_batch_size=1"), batch, single_pass=False)
    for k in ("ratio/mean", "clip/frac", "clip/frac_low", "clip/frac_high", "entropy"):
        assert micro[k] == pytest.approx(whole[k], rel=1e-6, abs=1e-9), k
    assert whole["ratio/mean"] != pytest.approx(1.0, abs=1e-3)  # the shift moved the ratios


def test_one_sgd_step_is_the_gradient_of_policy_loss_on_the_whole_batch():
    cfg = _cfg()
    batch = _batch(_model())
    ref = _model()
    logp, entropy, _ = response_logprobs(
        ref, batch.prompt_ids, batch.response_ids, batch.mask, PAD, 1.0, with_entropy=True
    )
    loss, _ = policy_loss(cfg.objective, logp, logp.detach(), batch.adv, batch.mask, entropy=entropy.detach())
    grads = torch.autograd.grad(loss, list(ref.parameters()), allow_unused=True)
    expect = torch.cat(
        [
            (p.detach() - 0.1 * (g if g is not None else torch.zeros_like(p))).flatten()
            for p, g in zip(ref.parameters(), grads)
        ]
    )
    model, opt, out = _update(cfg, batch, single_pass=True)
    assert opt.steps == 1
    assert torch.allclose(_params(model), expect, atol=1e-7, rtol=0)
    g_norm = float(torch.sqrt(sum((g.float() ** 2).sum() for g in grads if g is not None)))
    assert out["grad/norm"] == pytest.approx(g_norm, rel=1e-5) and out["grad/norm_max"] == out["grad/norm"]
    assert out["ratio/mean"] == pytest.approx(1.0) and out["clip/frac"] == 0.0  # single pass: rho = 1
    assert out["loss/policy"] == pytest.approx(float(loss), abs=1e-7)


def test_two_mini_batches_take_two_optimizer_steps_and_average_their_metrics():
    cfg = _cfg("train.mini_batches=2", "objective.eps_high=0.1", "objective.eps_low=0.1")
    batch = _batch(_model(), old_shift=0.3)  # pi_old differs from pi_theta: the ratio is exp(-0.3), off 1
    model, opt, out = _update(cfg, batch, single_pass=False)
    assert opt.steps == 2
    assert set(out) >= {
        "clip/frac",
        "clip/frac_low",
        "clip/frac_high",
        "ratio/mean",
        "ratio/max",
        "kl/old",
        "entropy",
        "loss/policy",
        "loss/kl",
        "loss/entropy",
        "grad/norm",
        "grad/norm_max",
    }
    assert "kl/ref" not in out and "loss/value" not in out
    # old_logp - logp: exactly the shift on the first mini-batch, the shift plus one step's move on the second
    assert out["kl/old"] == pytest.approx(0.3, abs=0.02) and out["kl/old"] != pytest.approx(0.3, abs=1e-6)
    assert out["grad/norm_max"] >= out["grad/norm"] > 0
    assert out["ratio/max"] < 1.0  # exp(-0.3) < 1 - eps_low: the clip binds on every A < 0 token
    assert out["clip/frac_low"] > 0 and out["clip/frac_high"] == 0.0
    # a plain-SGD step per mini-batch: the second one starts from the first one's parameters
    assert not torch.allclose(_params(model), _params(_model()))


def test_inner_epochs_multiply_the_optimizer_steps():
    cfg = _cfg("train.mini_batches=2", "train.inner_epochs=2")
    _, opt, _ = _update(cfg, _batch(_model()), single_pass=False)
    assert opt.steps == 4
