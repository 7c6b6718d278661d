"""`harness train-rm` end to end on a 1-layer tiny model: it learns a separable pairs file, and the folder it
writes is a 1-label sequence classifier whose scores are those of the reward template (harness/models/
reward_template.py); from a run directory too."""

import json
from pathlib import Path

import pytest
import torch

from harness.cli import main
from harness.models.reward_template import reward_input_ids
from harness.rm.model import scores
from tests.rm.conftest import marker_pairs


def _train(small_base, pairs_args, out, *extra):
    argv = ["train-rm", *pairs_args, "--base", small_base, "--out", str(out), "--lr", "3e-3", "--steps", "12"]
    assert main([*argv, "--eval-fraction", "0.25", *extra]) == 0
    return json.loads((Path(out) / "rm_report.json").read_text())


def test_a_separable_pairs_file_is_learned(small_base, marker_file, tmp_path, capsys):
    report = _train(small_base, ["--pairs", str(marker_file)], tmp_path / "rm")
    assert report["pairs"] == {"train": 36, "held_out": 12, "dropped_too_long": 0}
    assert report["eval"]["accuracy"] >= 0.9  # chance is 0.5
    assert report["eval"]["ece"] < 0.2 and report["eval"]["reliability"]
    assert report["steps"] == 12 and report["source"] == {"pairs": str(marker_file), "rows": 48}
    out = capsys.readouterr().out
    assert "held-out: accuracy" in out and "ECE" in out and "confidence bin" in out
    assert report["device"] == "cpu" or torch.cuda.is_available()
    again = _train(small_base, ["--pairs", str(marker_file)], tmp_path / "rm", "--seed", "1")  # replaces its own folder
    assert again["options"]["seed"] == 1


def test_the_folder_loads_and_scores_by_the_template(small_base, marker_file, tmp_path):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    report = _train(small_base, ["--pairs", str(marker_file)], tmp_path / "rm")
    model = AutoModelForSequenceClassification.from_pretrained(tmp_path / "rm", local_files_only=True).eval()
    tok = AutoTokenizer.from_pretrained(tmp_path / "rm", local_files_only=True)
    assert model.config.num_labels == 1 and tok.chat_template
    assert model.config.pad_token_id == tok.pad_token_id
    rows = marker_pairs(48)[:6]
    seqs = [reward_input_ids(tok, r["prompt"], r[side]) for r in rows for side in ("chosen", "rejected")]
    # the character template: <bos> prompt completion <eos>
    assert tok.decode(seqs[0]) == f"<bos>{rows[0]['prompt']}{rows[0]['chosen']}<eos>"
    with torch.no_grad():
        one_by_one = torch.stack([model(torch.tensor([s])).logits[0, 0] for s in seqs])
    batched = scores(model, seqs, tok.pad_token_id, batch_size=5)  # right-padded micro-batches
    assert torch.allclose(batched, one_by_one, atol=1e-5)
    chosen, rejected = one_by_one[0::2], one_by_one[1::2]
    assert bool((chosen > rejected).all())  # the learned preference, read back from the folder
    assert report["score"].startswith("logit of the last non-pad token")


def test_the_held_out_split_is_seeded(small_base, marker_file, tmp_path):
    a = _train(small_base, ["--pairs", str(marker_file)], tmp_path / "a", "--seed", "5")
    b = _train(small_base, ["--pairs", str(marker_file)], tmp_path / "b", "--seed", "5")
    assert a["eval"] == b["eval"]


def test_a_run_directory_trains_a_reward_model(small_base, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    recs = []
    for step, r in enumerate(marker_pairs(20)):
        for text, correct in ((r["chosen"], True), (r["rejected"], False)):
            recs.append(
                {
                    "step": step,
                    "prompt": r["prompt"],
                    "difficulty": "easy",
                    "completion": text,
                    "reward": 1.0 * correct,
                    "correct": correct,
                }
            )
    (run / "samples.jsonl").write_text("".join(json.dumps(x) + "\n" for x in recs))
    report = _train(small_base, ["--run", str(run)], tmp_path / "rm")
    assert report["source"] == {"run": str(run), "samples": 40, "prompts": 20, "prompts_with_pairs": 20, "pairs": 20}
    assert report["pairs"]["train"] + report["pairs"]["held_out"] == 20


def test_center_rewards_coefficient_and_margin_reach_the_loss(small_base, tmp_path, monkeypatch):
    from harness.rm import train as rm_train

    seen = []

    def spy(chosen, rejected, margin=None, center_rewards_coefficient=None):
        seen.append((None if margin is None else margin.tolist(), center_rewards_coefficient))
        return rm_train.bt_loss.__wrapped__(chosen, rejected, margin, center_rewards_coefficient)

    spy.__wrapped__ = rm_train.bt_loss
    monkeypatch.setattr(rm_train, "bt_loss", spy)
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps(r | {"margin": 0.25}) + "\n" for r in marker_pairs(8)))
    argv = ["train-rm", "--pairs", str(path), "--base", small_base, "--out", str(tmp_path / "rm"), "--steps", "2"]
    assert main([*argv, "--batch-size", "3", "--center-rewards-coefficient", "0.5", "--eval-fraction", "0"]) == 0
    assert seen == [([0.25] * 3, 0.5), ([0.25] * 3, 0.5)]
    report = json.loads((tmp_path / "rm" / "rm_report.json").read_text())
    assert report["eval"] == {"pairs": 0} and report["final_train"]["pairs"] == 8


@pytest.mark.parametrize("base", ["tiny-dense", "tiny-moe"])
def test_registry_bases_build_one_label_classifiers(base):
    from harness.rm.model import base_tokenizer, build_reward_model

    tok = base_tokenizer(base)
    model = build_reward_model(base, seed=0, pad_id=tok.pad_token_id)
    assert model.config.num_labels == 1 and model.score.out_features == 1
    assert model.config.pad_token_id == tok.pad_token_id == 0
    a, b = build_reward_model(base, 0, 0), build_reward_model(base, 1, 0)
    assert torch.equal(model.score.weight, a.score.weight) and not torch.equal(a.score.weight, b.score.weight)


def test_a_base_without_a_chat_template_gets_the_fallback(tmp_path):
    from harness.models.tokenizer import char_tokenizer
    from harness.rm.model import FALLBACK_CHAT_TEMPLATE, base_tokenizer

    tok = char_tokenizer()
    tok.chat_template = None
    tok.save_pretrained(tmp_path)
    got = base_tokenizer(str(tmp_path))
    assert got.chat_template == FALLBACK_CHAT_TEMPLATE
    assert got.decode(reward_input_ids(got, "q", "a")) == "<bos><|user|>\nq\n<|assistant|>\na\n<eos>"


@pytest.mark.slow  # an MLflow sqlite store is created and migrated: ~30 s on a loaded 2-core machine
def test_mlflow_logs_the_steps_and_the_held_out_metrics(small_base, marker_file, tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    _train(small_base, ["--pairs", str(marker_file)], tmp_path / "rm", "--mlflow", "rm-test")
    client = MlflowClient(uri)
    run_id = (tmp_path / "rm" / "mlflow_run_id").read_text().strip()
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.params["lr"] == "0.003"
    assert len(client.get_metric_history(run_id, "train/loss")) == 12
    assert 0.9 <= run.data.metrics["eval/accuracy"] <= 1 and "eval/ece" in run.data.metrics
    assert [a.path for a in client.list_artifacts(run_id)] == ["rm_report.json"]


def test_mlflow_option_hands_steps_metrics_and_report_to_the_tracker(small_base, marker_file, tmp_path, monkeypatch):
    from harness.rm import train as rm_train

    calls = {}

    class Fake:
        run_id = "fake"

        def __init__(self, run_dir, experiment, config, tags, run_name=None):
            calls["init"] = (str(run_dir), experiment, config["lr"], tags)

        def log_steps(self, records):
            calls["steps"] = records

        def log_artifact(self, path, artifact_path=None):
            calls["artifact"] = path

        def finish(self, status="FINISHED"):
            calls["finish"] = status

    monkeypatch.setattr(rm_train, "MlflowTracker", Fake)
    _train(small_base, ["--pairs", str(marker_file)], tmp_path / "rm", "--mlflow", "rm-test")
    assert calls["init"] == (str(tmp_path / "rm"), "rm-test", 3e-3, {"command": "train-rm"})
    assert [r["step"] for r in calls["steps"]] == list(range(13))  # 12 steps, then the final metrics
    assert 0.9 <= calls["steps"][-1]["eval/accuracy"] <= 1 and "final_train/accuracy" in calls["steps"][-1]
    assert calls["artifact"].endswith("rm_report.json") and calls["finish"] == "FINISHED"
