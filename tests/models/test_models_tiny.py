"""Tiny dense / MoE models: seeded build, save/load, generation with pad/eos, sizes."""

import pytest
import torch

from harness.models import build_model, is_moe, load_model, param_count, render_prompt, save_model

NAMES = ("tiny-dense", "tiny-moe")


@pytest.mark.parametrize("name", NAMES)
def test_seeded_build_is_deterministic_and_leaves_global_rng(name):
    torch.manual_seed(123)
    state = torch.get_rng_state()
    a, _ = build_model(name, seed=7)
    assert torch.equal(torch.get_rng_state(), state)
    b, _ = build_model(name, seed=7)
    c, _ = build_model(name, seed=8)
    for (k, pa), pb, _pc in zip(a.state_dict().items(), b.state_dict().values(), c.state_dict().values()):
        assert torch.equal(pa, pb), k
    assert not torch.equal(a.model.embed_tokens.weight, c.model.embed_tokens.weight)


def test_sizes_and_moe_flag():
    dense, tok = build_model("tiny-dense", seed=0)
    moe, _ = build_model("tiny-moe", seed=0)
    assert dense.config.vocab_size == len(tok) == 100
    assert 0.5e6 < param_count(dense) < 1.5e6 and 0.5e6 < param_count(moe) < 2.5e6
    assert not is_moe(dense) and is_moe(moe)
    small, _ = build_model("tiny-dense", seed=0, overrides={"num_hidden_layers": 1, "hidden_size": 64})
    assert small.config.num_hidden_layers == 1 and param_count(small) < param_count(dense)


@pytest.mark.parametrize("name", NAMES)
def test_save_load_gives_identical_logits(name, tmp_path):
    model, tok = build_model(name, seed=3)
    folder = save_model(model, tok, tmp_path / "ckpt")
    assert (folder / "model.safetensors").exists() and (folder / "tokenizer.json").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # temp folders cleaned up
    x = torch.tensor([render_prompt(tok, "12+30=?\nAnswer:")])  # (1, T)
    assert (folder / "model.safetensors").stat().st_mode & 0o044  # readable by others (shared caches)
    for loaded, ltok in (load_model(folder), build_model(str(folder), seed=0)):
        assert ltok.encode("a b\n") == tok.encode("a b\n")
        gen = loaded.generation_config
        assert (gen.pad_token_id, gen.bos_token_id, gen.eos_token_id) == (0, 1, 2)
        with torch.no_grad():
            torch.testing.assert_close(loaded(x).logits, model(x).logits, rtol=0, atol=0)
    save_model(model, tok, folder)  # overwriting an existing checkpoint works
    assert (folder / "config.json").exists()


@pytest.mark.parametrize("name", NAMES)
def test_generate_pads_left_and_stops_at_eos(name):
    """Overfit two demonstrations, then greedy generate reproduces them and stops at eos."""
    model, tok = build_model(name, seed=0)
    demos = {"2+3=?\nAnswer:": " 5", "10+2=?\nAnswer:": " 12"}
    prompts = [render_prompt(tok, p) for p in demos]
    seqs = [p + tok.encode(c) + [tok.eos_token_id] for p, c in zip(prompts, demos.values())]
    T = max(map(len, seqs))
    ids = torch.tensor([s + [tok.pad_token_id] * (T - len(s)) for s in seqs])  # (B, T) right-padded
    labels = torch.tensor([[-100] * len(p) + s[len(p) :] + [-100] * (T - len(s)) for p, s in zip(prompts, seqs)])
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(50):
        loss = model(ids, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    enc = tok([tok.decode(p) for p in prompts], return_tensors="pt", padding=True)  # left-padded (B, T)
    assert enc["input_ids"][0, 0] == tok.pad_token_id
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=10, do_sample=False)
    new = out[:, enc["input_ids"].shape[1] :]  # (B, <=10)
    assert new[0].tolist() == tok.encode(" 5") + [tok.eos_token_id, tok.pad_token_id]  # padded after eos
    assert new[1].tolist() == tok.encode(" 12") + [tok.eos_token_id]  # stopped at eos, not at 10 tokens
    assert tok.batch_decode(new, skip_special_tokens=True) == [" 5", " 12"]
