"""rollout.share_prefix (hf): a prompt's G rows share one prefill (harness/rollout/hf.py shared_prefix). The
prefill runs on each distinct prompt once, and generate goes on from the copied cache: the same samples as
without it but where the prefill's rounding (a batch of another width) moves a near-tie."""

import pytest
import torch

from harness.config import load_config
from harness.models import build_model
from harness.rollout import SamplingParams, make_backend


def _generate(share: bool, rows_seen: list | None = None):
    cfg = load_config("experiments/runs/smoke.yaml", ["rollout.seeding=prompt", f"rollout.share_prefix={share}"])
    built = build_model("tiny-dense", seed=0)
    model, tok = built if isinstance(built, tuple) else (built, None)
    if rows_seen is not None:
        model.model.layers[0].register_forward_hook(lambda m, i, o: rows_seen.append(tuple(i[0].shape[:2])))
    be = make_backend(cfg.rollout, model, tok)
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(3, 20, (n,), generator=g).tolist() for n in (6, 9, 4, 7)]
    return be.generate(prompts, 4, SamplingParams(max_new_tokens=12, temperature=1.0, seed=5))


def test_a_prompt_is_prefilled_once_for_its_group_and_samples_the_same():
    seen: list = []
    shared, plain = _generate(True, seen), _generate(False)
    assert seen[0] == (4, 8)  # the prefill: 4 distinct prompts, the widest (9 tokens) but its last
    assert all(rows == 16 for rows, _ in seen[1:])  # then the 16 rows (4 prompts x G = 4), a token at a time
    same = (shared.response_ids == plain.response_ids).all(-1)
    assert int(same.sum()) >= 15, f"{int((~same).sum())} of 16 rows differ"
    close = torch.allclose(shared.sampler_logp[same], plain.sampler_logp[same], atol=1e-4, rtol=0)
    assert close and float(plain.response_mask.sum()) > 16


def test_share_prefix_with_an_moe_is_refused_naming_the_key():
    """An MoE's routing record reads generate's own prefill of every row: refused when the config loads."""
    with pytest.raises(ValueError, match=r"rollout\.share_prefix=true with model\.name='tiny-moe'"):
        load_config("experiments/runs/smoke.yaml", ["model.name=tiny-moe", "rollout.share_prefix=true"])
