"""`harness train-rm`: its options (docs/reward_models.md). A bad value is refused by argparse (a type) or
by train.check, before any model loads: one line naming the option or file, row, value and what is allowed."""

from __future__ import annotations

import argparse

from harness.argtypes import out_dir, positive_int
from harness.rm.train import Options, check, train_rm


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def add_command(sub) -> None:
    p = sub.add_parser(
        "train-rm",
        help="train a Bradley–Terry reward model (a sequence classifier, num_labels 1) from preference pairs "
        "or a run's scored samples; held-out accuracy and calibration -> OUT/rm_report.json",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--pairs", help="pairs file (.jsonl/.json/.parquet/.csv): prompt, chosen, rejected [, margin]")
    src.add_argument("--run", help="a run directory: verified-correct vs incorrect logged samples of one prompt")
    p.add_argument("--out", required=True, type=out_dir, help="folder to write the reward model into (replaced)")
    p.add_argument("--base", default="tiny-dense", help="tiny-dense, tiny-moe, smollm2-135m, ... or a local folder")
    length = p.add_mutually_exclusive_group()
    length.add_argument("--steps", type=positive_int, default=None, help="optimizer steps (default: from --epochs)")
    length.add_argument("--epochs", type=_number, default=1.0, help="passes over the train pairs (default 1)")
    p.add_argument("--lr", type=_number, default=1e-4, help="AdamW learning rate (default 1e-4, as TRL)")
    p.add_argument("--batch-size", type=positive_int, default=8, help="pairs a step (default 8)")
    p.add_argument("--eval-fraction", type=_number, default=0.1, help="prompts held out, in [0, 1) (default 0.1)")
    p.add_argument("--seed", type=int, default=0, help="head init, split and batch order (default 0)")
    p.add_argument(
        "--center-rewards-coefficient",
        type=_number,
        default=None,
        help="adds coef * mean((r_c + r_r)^2): rewards centred on 0 (TRL's knob; default off)",
    )
    p.add_argument("--max-length", type=positive_int, default=None, help="longer pairs dropped (default: positions)")
    p.add_argument("--max-grad-norm", type=_number, default=1.0, help="gradient-norm clip (default 1.0)")
    p.add_argument("--calibration-bins", type=positive_int, default=10, help="bins of the reliability table")
    p.add_argument("--mlflow", default=None, metavar="EXPERIMENT", help="also log the training to this experiment")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"), help="auto: cuda if any (default)")


def run(args: argparse.Namespace) -> int:
    opts = Options(
        out=args.out,
        pairs=args.pairs,
        run=args.run,
        base=args.base,
        steps=args.steps,
        epochs=args.epochs,
        lr=args.lr,
        batch_size=args.batch_size,
        eval_fraction=args.eval_fraction,
        seed=args.seed,
        center_rewards_coefficient=args.center_rewards_coefficient,
        max_length=args.max_length,
        max_grad_norm=args.max_grad_norm,
        calibration_bins=args.calibration_bins,
        mlflow=args.mlflow,
        device=args.device,
    )
    train_rm(opts, check(opts))  # check: every option and pair before any model loads (exit 2)
    return 0
