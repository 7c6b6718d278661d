"""The one-update probe: the mechanism of a comparison, isolated from training noise.

A training curve compares arms after many steps, each on its own trajectory; the effect of
one objective on one update is buried under the sampling noise of every step. The probe
takes ONE policy (the study's warm start) and, for each of `batches` training batches it
samples from that policy:

    batch b (N prompts x G samples, from pi_0)             shared by every arm
    for each arm a:  pi_0 --(one update: the arm's advantages, aggregation, clip;
                            train.mini_batches Adam steps, a fresh optimizer)--> pi_{a,b}
                     probe(pi_{a,b}) on held-out prompts, with the SAME sampling seed
                     stats(a, b): what the arm's objective makes of the batch (mechanism)
    probe(pi_0) once, with the same prompts and seed

So every arm sees the same policy, batch and random numbers (common random numbers): the
paired difference probe(pi_{a,b}) - probe(pi_{a',b}) carries only the arms' objectives,
and its mean over batches has a t-interval (batches are independent draws).

Shapes: N prompts, G group size, B = N*G rows, T response length.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from harness.config import RunConfig
from harness.experiment.stats import t_interval as mean_half
from harness.objective import inputs_needed
from harness.rollout import make_backend
from harness.train.core.collect import collect, eval_problems, step_seed
from harness.train.core.components import Trained, build_components
from harness.train.core.scoring import frozen_reference, frozen_teacher, score_episode
from harness.train.core.step_context import StepContext
from harness.train.eval.evaluate import evaluate
from harness.train.rl.update import policy_update
from harness.train.run.task_setup import build_task, prepare_task
from harness.train.run.warmstart import initial_policy

PROBE_SEED_SALT = 31_337  # step_seed salt of a probe batch's update (mini-batch order)
PROBE_FIRST_STEP = 10_000  # probe batch b draws the prompts and samples of step 10_000 + b: never a training run's


@dataclass
class Arm:
    label: str
    cfg: RunConfig


@dataclass
class ProbeResult:
    base: dict[str, float]  # probe(pi_0)
    per_batch: list[dict[str, dict[str, float]]] = field(default_factory=list)  # [b][arm] -> metrics
    batch: list[dict[str, float]] = field(default_factory=list)  # [b] -> batch_stats (arm-independent)


def t_interval(vals: list[float]) -> tuple[float, float]:
    """harness.experiment.stats.t_interval over the finite values, with NaN where it cannot say anything:
    no value (mean NaN) or one (half-width NaN: no interval, so no claim)."""
    vals = [v for v in vals if v is not None and math.isfinite(v)]
    if not vals:
        return float("nan"), float("nan")
    m, h = mean_half(vals)
    return (m, h) if len(vals) > 1 else (m, float("nan"))


def one_update(policy, cfg: RunConfig, ep, pad_id: int, seed: int):
    """pi_0 -> a copy updated once on `ep` under cfg's objective, scored and updated as the RL trainer does
    (harness/train/core/scoring.py, rl/update.py): its loss mask, pi_old, pi_ref (a frozen pi_0 when the
    objective needs one), fresh components (a value model, ...) and single-pass rule; train.mini_batches
    Adam steps of a fresh AdamW at train.lr. Returns (updated copy, the scored batch, update metrics)."""
    tr = cfg.train
    model = copy.deepcopy(policy)
    opt = torch.optim.AdamW(model.parameters(), lr=tr.lr, betas=tr.betas, weight_decay=tr.weight_decay)
    device = next(model.parameters()).device
    components = build_components(cfg, model, list(inputs_needed(cfg.objective).components), device)
    sc = StepContext.build(
        cfg,
        Trained("policy", model, opt),
        components,
        frozen_reference(cfg, policy),
        device,
        pad_id,
        teacher=frozen_teacher(cfg, device),
    )
    batch, _ = score_episode(sc, ep)
    metrics = policy_update(sc, batch, torch.Generator().manual_seed(seed))
    model.eval()
    return model, batch, metrics


def with_section(cfg: RunConfig, section: str, **values) -> RunConfig:
    """A validated copy of cfg with keys of one section replaced."""
    d = cfg.to_dict()
    d[section].update(values)
    return RunConfig.model_validate(d)


def probe_config(cfg: RunConfig, prompts: int, samples: int) -> RunConfig:
    """cfg with the eval section set to the probe's prompts x samples (ks: 1 and samples)."""
    return with_section(cfg, "eval", num_prompts=prompts, n_samples=samples, ks=sorted({1, samples}))


def setup_policy(cfg: RunConfig):
    """Threads and seed from cfg; -> (task, initial policy (eval mode), tokenizer, render, pad id, backend)."""
    if cfg.train.threads:
        torch.set_num_threads(cfg.train.threads)
    torch.manual_seed(cfg.seed)
    task = build_task(cfg)
    policy, tok, render = initial_policy(cfg, torch.device("cpu"))
    policy.eval()
    prepare_task(cfg, task, tok, render, lambda: make_backend(cfg.rollout, policy, tok))
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    return task, policy, tok, render, pad_id, make_backend(cfg.rollout, policy, tok)


def run_one_update_probe(
    arms: list[Arm],
    batches: int,
    probe_prompts: int,
    probe_samples: int,
    stats: Callable | None = None,
    batch_stats: Callable | None = None,
    prompts_per_batch: int | None = None,
    log: Callable[[str], None] = print,
) -> ProbeResult:
    """See the module docstring. arms share everything but the objective (the first arm's
    model, task, rollout and train settings are used for sampling). stats(arm, ep, batch, cfg,
    policy, pad_id) -> dict: mechanism numbers of that arm at pi_0 on the batch as its objective
    scored it (core/scoring.py: batch.adv, batch.mask, ...); batch_stats(ep,
    cfg, policy, pad_id) -> dict: numbers of the batch itself (the same for every arm).
    Probe metrics are those of harness.train.eval.evaluate.evaluate (pass@k overall and per
    difficulty, length of correct / incorrect answers, truncation)."""
    t0 = time.perf_counter()
    if prompts_per_batch:
        arms = [Arm(a.label, with_section(a.cfg, "train", prompts_per_step=prompts_per_batch)) for a in arms]
    ref = arms[0].cfg
    task, policy, tok, render, pad_id, base_backend = setup_policy(ref)
    pcfg = probe_config(ref, probe_prompts, probe_samples)
    problems = eval_problems(task, pcfg)

    def pcfg_of(cfg: RunConfig) -> RunConfig:
        return probe_config(cfg, probe_prompts, probe_samples)

    base = evaluate(task, base_backend, render, problems, pcfg, 0)
    log(
        f"[probe] pi_0 on {probe_prompts} held-out prompts x {probe_samples}: pass@1 {base['eval/pass_at_1']:.3f}, "
        f"length correct {base['eval/length/correct']:.2f} / incorrect {base['eval/length/incorrect']:.2f}"
    )
    res = ProbeResult(base=base)
    for b in range(batches):
        step = PROBE_FIRST_STEP + b
        ep, _ = collect(task, base_backend, render, ref, step)
        row: dict[str, dict[str, float]] = {}
        res.batch.append(batch_stats(ep, ref, policy, pad_id) if batch_stats is not None else {})
        update_seed = step_seed(ref.seed, step, PROBE_SEED_SALT)  # the same for every arm
        for arm in arms:
            row[arm.label] = _arm_on_batch(
                arm, policy, ep, task, tok, render, problems, pad_id, update_seed, stats, pcfg_of
            )
        res.per_batch.append(row)
        log(
            f"[probe] batch {b + 1}/{batches}: "
            + "  ".join(
                f"{a}: len_incorrect {row[a]['eval/length/incorrect']:.2f} pass@1 {row[a]['eval/pass_at_1']:.3f}"
                for a in row
            )
            + f"  ({time.perf_counter() - t0:.0f} s)"
        )
    return res


def _arm_on_batch(
    arm: Arm, policy, ep, task, tok, render, problems, pad_id: int, seed: int, stats: Callable | None, pcfg_of: Callable
) -> dict[str, float]:
    """One arm on one batch: pi_0 updated once under the arm's objective, evaluated on the held-out
    prompts with the probe's sampling seed; its update metrics and (stats) mechanism numbers."""
    model, batch, upd = one_update(policy, arm.cfg, ep, pad_id, seed)
    m = dict(evaluate(task, make_backend(arm.cfg.rollout, model, tok), render, problems, pcfg_of(arm.cfg), 0))
    m.update({k: v for k, v in upd.items() if isinstance(v, (int, float))})
    if stats is not None:
        m.update(stats(arm, ep, batch, arm.cfg, policy, pad_id))
    del model
    return m


def paired(res: ProbeResult, key: str, a: str, b: str | None) -> dict:
    """Mean over batches of key(arm a) - key(arm b) (b None: minus pi_0), with its 95% t-interval."""
    vals = []
    for row in res.per_batch:
        va = row[a].get(key)
        vb = res.base.get(key) if b is None else row[b].get(key)
        if va is not None and vb is not None and math.isfinite(va) and math.isfinite(vb):
            vals.append(va - vb)
    m, h = t_interval(vals)
    return {
        "key": key,
        "a": a,
        "b": b or "pi_0",
        "mean": m,
        "half": h,
        "n": len(vals),
        "lo": m - h,
        "hi": m + h,
        "excludes_zero": bool(len(vals) > 1 and (m - h > 0 or m + h < 0)),
    }


def arm_mean(res: ProbeResult, key: str, a: str | None) -> dict:
    """Mean over batches of key for arm a (None: of the batch stats), with its 95% t-interval."""
    rows = res.batch if a is None else [row[a] for row in res.per_batch]
    m, h = t_interval([r.get(key) for r in rows if r.get(key) is not None])
    return {"key": key, "a": a or "batch", "mean": m, "half": h}
