"""The hf backend hands generate its prompt ids on the model's device. transformers' generate copies each
step's logits to input_ids' device (`.to(device=input_ids.device)`), so ids built on the host made a GPU run
draw every token (softmax, cumsum or multinomial over (b, V)) on the CPU: found on a lent H200, where our
rollout took 1.5x TRL's. On a CPU-only machine host and model device are one, so the ids that left_pad builds
here are of a Tensor subclass that records where `.to` sends them: they must reach generate sent to the
model's device."""

import torch

import harness.rollout.hf as hf
from harness.config import load_config
from harness.models import build_model
from harness.rollout import SamplingParams, make_backend


class HostIds(torch.Tensor):
    """Ids as left_pad builds them, on the host; `.to` records its device and returns a plain tensor."""

    sent_to: list = []

    def to(self, *args, **kwargs):
        device = kwargs.get("device", args[0] if args and not isinstance(args[0], torch.dtype) else None)
        if device is not None:
            HostIds.sent_to.append(torch.device(device))
        return self.as_subclass(torch.Tensor).to(*args, **kwargs)


def test_generate_gets_its_prompt_ids_sent_to_the_models_device(monkeypatch):
    cfg = load_config("experiments/runs/smoke.yaml", ["rollout.seeding=prompt"])
    model, tok = build_model("tiny-dense", seed=0)
    be = make_backend(cfg.rollout, model, tok)
    on_host = hf.left_pad
    monkeypatch.setattr(hf, "left_pad", lambda rows, pad: tuple(t.as_subclass(HostIds) for t in on_host(rows, pad)))
    monkeypatch.setattr(HostIds, "sent_to", [])
    seen = []
    real = model.generate
    monkeypatch.setattr(model, "generate", lambda **kw: seen.append(type(kw["input_ids"])) or real(**kw))
    out = be.generate([[3, 4, 5], [6, 7]], 2, SamplingParams(max_new_tokens=4, temperature=1.0, seed=1))
    assert seen == [torch.Tensor]  # not the host's HostIds: sent on before generate
    assert HostIds.sent_to == [model.device, model.device]  # input_ids and attention_mask
    assert out.response_ids.shape == (4, 4)
