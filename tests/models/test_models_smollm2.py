"""SmolLM2-135M-Instruct: GGUF -> plain safetensors folder, load, chat template, greedy answer.

The fast test uses the shared cache (results/models/smollm2-135m, or $HARNESS_MODEL_CACHE):
the first run converts the GGUF (~30 s), later runs load the folder (~1 s).
"""

import json
import os
import subprocess
import sys

import pytest
import torch

from harness.models import build_model, is_moe, render_prompt, smollm2_folder
from harness.models.smollm2 import gguf_path


def test_smollm2_folder_load_and_greedy_answer():
    folder = smollm2_folder()
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "llama" and "quantization_config" not in config
    assert (folder / "model.safetensors").exists() and (folder / "chat_template.jinja").exists()
    model, tok = build_model("smollm2-135m", seed=0)
    assert not is_moe(model) and model.config.num_hidden_layers == 30
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()  # tied
    ids = render_prompt(tok, "What is 2 + 2?")
    text = tok.decode(ids)
    assert text.startswith("<|im_start|>system\n")
    assert text.endswith("<|im_start|>user\nWhat is 2 + 2?<|im_end|>\n<|im_start|>assistant\n")
    x = torch.tensor([ids])  # (1, T)
    with torch.no_grad():
        out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=16, do_sample=False)
    answer = tok.decode(out[0, x.shape[1] :], skip_special_tokens=True)
    assert "4" in answer, answer


@pytest.mark.slow
def test_fresh_conversion_races_and_keeps_chat_template(tmp_path):
    """Two processes converting into an empty cache at once both get the same, complete folder."""
    code = "from harness.models import smollm2_folder; print(smollm2_folder())"
    env = {**os.environ, "HARNESS_MODEL_CACHE": str(tmp_path), "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True) for _ in range(2)
    ]
    outs = [p.communicate(timeout=1800)[0].strip().splitlines()[-1] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert outs[0] == outs[1] == str(tmp_path / "smollm2-135m")
    assert [p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")] == ["smollm2-135m"]

    from transformers import AutoTokenizer

    plain = AutoTokenizer.from_pretrained(outs[0])
    gguf = AutoTokenizer.from_pretrained(gguf_path().parent, gguf_file=gguf_path().name)
    assert plain.chat_template == gguf.chat_template
    msgs = [{"role": "user", "content": "Compute 35*4.  Spaces  and\nnewlines."}]
    assert render_prompt(plain, msgs[0]["content"]) == list(
        gguf.apply_chat_template(msgs, add_generation_prompt=True, return_dict=False)
    )
