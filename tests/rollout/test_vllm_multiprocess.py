"""The out-of-process engine (VLLM_ENABLE_V1_MULTIPROCESSING=1): weights travel as a
safetensors folder. Slow (vLLM starts two more processes, each importing vLLM), and it
needs a fresh interpreter because vLLM caches its env reads once an engine has started."""

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("vllm")

SCRIPT = textwrap.dedent("""
    import types
    import torch
    from harness.models import build_model, render_prompt
    from harness.rollout.base import SamplingParams
    from harness.rollout.vllm_backend import VLLMBackend, WeightSyncError

    if __name__ == "__main__":
        model, tok = build_model("tiny-moe", seed=0)
        cfg = types.SimpleNamespace(dtype="float32", gpu_memory_utilization=0.3, router_noise=0.0)
        be = VLLMBackend(model, tok, cfg)
        try:
            assert not be.in_process
            r = be.generate([render_prompt(tok, "What is 1+2?\\nAnswer:")], 4, SamplingParams(max_new_tokens=8))
            assert r.response_ids.shape[0] == 4
            assert be.verify_sync(model) < 1e-4
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(0.02 * torch.randn_like(p))
            try:
                be.verify_sync(model)
                raise SystemExit("probe did not detect the unsynced change")
            except WeightSyncError:
                pass
            be.sync_weights(model)
            assert be.last_probe_delta < 1e-4, be.last_probe_delta
            print("OK", be.last_probe_delta, be.last_sync_seconds)
        finally:
            be.close()
""")


@pytest.mark.slow
def test_out_of_process_engine_sync(tmp_path):
    script = tmp_path / "mp_sync.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "1"}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, str(script)], cwd=root, env=env, capture_output=True, text=True, timeout=1500)
    assert out.returncode == 0 and "OK" in out.stdout, out.stdout[-2000:] + out.stderr[-4000:]
