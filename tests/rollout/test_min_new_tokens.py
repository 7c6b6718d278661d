"""rollout.min_new_tokens (`harness bench --fixed-length`): EOS cannot end a response before that many tokens, so two
trainers generate the same number of tokens. The tiny model here is made to favour EOS at every step (a hook adds
+30 to its logit): without the knob every response ends at its first token, with it every one is T long."""

import pytest

from harness.config import ConfigError, load_config
from harness.models import build_model
from harness.rollout import SamplingParams, make_backend


def _eos_loving_model():
    model, tok = build_model("tiny-dense", seed=0)

    def boost(module, args, out):
        out.logits[..., tok.eos_token_id] += 30.0
        return out

    model.register_forward_hook(boost)
    return model, tok


@pytest.mark.parametrize("seeding", ["batch", "prompt"])
def test_min_new_tokens_gives_every_response_the_full_length(seeding):
    model, tok = _eos_loving_model()
    T = 6
    params = SamplingParams(max_new_tokens=T, temperature=1.0, seed=3)
    lengths = {}
    for low in (0, T):
        cfg = load_config(
            "experiments/runs/smoke.yaml", [f"rollout.seeding={seeding}", f"rollout.min_new_tokens={low}"]
        )
        out = make_backend(cfg.rollout, model, tok).generate([[3, 4, 5], [6, 7]], 2, params)
        lengths[low] = out.response_mask.sum(-1).tolist()
        if low:
            assert out.truncated.all()  # T tokens without an EOS: truncated, as any response that hits the cap
    assert lengths[0] == [1.0] * 4  # EOS drawn first: the knob is what makes them long
    assert lengths[T] == [float(T)] * 4


def test_min_new_tokens_above_the_cap_is_refused():
    with pytest.raises(ConfigError, match="rollout.min_new_tokens=9 exceeds rollout.max_new_tokens=8"):
        load_config("experiments/runs/smoke.yaml", ["rollout.max_new_tokens=8", "rollout.min_new_tokens=9"])


def test_vllm_request_carries_min_tokens():
    pytest.importorskip("vllm")
    from harness.rollout.vllm_backend import VLLMBackend

    cfg = load_config("experiments/runs/smoke.yaml", ["rollout.min_new_tokens=5"])
    be = VLLMBackend.__new__(VLLMBackend)  # no engine: only the request's parameters are built
    be.min_new_tokens, be.eos_id = cfg.rollout.min_new_tokens, 2
    sp = be._request_params(2, SamplingParams(max_new_tokens=8), seed=0)
    assert sp.min_tokens == 5 and sp.max_tokens == 8
