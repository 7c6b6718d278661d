"""The dataset task reads JSONL, JSON, Parquet (verl's layout), CSV and save_to_disk folders with
the `datasets` library, splits one file by a hash of the prompt, and draws rows seeded."""

from __future__ import annotations

import json

import pytest

from harness.tasks import DatasetTask
from harness.tasks.rewards import RewardSpec
from tests.tasks.conftest import gsm8k_rows, write_jsonl

GSM8K = [RewardSpec("gsm8k", verifier="gsm8k")]


def task(rewards=GSM8K, **data) -> DatasetTask:
    return DatasetTask(data=data, rewards=rewards, reward_workers=0)


def test_jsonl_gsm8k_fields(gsm8k_file):
    t = task(train=str(gsm8k_file), prompt_key="question", difficulty_key="difficulty", eval_fraction=0.25)
    train, evals = t.rows("train"), t.rows("eval")
    assert len(train) + len(evals) == 40 and train and evals
    assert {p.difficulty for p in train + evals} == {"easy", "medium", "hard"}
    p = train[0]
    assert p.prompt.startswith("Tom has") and p.answer.endswith(f"#### {2 * p.meta['row'] + 1}")
    assert p.uid == f"train:{p.meta['row']}" and p.meta["fields"]["difficulty"] == p.difficulty
    assert t.score(p, f"so\n#### {2 * p.meta['row'] + 1}", False).correct


def test_hash_split_is_stable_and_prompt_keyed(tmp_path):
    rows = gsm8k_rows(60)
    a = task(train=str(write_jsonl(tmp_path / "a.jsonl", rows)), prompt_key="question")
    b = task(train=str(write_jsonl(tmp_path / "b.jsonl", rows[::-1])), prompt_key="question", shuffle_seed=5)
    held = lambda t: {p.prompt for p in t.rows("eval")}  # noqa: E731
    assert held(a) == held(b) and held(a)  # the same prompts are held out whatever the order or the shuffle
    assert not held(a) & {p.prompt for p in a.rows("train")}
    dup = write_jsonl(tmp_path / "dup.jsonl", rows + rows)  # a repeated prompt lands on one side
    c = task(train=str(dup), prompt_key="question")
    assert not {p.prompt for p in c.rows("eval")} & {p.prompt for p in c.rows("train")}


def test_json_array_file(tmp_path):
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(gsm8k_rows(20)))
    t = task(train=str(path), prompt_key="question", eval_fraction=0.3)
    assert len(t.rows("train")) + len(t.rows("eval")) == 20


def test_verl_parquet_messages_and_dotted_answer(tmp_path):
    import datasets

    rows = [
        {
            "data_source": "openai/gsm8k",
            "prompt": [
                {"role": "system", "content": "Think step by step."},
                {"role": "user", "content": f"What is {i} + {i}?"},
            ],
            "reward_model": {"style": "rule", "ground_truth": str(2 * i)},
            "extra_info": {"index": i, "split": "train"},
        }
        for i in range(30)
    ]
    datasets.Dataset.from_list(rows).to_parquet(str(tmp_path / "train.parquet"))
    datasets.Dataset.from_list(rows[:5]).to_parquet(str(tmp_path / "test.parquet"))
    rows_eval = [
        dict(
            r,
            prompt=[{"role": "user", "content": f"Now {i} + {i + 100}?"}],
            reward_model={"style": "rule", "ground_truth": str(2 * i + 100)},
        )
        for i, r in enumerate(rows[:5])
    ]
    datasets.Dataset.from_list(rows_eval).to_parquet(str(tmp_path / "test.parquet"))
    t = task(
        train=str(tmp_path / "train.parquet"),
        eval=str(tmp_path / "test.parquet"),
        answer_key="reward_model.ground_truth",
        id_key="extra_info.index",
        rewards=[RewardSpec("n", verifier="number")],
    )
    p = next(p for p in t.rows("train") if p.uid == "train:7")
    assert p.prompt == "What is 7 + 7?" and p.answer == "14"
    assert p.meta["messages"][0] == {"role": "system", "content": "Think step by step."}
    assert t.score(p, "It is 14.", False).correct and len(t.rows("eval")) == 5


def test_trl_conversational_jsonl(tmp_path):
    rows = [
        {"prompt": [{"role": "user", "content": f"Capital of country {i}?"}], "solution": f"City{i}"} for i in range(20)
    ]
    t = task(
        train=str(write_jsonl(tmp_path / "c.jsonl", rows)),
        answer_key="solution",
        eval_fraction=0.2,
        rewards=[RewardSpec("exact", verifier="exact")],
    )
    p = t.rows("train")[0]
    assert p.meta["messages"] == [{"role": "user", "content": p.prompt}]
    assert t.score(p, f"Answer: {p.answer}", False).correct


def test_compressed_jsonl(tmp_path):
    import gzip

    with gzip.open(tmp_path / "rows.jsonl.gz", "wt") as f:
        f.write("".join(json.dumps(r) + "\n" for r in gsm8k_rows(20)))
    t = task(train=str(tmp_path / "rows.jsonl.gz"), prompt_key="question", eval_fraction=0.3)
    assert len(t.rows("train")) + len(t.rows("eval")) == 20


def test_csv_and_tsv(tmp_path):
    (tmp_path / "q.csv").write_text(
        "question,answer\n" + "".join(f'"What is {i}, doubled?",{2 * i}\n' for i in range(20))
    )
    t = task(
        train=str(tmp_path / "q.csv"),
        prompt_key="question",
        rewards=[RewardSpec("n", verifier="number")],
        eval_fraction=0.2,
    )
    p = t.rows("train")[0]
    assert p.answer == str(2 * int(p.prompt.split()[2].rstrip(",")))  # an int column is read as text
    (tmp_path / "q.tsv").write_text("question\tanswer\n" + "".join(f"What is {i}?\t{i}\n" for i in range(10)))
    t = task(
        train=str(tmp_path / "q.tsv"),
        prompt_key="question",
        rewards=[RewardSpec("n", verifier="number")],
        eval_fraction=0.3,
    )
    assert len(t.rows("train")) + len(t.rows("eval")) == 10


def test_save_to_disk_dataset_and_datasetdict(tmp_path):
    import datasets

    datasets.Dataset.from_list(gsm8k_rows(20)).save_to_disk(str(tmp_path / "single"))
    t = task(train=str(tmp_path / "single"), prompt_key="question", eval_fraction=0.3)
    assert len(t.rows("train")) + len(t.rows("eval")) == 20
    dd = datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_list(gsm8k_rows(20)),
            "test": datasets.Dataset.from_list(gsm8k_rows(6, start=100)),
        }
    )
    dd.save_to_disk(str(tmp_path / "dd"))
    t = task(train=str(tmp_path / "dd"), eval=str(tmp_path / "dd"), prompt_key="question")
    assert len(t.rows("train")) == 20 and len(t.rows("eval")) == 6
    with pytest.raises(ValueError, match="task.data.eval_split='validation' is not a split of .*'train', 'test'"):
        task(train=str(tmp_path / "dd"), eval=str(tmp_path / "dd"), eval_split="validation", prompt_key="question")


def test_folder_of_jsonl_files_and_list_of_paths(tmp_path):
    write_jsonl(tmp_path / "shards" / "a.jsonl", gsm8k_rows(10))
    write_jsonl(tmp_path / "shards" / "b.jsonl", gsm8k_rows(10, start=10))
    t = task(train=str(tmp_path / "shards"), prompt_key="question", eval_fraction=0.2)
    assert len(t.rows("train")) + len(t.rows("eval")) == 20
    t = task(
        train=[str(tmp_path / "shards" / "a.jsonl"), str(tmp_path / "shards" / "b.jsonl")],
        prompt_key="question",
        eval_fraction=0.2,
    )
    assert len(t.rows("train")) + len(t.rows("eval")) == 20


def test_template_where_limits_and_shuffle(tmp_path):
    rows = [dict(r, choices=["1", "2"]) for r in gsm8k_rows(60)]
    path = str(write_jsonl(tmp_path / "t.jsonl", rows))
    t = task(
        train=path,
        prompt_template="Q: {question}\nOptions:\n{choices}",
        where={"difficulty": ["easy", "hard"]},
        max_train_rows=7,
        max_eval_rows=3,
        eval_fraction=0.3,
    )
    assert len(t.rows("train")) == 7 and len(t.rows("eval")) == 3
    assert all(p.prompt.startswith("Q: Tom") and p.prompt.endswith("Options:\n1\n2") for p in t.rows("train"))
    assert {p.meta["fields"]["difficulty"] for p in t.rows("train")} <= {"easy", "hard"}
    again = task(
        train=path,
        prompt_template="Q: {question}\nOptions:\n{choices}",
        where={"difficulty": ["easy", "hard"]},
        max_train_rows=7,
        max_eval_rows=3,
        eval_fraction=0.3,
    )
    other = task(
        train=path,
        prompt_template="Q: {question}\nOptions:\n{choices}",
        where={"difficulty": ["easy", "hard"]},
        max_train_rows=7,
        max_eval_rows=3,
        eval_fraction=0.3,
        shuffle_seed=1,
    )
    uids = lambda x: [p.uid for p in x.rows("train")]  # noqa: E731
    assert uids(t) == uids(again) and uids(t) != uids(other)


def test_drawing_problems(gsm8k_file):
    t = task(train=str(gsm8k_file), prompt_key="question", eval_fraction=0.25)
    n_train = len(t.rows("train"))
    a, b = t.problems(8, seed=3), t.problems(8, seed=3)
    assert [p.uid for p in a] == [p.uid for p in b] and len({p.uid for p in a}) == 8
    assert [p.uid for p in t.problems(8, seed=4)] != [p.uid for p in a]
    many = t.problems(n_train + 5, seed=0)  # more than the split: the whole split, then again
    assert len(many) == n_train + 5 and len({p.uid for p in many[:n_train]}) == n_train
    evals = t.problems(1000, seed=7, split="eval")
    assert sorted(p.uid for p in evals) == sorted(p.uid for p in t.rows("eval"))  # every eval row once, no repeats
    assert [p.uid for p in t.problems(5, seed=7, split="eval")] == [p.uid for p in t.problems(5, seed=7, split="eval")]


def test_overlap_of_train_and_eval_files(tmp_path):
    train = write_jsonl(tmp_path / "train.jsonl", gsm8k_rows(20))
    test = write_jsonl(tmp_path / "test.jsonl", gsm8k_rows(5, start=18))  # rows 18, 19 are in both
    with pytest.raises(ValueError, match=r"task.data.train and task.data.eval share 2 prompt\(s\)"):
        task(train=str(train), eval=str(test), prompt_key="question")
    t = task(train=str(train), eval=str(test), prompt_key="question", overlap="drop")
    assert len(t.rows("train")) == 18
    t = task(train=str(train), eval=str(test), prompt_key="question", overlap="allow")
    assert len(t.rows("train")) == 20


def test_sample_dataset_is_written_on_first_read(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    t = task(
        train="results/data/gsm8k_sample/train.jsonl",
        eval="results/data/gsm8k_sample/test.jsonl",
        prompt_key="question",
        difficulty_key="difficulty",
    )
    assert (tmp_path / "results/data/math_sample/test.jsonl").is_file()
    assert len(t.rows("train")) > 3000 and t.difficulties == ("easy", "hard", "medium")
