"""train.chunked_head changes no preset's update: every preset the RL trainer runs scores a hand-built episode and
takes its update (harness/train/core/scoring.py, rl/update.py) with the output head whole and by chunks of 4
positions; the loss and every metric of the update, and the gradient of every trained module (the policy, PPO's
critic, PRIME's reward model), agree to 1e-6. Shapes: N = 2 prompts, G = 4, B = 8 rows, T = 6 response tokens."""

from types import SimpleNamespace

import pytest
import torch
from transformers import LlamaForCausalLM

import harness.train.rl.update as update
from harness.config import load_config
from harness.models.logprobs import response_logprobs
from harness.models.tiny import tiny_dense_config
from harness.objective import inputs_needed
from harness.objective.entropy_control import adaptive_entropy
from harness.objective.presets import BUILTIN_PRESETS, preset_trainer
from harness.rollout.base import RolloutBatch
from harness.train.core.components import Trained, build_components
from harness.train.core.episode import Episode
from harness.train.core.scoring import frozen_reference, score_episode
from harness.train.core.step_context import StepContext

PRESETS = [name for name in BUILTIN_PRESETS if preset_trainer(name) == "rl"]
EXTRA = {"passk": ["objective.passk_k=2"]}  # G = 4: pass@k needs k < G
EXTRA["opd"] = ["model.teacher=tiny-dense"]  # on-policy distillation's teacher, where the preset exists
PAD = 0
CLIP_AND_STEP = update.clip_and_step  # the real one, whatever a test patched in


@pytest.fixture(autouse=True)
def _one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def _model():
    torch.manual_seed(0)
    shape = dict(num_hidden_layers=1, hidden_size=32, intermediate_size=64, num_attention_heads=2)
    return LlamaForCausalLM(tiny_dense_config(num_key_value_heads=1, **shape)).float()


def _cfg(preset: str, chunked: bool):
    return load_config(
        "experiments/runs/smoke.yaml",
        [
            "tracking.mlflow=false",
            "train.prompts_per_step=2",
            "train.group_size=4",
            "rollout.temperature=1.3",
            "train.grad_clip=null",
            f"objective.preset={preset}",
            *EXTRA.get(preset, []),
            f"train.chunked_head={'true' if chunked else 'false'}",
            "train.head_chunk_tokens=4",
        ],
    )


def _episode(model, cfg) -> Episode:
    """Two prompts x 4 responses of 6, 3, 5, 1, 6, 2, 4, 6 tokens; rewards 1 0 1 0 / 0 1 1 0; the sampler's log-probs
    the policy's own, shifted by 0.05 a token (ratios off 1 where a preset weighs the sampler)."""
    g = torch.Generator().manual_seed(2)
    prompts = [[1, 5, 6, 7]] * 4 + [[1, 9, 4]] * 4
    lens = [6, 3, 5, 1, 6, 2, 4, 6]
    mask = (torch.arange(6).unsqueeze(0) < torch.tensor(lens).unsqueeze(1)).float()
    resp = torch.randint(3, model.config.vocab_size, (8, 6), generator=g) * mask.long()
    with torch.no_grad():
        logp, _, _ = response_logprobs(model, prompts, resp, mask, PAD, cfg.rollout.temperature)
    rollout = RolloutBatch(prompts, resp, mask, (logp - 0.05) * mask, torch.zeros(8, dtype=torch.bool), [""] * 8)
    rewards = torch.tensor([1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0])
    verdicts = [SimpleNamespace(correct=bool(r)) for r in rewards.tolist()]
    greedy = torch.tensor([0.5, 0.25]) if inputs_needed(cfg.objective).greedy_rewards else None
    return Episode([SimpleNamespace(difficulty="easy")] * 2, rollout, verdicts, rewards, torch.zeros(8), 4, greedy)


def _teacher(cfg) -> dict:
    """{"teacher": pi_T} where the objective distils from a teacher (its log-probs by the same forwards), else {}."""
    if not getattr(inputs_needed(cfg.objective), "teacher_logp", False):
        return {}
    from harness.train.core import scoring

    return {"teacher": scoring.frozen_teacher(cfg, torch.device("cpu"))}


def _update(preset: str, chunked: bool, monkeypatch) -> tuple[dict, list[dict]]:
    """The update's metrics and, at each optimizer step, every trained module's gradient by name."""
    cfg, model = _cfg(preset, chunked), _model()
    ep = _episode(model, cfg)
    ref = frozen_reference(cfg, model)
    torch.manual_seed(1)
    components = build_components(cfg, model, list(inputs_needed(cfg.objective).components), torch.device("cpu"))
    policy = Trained("policy", model, torch.optim.SGD(model.parameters(), lr=0.1))
    sc = StepContext.build(cfg, policy, components, ref, torch.device("cpu"), PAD, **_teacher(cfg))
    batch, _ = score_episode(sc, ep)
    grads: list[dict] = []

    def spy(trained, *args, **kwargs):
        grads.append(
            {
                f"{t.name}.{n}": p.grad.clone()
                for t in trained
                for n, p in t.module.named_parameters()
                if p.grad is not None
            }
        )
        return CLIP_AND_STEP(trained, *args, **kwargs)

    monkeypatch.setattr(update, "clip_and_step", spy)
    ctl = adaptive_entropy(cfg.objective)
    metrics = update.policy_update(sc, batch, torch.Generator().manual_seed(0), entropy_ctl=ctl)
    return metrics, grads


@pytest.mark.parametrize("preset", PRESETS)
def test_chunked_head_gives_every_presets_loss_and_gradient(preset, monkeypatch):
    whole, g_whole = _update(preset, False, monkeypatch)
    chunked, g_chunked = _update(preset, True, monkeypatch)
    assert set(chunked) == set(whole) and "loss/policy" in whole
    for k, v in whole.items():
        assert chunked[k] == pytest.approx(v, rel=1e-6, abs=1e-6, nan_ok=True), (preset, k)
    assert len(g_chunked) == len(g_whole) >= 1
    for step_whole, step_chunked in zip(g_whole, g_chunked):
        assert set(step_chunked) == set(step_whole)
        for k, g in step_whole.items():
            scale = max(1.0, float(g.abs().max()))
            diff = float((step_chunked[k] - g).abs().max())
            assert diff <= 1e-6 * scale, (preset, k, diff, scale)
    assert any(float(g.abs().max()) > 0 for step in g_whole for g in step.values()), f"{preset}: no gradient"
