"""`harness train-rm`: train a Bradley–Terry reward model and write it as a Hugging Face folder.

check(opts)   every option and the pairs, before any model loads (PairsError / RMOptionError: exit 2)
train_rm(opts) -> report

pairs (file or run dir) -> split by prompt into train / held-out (--eval-fraction, --seed)
  -> render each side with reward_input_ids (the base tokenizer's chat template; pairs longer than
     --max-length dropped) -> for each step: a batch of --batch-size pairs (seeded epochs), one forward of
     chosen + rejected (right-padded), bt_loss (margin / center_rewards_coefficient as TRL 1.16),
     grad-norm clip, AdamW -> held-out accuracy, ECE and reliability table (calibration.py)
  -> OUT/: model.safetensors + config.json (num_labels 1) + tokenizer (with its chat template) + rm_report.json
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from harness import threads
from harness.atomic import atomic_folder
from harness.config import ConfigError
from harness.models.registry import model_positions
from harness.models.reward_template import reward_input_ids
from harness.rm.calibration import format_table, pair_metrics
from harness.rm.loss import bt_loss
from harness.rm.model import base_problem, base_tokenizer, build_reward_model, forward_scores, scores
from harness.rm.pairs import RMPair, pairs_from_run, read_pairs_file, split_pairs
from harness.tracking.mlflow_tracker import MlflowTracker

REPORT = "rm_report.json"
SCORE_RULE = (
    "logit of the last non-pad token of harness.models.reward_template.reward_input_ids(tokenizer, prompt, "
    "completion): the tokenizer's chat template on [user: prompt, assistant: completion]"
)


class RMOptionError(ConfigError):
    """A `harness train-rm` option out of range; the message names it, its value and what is allowed."""


@dataclass(frozen=True)
class Options:
    out: str
    pairs: str | None = None
    run: str | None = None
    base: str = "tiny-dense"
    steps: int | None = None  # None: epochs passes over the train pairs
    epochs: float = 1.0
    lr: float = 1e-4  # TRL RewardConfig's learning_rate
    batch_size: int = 8  # pairs a step
    eval_fraction: float = 0.1
    seed: int = 0
    center_rewards_coefficient: float | None = None
    max_length: int | None = None  # None: the base's positions
    max_grad_norm: float = 1.0
    calibration_bins: int = 10
    mlflow: str | None = None  # an MLflow experiment to log the training to
    device: str = "auto"  # auto: cuda when there is one, else cpu


@dataclass
class Data:
    """The checked pairs, split, with where they came from."""

    train: list[RMPair]
    held_out: list[RMPair]
    source: dict


def _check_options(o: Options) -> None:
    def bad(name: str, value, allowed: str) -> RMOptionError:
        return RMOptionError(f"train-rm: --{name}={value!r}; allowed: {allowed}")

    if (o.pairs is None) == (o.run is None):
        raise RMOptionError(f"train-rm: --pairs={o.pairs!r}, --run={o.run!r}; allowed: exactly one of them")
    if not (math.isfinite(o.lr) and o.lr > 0):
        raise bad("lr", o.lr, "a number > 0")
    if not (math.isfinite(o.epochs) and o.epochs > 0):
        raise bad("epochs", o.epochs, "a number > 0")
    if not (0 <= o.eval_fraction < 1):
        raise bad("eval-fraction", o.eval_fraction, "a number in [0, 1)")
    if o.center_rewards_coefficient is not None and not (
        math.isfinite(o.center_rewards_coefficient) and o.center_rewards_coefficient >= 0
    ):
        raise bad("center-rewards-coefficient", o.center_rewards_coefficient, "a number >= 0")
    if not (math.isfinite(o.max_grad_norm) and o.max_grad_norm > 0):
        raise bad("max-grad-norm", o.max_grad_norm, "a number > 0")
    problem = base_problem(o.base)
    if problem:
        raise RMOptionError(f"train-rm: {problem}")
    out = Path(o.out)
    if out.is_dir() and any(out.iterdir()) and not (out / REPORT).is_file():
        raise bad("out", o.out, f"a new or empty folder, or one `harness train-rm` wrote (with {REPORT}: replaced)")
    if o.device == "cuda" and not torch.cuda.is_available():
        raise bad("device", o.device, "auto or cpu (torch sees no CUDA device here)")
    positions = model_positions(o.base)
    if o.max_length is not None and positions is not None and o.max_length > positions:
        raise bad("max-length", o.max_length, f"at most the base's {positions} positions")


def check(o: Options) -> Data:
    """The options and the pairs, checked before any model loads; -> the split pairs."""
    _check_options(o)
    if o.pairs is not None:
        pairs = read_pairs_file(o.pairs)
        source = {"pairs": str(o.pairs), "rows": len(pairs)}
    else:
        pairs, counts = pairs_from_run(o.run)
        source = {"run": str(o.run), **counts}
    train, held_out = split_pairs(pairs, o.eval_fraction, o.seed)
    return Data(train, held_out, source)


@dataclass
class Encoded:
    chosen: list[list[int]]
    rejected: list[list[int]]
    margin: torch.Tensor | None  # (P,)

    def __len__(self) -> int:
        return len(self.chosen)


def encode(pairs: list[RMPair], tok, max_length: int | None) -> tuple[Encoded, int]:
    """-> (the pairs' token ids through the reward template, how many pairs were dropped as too long)."""
    kept = []
    for x in pairs:
        c, r = reward_input_ids(tok, x.prompt, x.chosen), reward_input_ids(tok, x.prompt, x.rejected)
        if max_length is None or max(len(c), len(r)) <= max_length:
            kept.append((c, r, x.margin))
    margin = torch.tensor([m for _, _, m in kept]) if kept and kept[0][2] is not None else None
    return Encoded([c for c, _, _ in kept], [r for _, r, _ in kept], margin), len(pairs) - len(kept)


def batch_order(n: int, batch_size: int, steps: int, seed: int) -> list[list[int]]:
    """The pair indices of each step: seeded permutations, one per pass, cut into batches (a pass's last
    batch may be smaller)."""
    gen = torch.Generator().manual_seed(seed)
    out, pending = [], []
    while len(out) < steps:
        if not pending:
            pending = torch.randperm(n, generator=gen).tolist()
        out.append(pending[:batch_size])
        pending = pending[batch_size:]
    return out


def train_steps(model, enc: Encoded, o: Options, pad_id: int, steps: int) -> list[dict]:
    """AdamW on the Bradley–Terry loss for `steps` batches; -> one metric record a step."""
    opt = torch.optim.AdamW(model.parameters(), lr=o.lr)
    records = []
    for step, idx in enumerate(batch_order(len(enc), o.batch_size, steps, o.seed)):
        threads.tick()  # fewer torch threads while another process holds a core (harness/threads.py)
        out = forward_scores(model, [enc.chosen[i] for i in idx] + [enc.rejected[i] for i in idx], pad_id)
        chosen, rejected = out.chunk(2)  # the first half is chosen (TRL's collator)
        margin = enc.margin[idx].to(chosen.device) if enc.margin is not None else None
        loss, metrics = bt_loss(chosen, rejected, margin, o.center_rewards_coefficient)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), o.max_grad_norm)
        opt.step()
        records.append(
            {"step": step, "train/loss": float(loss.detach()), "train/grad_norm": float(grad_norm)}
            | {f"train/{k}": v for k, v in metrics.items()}
        )
    return records


def evaluate(model, enc: Encoded, pad_id: int, o: Options) -> dict:
    """pair_metrics of the pairs under the model (eval mode, micro-batches of 2 * batch_size sequences)."""
    if not len(enc):
        return {"pairs": 0}
    model.eval()
    c = scores(model, enc.chosen, pad_id, 2 * o.batch_size)
    r = scores(model, enc.rejected, pad_id, 2 * o.batch_size)
    return pair_metrics(c, r, enc.margin, o.calibration_bins)


def resolve_device(device: str) -> torch.device:
    """auto: cuda when torch sees one, else cpu."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def _encode_all(o: Options, data: Data, tok) -> tuple[Encoded, Encoded, dict]:
    """Both splits encoded; RMOptionError (before the model loads) when no train pair fits --max-length."""
    limit = o.max_length or model_positions(o.base)
    train, dropped_train = encode(data.train, tok, limit)
    held, dropped_held = encode(data.held_out, tok, limit)
    if not len(train):
        raise RMOptionError(
            f"train-rm: --max-length={limit}: all {len(data.train)} train pairs are longer (in the base's tokens "
            "through its chat template); allowed: a larger --max-length (up to the base's positions) or shorter pairs"
        )
    counts = {"train": len(train), "held_out": len(held), "dropped_too_long": dropped_train + dropped_held}
    return train, held, counts


def _save(folder: Path, model, tok, report: dict) -> None:
    """OUT: the model (safetensors), its tokenizer and rm_report.json, written to a temp folder renamed into place."""
    with atomic_folder(folder) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        (tmp / REPORT).write_text(json.dumps(report, indent=2) + "\n")


def _log_mlflow(o: Options, records: list[dict], report: dict) -> str:
    """The steps, the final metrics and rm_report.json to MLflow experiment o.mlflow; -> the run id."""
    final = {"step": len(records)} | {
        f"{split}/{k}": v for split in ("eval", "final_train") for k, v in report[split].items() if k != "reliability"
    }
    tracker = MlflowTracker(Path(o.out), o.mlflow, asdict(o), {"command": "train-rm"}, run_name=Path(o.out).name)
    tracker.log_steps([*records, final])
    tracker.log_artifact(str(Path(o.out) / REPORT))
    tracker.finish()
    return tracker.run_id


def _print_report(o: Options, report: dict) -> None:
    ev, tr = report["eval"], report["final_train"]
    print(
        f"[harness] train-rm: {report['pairs']['train']} train / {report['pairs']['held_out']} held-out pairs, "
        f"{report['steps']} steps on {o.base} in {report['wall_seconds']:.1f} s; train accuracy "
        f"{tr.get('accuracy', float('nan')):.3f}",
        flush=True,
    )
    if ev.get("pairs"):
        print(
            f"[harness] held-out: accuracy {ev['accuracy']:.3f}, loss {ev['loss']:.4f}, margin {ev['margin']:+.3f}, "
            f"ECE {ev['ece']:.4f} over {ev['pairs']} pairs\n{format_table(ev['reliability'])}"
        )
    else:
        print("[harness] held-out: no pairs (--eval-fraction 0)")
    print(f"[harness] reward model -> {o.out} ({REPORT})")


def train_rm(o: Options, data: Data) -> dict:
    """Train a reward model on checked pairs (`check`), write it to o.out; -> the report (also OUT/rm_report.json)."""
    t0 = time.perf_counter()
    tok = base_tokenizer(o.base)
    train, held, counts = _encode_all(o, data, tok)
    steps = o.steps or math.ceil(o.epochs * len(train) / o.batch_size)
    model = build_reward_model(o.base, o.seed, tok.pad_token_id)
    model.to(resolve_device(o.device))
    records = train_steps(model, train, o, tok.pad_token_id, steps)
    report = {
        "base": o.base,
        "source": data.source,
        "options": asdict(o),
        "pairs": counts,
        "steps": steps,
        "score": SCORE_RULE,
        "eval": evaluate(model, held, tok.pad_token_id, o),
        "final_train": evaluate(model, train, tok.pad_token_id, o),
        "last_steps_loss": sum(r["train/loss"] for r in records[-10:]) / len(records[-10:]),
        "device": str(resolve_device(o.device)),
        "wall_seconds": time.perf_counter() - t0,
    }
    _save(Path(o.out), model, tok, report)
    _print_report(o, report)
    if o.mlflow:
        report["mlflow_run_id"] = _log_mlflow(o, records, report)
    return report
