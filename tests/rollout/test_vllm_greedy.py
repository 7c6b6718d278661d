"""vLLM at temperature 0 is greedy decoding (ReMax's baseline response): every generated token is the
argmax of the policy's own logits at its position (teacher-forced, fp32 on CPU), and the seed changes
nothing. Slow: it starts its own engine (~20-40 s on 2 idle cores)."""

import pytest
import torch

pytest.importorskip("vllm")

from harness.config import RolloutSection  # noqa: E402
from harness.models import build_model, render_prompt  # noqa: E402
from harness.rollout import make_backend  # noqa: E402
from harness.rollout.base import SamplingParams  # noqa: E402

pytestmark = pytest.mark.slow
TIE = 1e-4  # a position whose top two logits are closer than this may differ between kernels: not counted


def test_vllm_temperature_zero_is_argmax_decoding(one_torch_thread):
    model, tok = build_model("tiny-dense", seed=0)
    model.eval()
    backend = make_backend(RolloutSection(backend="vllm", max_new_tokens=24), model, tok)
    try:
        prompts = [render_prompt(tok, f"What is {a}+{a + 7}?\nAnswer:") for a in range(6)]
        runs = [
            backend.generate(prompts, 1, SamplingParams(max_new_tokens=24, temperature=0.0, seed=s)) for s in (1, 9)
        ]
    finally:
        backend.close()
    assert torch.equal(runs[0].response_ids, runs[1].response_ids)
    r, checked = runs[0], 0
    for i, prompt in enumerate(r.prompt_ids):
        n = int(r.lengths[i])
        resp = r.response_ids[i, :n]
        with torch.no_grad():
            logits = model(torch.tensor([prompt + resp.tolist()])).logits[0, len(prompt) - 1 : len(prompt) - 1 + n]
        top2 = logits.float().topk(2, dim=-1).values
        clear = (top2[:, 0] - top2[:, 1]) > TIE
        assert torch.equal(logits.argmax(-1)[clear], resp[clear]), i
        checked += int(clear.sum())
    assert checked > 30
