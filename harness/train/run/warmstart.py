"""SFT warm start: teach a freshly built tiny model the task's answer format.

A random tiny model never answers correctly, so RL has no signal. A short SFT on the
task's demonstrations brings it to a non-trivial, non-saturated accuracy; the checkpoint
is cached under warm_start.cache_dir, keyed by model + task + SFT settings (not by the run
seed or the difficulty mix), so every run and grid cell that shares them reuses it.
The SFT itself always uses seed 0 and the task's default difficulty mix.

The key also holds what else changes the weights (harness/machine.py): a digest of the code
that builds them (the model, tokenizer, task and SFT modules; comments and formatting do not
count) and the machine's kernel path (CPU capability, BLAS and oneDNN builds, torch version).
1000 SFT steps amplify the last bit of a matmul, so a warm start built by other code or on a
CPU with other kernels (AVX512 vs AVX2) is another warm start: it is rebuilt, never reused,
and the run says why (`stale_warm_starts`).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import random
import time
from pathlib import Path

import torch

from harness import machine, progress, threads
from harness.models import build_model, load_model, render_problem, save_model
from harness.models.hub import section_model
from harness.rollout.base import SamplingParams
from harness.rollout.hf import HFBackend
from harness.tasks import task_code, task_from_config, task_identity
from harness.train.core.agent import tool_prompts

SFT_VERSION = 1  # bump when the SFT recipe changes in a way the code digest cannot see
# The modules whose code builds a warm start (the task's own modules are added from its class).
SFT_MODULES = (
    "harness.train.run.warmstart",
    "harness.models.registry",
    "harness.models.tiny",
    "harness.models.tokenizer",
    "harness.rollout.hf",
    "harness.rollout.hf_rows",
    "harness.rollout.samplers",
    "harness.rollout.row_seeds",
    "harness.rollout.base",
)


def warm_start_key(cfg) -> dict:
    """Everything that changes the warm start's weights: the SFT recipe and settings, the code, the kernels."""
    code = machine.code_digest([*SFT_MODULES, *task_code(cfg.task.name)])
    return {
        "version": SFT_VERSION,
        "model": cfg.model.name,
        **_hub_commit(cfg.model),  # a Hub id: the commit its weights are ({} otherwise)
        "overrides": cfg.model.overrides,
        "task": cfg.task.name,
        "task_options": cfg.task.options,
        "steps": cfg.warm_start.steps,
        "batch_size": cfg.warm_start.batch_size,
        "lr": cfg.warm_start.lr,
        "threads": cfg.warm_start.threads,  # the SFT's fixed thread count: another count, other weights
        **task_identity(cfg.task),  # a dataset task: its data, rewards and files' sha256 ({} otherwise)
        **({"pretrained_sft": True} if cfg.warm_start.pretrained else {}),  # a pretrained model, SFT asked for
        **({"tools": list(cfg.task.tools)} if cfg.task.tools else {}),  # its prompts open with the tools' description
        "code": code,
        "kernels": machine.kernel_path(),
    }


def warm_start_folder(cfg) -> Path:
    key = warm_start_key(cfg)
    digest = hashlib.sha1(json.dumps(key, sort_keys=True).encode()).hexdigest()[:10]
    return Path(cfg.warm_start.cache_dir) / f"{_model_label(cfg)}-{cfg.task.name}-{digest}"


def _hub_commit(model) -> dict:
    """{"model_commit": the commit of model.name's Hub snapshot}, {} for a built-in name or a folder."""
    name = section_model(model)
    return {"model_commit": Path(name).name} if name != model.name else {}


def _model_label(cfg) -> str:
    """The model's name in a cache folder's name: a registered name, or a local folder's last part."""
    return Path(cfg.model.name).name or "model"


def stale_warm_starts(cfg) -> list[tuple[Path, list[str]]]:
    """Cached warm starts of the same model, task and SFT settings that another code or another
    kernel path built, with what differs: (folder, ["code", "kernels: cpu_capability AVX512 -> AVX2"])."""
    key, out = warm_start_key(cfg), []
    same = ("version", "model", "overrides", "task", "task_options", "steps", "batch_size", "lr")
    for report in Path(cfg.warm_start.cache_dir).glob(f"{_model_label(cfg)}-{cfg.task.name}-*/warmstart.json"):
        try:
            old = json.loads(report.read_text()).get("key", {})
        except (OSError, ValueError):
            continue
        if report.parent == warm_start_folder(cfg) or any(old.get(k) != key[k] for k in same):
            continue
        why = ["code"] if old.get("code") != key["code"] else []
        kernels = old.get("kernels") or {}
        why += [f"kernels: {k} {kernels.get(k, '?')} -> {v}" for k, v in key["kernels"].items() if kernels.get(k) != v]
        out.append((report.parent, why or ["an older cache format"]))
    return out


def ensure_warm_start(cfg) -> Path:
    """Folder of the cached SFT checkpoint, training it first if missing (process-safe)."""
    folder = warm_start_folder(cfg)
    if (folder / "warmstart.json").exists():
        return folder
    for old, why in stale_warm_starts(cfg):
        print(f"[warm start] not reusing {old}: built with other {'; '.join(why)}", flush=True)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(str(folder) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "warmstart.json").exists():
            sft(cfg, folder)
        fcntl.flock(lock, fcntl.LOCK_UN)
    return folder


def _batch(tok, task, problems, rng):
    """Right-padded (ids, labels) with labels = -100 on the prompt and padding."""
    seqs = []
    for p in problems:
        prompt = render_problem(tok, p)
        target = tok(task.demonstration(p, rng), add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        seqs.append((prompt, target))
    L = max(len(a) + len(b) for a, b in seqs)
    ids = torch.full((len(seqs), L), tok.pad_token_id, dtype=torch.long)
    labels = torch.full((len(seqs), L), -100, dtype=torch.long)
    att = torch.zeros((len(seqs), L), dtype=torch.long)
    for i, (a, b) in enumerate(seqs):
        ids[i, : len(a) + len(b)] = torch.tensor(a + b)
        labels[i, len(a) : len(a) + len(b)] = torch.tensor(b)
        att[i, : len(a) + len(b)] = 1
    return ids, att, labels


def sft(cfg, folder: Path) -> None:
    ws = cfg.warm_start
    torch.manual_seed(0)
    model, tok = build_model(section_model(cfg.model), seed=0, overrides=cfg.model.overrides)
    task = tool_prompts(task_from_config(cfg.task, mix=False), cfg, tok)  # task.tools: the rollouts' prompts
    opt = torch.optim.AdamW(model.parameters(), lr=ws.lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 20) * max(0.05, 1 - s / max(ws.steps, 1))
    )
    rng = random.Random(0)
    model.train()
    t0 = time.perf_counter()
    with threads.fixed(ws.threads):  # warm_start.threads, whatever the load: the same weights at every build
        losses = _sft_steps(model, tok, task, opt, sched, rng, ws.steps, ws.batch_size)
        seconds = time.perf_counter() - t0
        model.eval()
        accuracy = _accuracy(model, tok, task, cfg)
    report = {
        "key": warm_start_key(cfg),
        "machine": machine.describe(),
        "commit": machine.git_commit(),
        "final_loss": sum(losses[-10:]) / max(1, len(losses[-10:])),
        "seconds": seconds,
        **accuracy,
    }
    save_model(model, tok, folder)
    (folder / "warmstart.json").write_text(json.dumps(report, indent=2))
    print(f"[warm start] saved {folder}: {json.dumps({k: v for k, v in report.items() if k != 'key'})}", flush=True)


def _sft_steps(model, tok, task, opt, sched, rng, steps: int, batch_size: int) -> list[float]:
    """The SFT loop: `steps` optimizer steps on batches of demonstrations; returns each step's loss."""
    losses = []
    with progress.bar("warm start", total=steps, unit="step") as bar:
        for step in range(steps):
            losses.append(_sft_step(model, tok, task, opt, sched, rng, step, batch_size))
            bar.update()
            if step % 50 == 0 or step == steps - 1:
                print(f"[warm start] step {step:4d} loss {losses[-1]:.4f}", flush=True)
    return losses


def _sft_step(model, tok, task, opt, sched, rng, step: int, batch_size: int) -> float:
    """One optimizer step of the SFT on a batch of demonstrations; its loss."""
    ids, att, labels = _batch(tok, task, task.problems(batch_size, seed=10_000 + step, split="train"), rng)
    loss = model(input_ids=ids, attention_mask=att, labels=labels, use_cache=False).loss
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()
    return loss.item()


def _accuracy(model, tok, task, cfg, n_prompts: int = 128, n_samples: int = 4) -> dict:
    """Sampled (temperature 1) accuracy on the eval split, overall and per difficulty."""
    problems = task.problems(n_prompts, seed=4242, split="eval")
    backend = HFBackend(model, tok)
    with progress.bar("warm start eval", total=n_prompts * n_samples, unit="sample", fed=True):
        out = backend.generate(
            [render_problem(tok, p) for p in problems],
            n_samples,
            SamplingParams(max_new_tokens=cfg.rollout.max_new_tokens, temperature=1.0, seed=0),
        )
    rows = [p for p in problems for _ in range(n_samples)]
    correct = [s.correct for s in task.score_batch(rows, out.texts, out.truncated.tolist())]
    per: dict[str, list[bool]] = {}
    for p, c in zip(rows, correct):
        per.setdefault(p.difficulty, []).append(c)
    return {
        "accuracy": sum(correct) / len(correct),
        "accuracy_by_difficulty": {k: sum(v) / len(v) for k, v in sorted(per.items())},
        "truncated_frac": float(out.truncated.float().mean()),
        "mean_length": float(out.lengths.mean()),
    }


# ----------------------------------------------------------------------------- the policy a run starts from
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def initial_policy(cfg, device: torch.device):
    """-> (model on device, tokenizer, render: Problem -> prompt token ids)."""
    dtype = DTYPES[cfg.model.dtype]
    if cfg.uses_warm_start():  # a fresh tiny model, or a pretrained one with warm_start.pretrained
        model, tok = load_model(ensure_warm_start(cfg), dtype=dtype)
    else:
        model, tok = build_model(section_model(cfg.model), seed=cfg.seed, overrides=cfg.model.overrides, dtype=dtype)
    if cfg.model.attn_implementation not in (None, "auto"):  # model.attn_implementation (auto: sdpa on CUDA)
        model.set_attn_implementation(cfg.model.attn_implementation)
    model.to(device)
    return model, tok, make_render(tok, cfg.model.prompt_suffix, system_prompt(cfg))


def system_prompt(cfg) -> str | None:
    """A dataset task's task.data.system_prompt (None otherwise)."""
    data = getattr(cfg.task, "data", None)
    return data.system_prompt if cfg.task.name == "dataset" and data is not None else None


def make_render(tok, suffix: str = "", system: str | None = None):
    """Problem -> prompt token ids (the model's template around the problem's prompt + suffix, with a
    dataset problem's system prompt and chat messages: render_problem), memoised. `system`: the system
    prompt of anything without its own meta (a DPO pair's prompt)."""
    cache: dict[str, list[int]] = {}

    def render(problem) -> list[int]:
        meta = getattr(problem, "meta", None)
        if meta is None and system is not None:
            meta = {"system": system}
            problem = _WithMeta(problem.prompt, meta)
        meta = meta or {}
        key = (
            problem.prompt
            if not (meta.get("messages") or meta.get("system"))
            else json.dumps([problem.prompt, meta.get("messages"), meta.get("system")])
        )
        if key not in cache:
            cache[key] = render_problem(tok, problem, suffix)
        return cache[key]

    return render


class _WithMeta:
    def __init__(self, prompt: str, meta: dict):
        self.prompt, self.meta = prompt, meta
