"""A reward model as a reward (task.rewards: [{model: FOLDER}]): its scores are a direct forward of the
folder, on the chat re-rendered with its own template, the same in any micro-batch; bad folders are
refused before any model loads; normalisation and the weighted sum with a verifier."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from harness.config import ConfigError, load_config
from harness.models.registry import build_model, render_prompt
from harness.tasks import task_from_config
from harness.tasks.rewards import Normalizer, RewardModel, conversation
from tests.tasks.conftest import gsm8k_rows, write_jsonl
from tests.tasks.reward_models import tiny_reward_model

CONVS = [
    conversation([{"role": "user", "content": "What is 2 + 3?"}], "2 + 3 = 5. #### 5"),
    conversation([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "7 * 6?"}], "#### 42"),
    conversation([{"role": "user", "content": "Name a colour."}], "Blue, which is the colour of a clear sky."),
    conversation([{"role": "user", "content": "x"}], ""),
    conversation([{"role": "user", "content": "Count to five."}], "1 2 3 4 5"),
]


@pytest.fixture(scope="module")
def rm_folder(tmp_path_factory):
    return tiny_reward_model(tmp_path_factory.mktemp("rm") / "rm")


def direct(folder: Path, conv: list[dict]) -> float:
    """The folder's own forward on one conversation, as transformers loads it (no harness code)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    ids = tok.apply_chat_template(conv, tokenize=True, return_dict=False)
    with torch.no_grad():
        return float(model(input_ids=torch.tensor([ids])).logits[0, 0])


def test_scores_equal_a_direct_forward_of_the_folder(rm_folder):
    scores = RewardModel(str(rm_folder), micro_batch_size=1).score(CONVS)
    assert scores == [direct(rm_folder, c) for c in CONVS]
    assert len(set(scores)) == len(scores)  # a model whose scores differ by input


def test_the_chat_is_rerendered_token_for_token_with_the_reward_models_template(rm_folder):
    from transformers import AutoTokenizer

    rm, tok = RewardModel(str(rm_folder)), AutoTokenizer.from_pretrained(rm_folder)
    policy_tok = build_model("tiny-dense", seed=0)[1]
    for conv in CONVS:
        assert rm.token_ids(conv) == tok.apply_chat_template(conv, tokenize=True, return_dict=False)
        policy = render_prompt(policy_tok, "", messages=conv)  # the policy's template: no role tags
        assert rm.token_ids(conv) != policy
    assert rm.tokenizer.decode(rm.token_ids(CONVS[1])) == (
        "<bos>[system] Be brief.\n[user] 7 * 6?\n[assistant] #### 42\n"
    )


def test_micro_batching_changes_no_score(rm_folder):
    rm = RewardModel(str(rm_folder), micro_batch_size=1)
    one = rm.score(CONVS)
    for mbs in (2, 3, 16):
        rm.micro_batch_size = mbs
        got = rm.score(CONVS)
        assert torch.allclose(torch.tensor(got), torch.tensor(one), atol=1e-5, rtol=0), mbs


def test_a_dataset_task_scores_the_prompts_chat_and_the_completion(rm_folder, tmp_path, monkeypatch):
    """The conversation a dataset task hands the reward model: its system prompt, the row's prompt as the
    user's message, the completion as the assistant's turn."""
    task = _task(tmp_path, rm_folder, system_prompt="Be brief.")
    seen = []
    real = RewardModel.score
    monkeypatch.setattr(RewardModel, "score", lambda self, convs: seen.extend(convs) or real(self, convs))
    p = task.rows("train")[0]
    task.score_batch([p], ["#### 3"], [False])
    assert seen == [
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": p.prompt},
            {"role": "assistant", "content": "#### 3"},
        ]
    ]


def _task(tmp_path, rm_folder, weight=0.5, normalize="none", **data):
    rows = write_jsonl(tmp_path / "rows.jsonl", gsm8k_rows(20))
    cfg = load_config(
        "experiments/runs/smoke.yaml",
        [
            "task.name=dataset",
            f"task.data={json.dumps({'train': str(rows), 'prompt_key': 'question', **data})}",
            f"task.rewards=[gsm8k, {{model: {rm_folder}, name: rm, weight: {weight}, normalize: {normalize}}}]",
            "task.reward_workers=0",
            "warm_start.enabled=false",
            "tracking.mlflow=false",
        ],
    )
    return task_from_config(cfg.task)


def test_a_reward_model_mixes_with_a_verifier_by_weight(rm_folder, tmp_path):
    task = _task(tmp_path, rm_folder, weight=0.5)
    problems = task.rows("train")[:3]
    answers = [p.answer.split("#### ")[1] for p in problems]
    completions = [f"#### {answers[0]}", "#### -1", f"#### {answers[2]}"]
    out = task.score_batch(problems, completions, [False, False, True])
    raw = RewardModel(str(rm_folder), 8).score(
        [conversation(task.messages(p), c) for p, c in zip(problems, completions)]
    )
    assert [s.parts["rm"] for s in out] == raw  # reward/rm: the model's raw score
    assert [s.parts["gsm8k"] for s in out] == [1.0, 0.0, 0.0]  # truncated: never correct
    assert [s.correct for s in out] == [True, False, False]  # the verifier defines correct
    for s, r, v in zip(out, raw, [1.0, 0.0, 0.0]):
        assert s.total == math.fsum([v, 0.5 * r])


def test_normalisation_before_the_weighted_sum(rm_folder, tmp_path):
    task = _task(tmp_path, rm_folder, weight=2.0, normalize="batch")
    problems = task.rows("train")[:4]
    out = task.score_batch(problems, ["#### 1", "#### 22", "no", "#### 5"], [False] * 4)
    rm = torch.tensor([s.parts["rm"] for s in out], dtype=torch.float64)
    z = (rm - rm.mean()) / (rm.std(unbiased=False) + 1e-6)
    total = torch.tensor([s.total - s.parts["gsm8k"] for s in out], dtype=torch.float64)
    assert torch.allclose(total, 2.0 * z, atol=1e-12)


def test_running_normalisation_learns_from_training_batches_only():
    batches = [[1.0, 2.0, 3.0], [10.0, 12.0], [-4.0, 0.5, 7.0, 8.0]]
    norm = Normalizer("running")
    assert norm([5.0], update=False) == [5.0]  # before any training batch: as it is
    for b in batches:
        out = norm(b, update=True)
    seen = torch.tensor([x for b in batches for x in b], dtype=torch.float64)
    mean, std = float(seen.mean()), float(seen.std(unbiased=False))
    assert norm.count == len(seen) and abs(norm.mean - mean) < 1e-12
    assert torch.allclose(
        torch.tensor(out, dtype=torch.float64), (torch.tensor(batches[-1], dtype=torch.float64) - mean) / (std + 1e-6)
    )
    before = norm.state_dict()
    norm([100.0, 200.0], update=False)  # an eval: the statistics stay
    assert norm.state_dict() == before
    resumed = Normalizer("running")
    resumed.load_state_dict(json.loads(json.dumps(before)))  # through a checkpoint
    assert resumed([3.0, 4.0], update=True) == norm([3.0, 4.0], update=True)


def test_a_run_without_reward_models_scores_as_before(tmp_path):
    """No reward model, no normaliser: the scorer's own total (the path every existing run takes)."""
    rows = write_jsonl(tmp_path / "rows.jsonl", gsm8k_rows(20))
    cfg = load_config(
        "experiments/runs/smoke.yaml",
        [
            "task.name=dataset",
            f"task.data={json.dumps({'train': str(rows), 'prompt_key': 'question'})}",
            "task.rewards=[gsm8k]",
            "task.reward_workers=0",
            "warm_start.enabled=false",
        ],
    )
    task = task_from_config(cfg.task)
    assert not task._mixed() and task.reward_state() == {}


# ----------------------------------------------------------------------------- bad folders
def _causal_lm(folder: Path) -> Path:
    from harness.models.registry import save_model

    save_model(*build_model("tiny-dense", seed=0, overrides={"num_hidden_layers": 1}), folder)
    return folder


def _no_tokenizer(folder: Path) -> Path:
    tiny_reward_model(folder)
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        (folder / name).unlink(missing_ok=True)
    return folder


def _nan_scores(folder: Path) -> Path:
    from safetensors.torch import load_file, save_file

    tiny_reward_model(folder)
    weights = load_file(folder / "model.safetensors")
    weights["score.weight"] = torch.full_like(weights["score.weight"], float("nan"))
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    return folder


def _bad_tokenizer(folder: Path) -> Path:
    tiny_reward_model(folder)
    (folder / "tokenizer.json").write_text(json.dumps({"model": {"type": "NoSuchModel"}}))
    return folder


@pytest.mark.parametrize(
    "make, why",
    [
        (lambda f: f, "is not a folder"),
        (_causal_lm, "not a sequence classifier"),
        (lambda f: tiny_reward_model(f, num_labels=2), "has 2 labels"),
        (_no_tokenizer, "no tokenizer files"),
        (_bad_tokenizer, "does not load"),
        (_nan_scores, "scores nan (not finite)"),
    ],
    ids=["missing", "causal_lm", "two_labels", "no_tokenizer", "bad_tokenizer", "nan_scores"],
)
def test_bad_reward_model_folders_are_refused_before_any_model_loads(make, why, tmp_path, monkeypatch):
    import harness.train.run.warmstart as warmstart
    from harness.cli import main

    folder = make(tmp_path / "rm")
    monkeypatch.setattr(warmstart, "initial_policy", lambda *a, **k: pytest.fail("the policy loaded"))
    rows = write_jsonl(tmp_path / "rows.jsonl", gsm8k_rows(20))
    overrides = [
        "task.name=dataset",
        f"task.data={json.dumps({'train': str(rows), 'prompt_key': 'question'})}",
        f"task.rewards=[gsm8k, {{model: {folder}}}]",
        "warm_start.enabled=false",
        "tracking.mlflow=false",
    ]
    with pytest.raises(ConfigError) as err:
        load_config("experiments/runs/smoke.yaml", overrides)
    line = str(err.value)
    assert f"task.rewards[1].model={str(folder)!r} is not a reward model" in line and why in line
    assert "\n" not in line
    assert main(["train", "experiments/runs/smoke.yaml", *overrides, "--out", str(tmp_path / "run")]) == 2


def test_each_process_scores_its_own_rows_of_a_training_batch(rm_folder, tmp_path):
    """place(device, map_rows): a training batch's conversations go through map_rows (harness/parallel.py
    map_shards: each process its shard, gathered); an eval's do not (every process scores them all)."""
    task = _task(tmp_path, rm_folder)
    calls = []

    def map_rows(fn, rows):
        calls.append(len(rows))
        return fn(rows[:2]) + fn(rows[2:])  # two "processes"

    task.place("cpu", map_rows)
    problems = task.rows("train")[:3]
    train = task.score_batch(problems, ["#### 1", "#### 2", "#### 3"], [False] * 3, train=True)
    held = task.score_batch(problems, ["#### 1", "#### 2", "#### 3"], [False] * 3)
    assert calls == [3]
    assert [s.parts["rm"] for s in train] == pytest.approx([s.parts["rm"] for s in held], abs=1e-5)


def test_reward_model_keys_leave_the_cache_keys_and_comparisons_of_other_rewards_as_they_were(tmp_path):
    """A verifier's entry reads as before the reward-model keys existed: in the warm-start and eval cache
    keys (task_identity), and when `harness compare` pairs a run recorded before them with a new one."""
    from harness.tasks import task_identity
    from harness.train.eval.compare import check_paired

    rows = write_jsonl(tmp_path / "rows.jsonl", gsm8k_rows(20))
    cfg = load_config(
        "experiments/runs/smoke.yaml",
        [
            "task.name=dataset",
            f"task.data={json.dumps({'train': str(rows), 'prompt_key': 'question'})}",
            "task.rewards=[gsm8k]",
            "warm_start.enabled=false",
        ],
    )
    old = {"verifier": "gsm8k", "function": None, "name": None, "weight": 1.0, "options": {}}
    assert task_identity(cfg.task)["rewards"] == [old]
    new = cfg.to_dict()
    recorded = json.loads(json.dumps(new))
    recorded["task"]["rewards"] = [old]
    check_paired(recorded, new, tmp_path / "a", tmp_path / "b")  # no ConfigError


@pytest.mark.parametrize(
    "rewards, needle",
    [
        ("[{verifier: gsm8k, micro_batch_size: 4}]", "task.rewards[0].micro_batch_size=4: only a reward model"),
        ("[{verifier: gsm8k, model: /x}]", "task.rewards[0]: give exactly one of verifier"),
    ],
)
def test_reward_model_keys_on_other_rewards_are_refused(rewards, needle, tmp_path):
    rows = write_jsonl(tmp_path / "rows.jsonl", gsm8k_rows(20))
    with pytest.raises(ConfigError) as err:
        load_config(
            "experiments/runs/smoke.yaml",
            [
                "task.name=dataset",
                f"task.data={json.dumps({'train': str(rows), 'prompt_key': 'question'})}",
                f"task.rewards={rewards}",
                "warm_start.enabled=false",
            ],
        )
    assert needle in str(err.value)


def test_the_hacking_window_is_refused_where_the_probe_does_not_run(tmp_path):
    rows = write_jsonl(tmp_path / "rows.jsonl", gsm8k_rows(20))
    base = [
        "task.name=dataset",
        f"task.data={json.dumps({'train': str(rows), 'prompt_key': 'question'})}",
        "warm_start.enabled=false",
    ]
    with pytest.raises(ConfigError, match="task.hacking_window=5 sets the reward-hacking probe's window"):
        load_config("experiments/runs/smoke.yaml", [*base, "task.rewards=[gsm8k]", "task.hacking_window=5"])
    with pytest.raises(ConfigError, match="task.hacking_window configure"):
        load_config("experiments/runs/smoke.yaml", ["task.hacking_window=5"])  # a generated task
