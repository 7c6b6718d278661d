"""A researcher's own data files, refused in one line naming the key, the file or row and the value before any
model loads: row ids that repeat, a file that is not UTF-8, a prompt_template whose format spec
does not apply to text, a gsm8k reference that is not gsm8k's answer line, a completions file that is not
UTF-8."""

from __future__ import annotations

import gzip
import json

import pytest

from harness.cli import main
from harness.tasks import DatasetTask
from harness.tasks.dataset import check_reference_answers
from harness.tasks.rewards import RewardSpec
from tests.tasks.conftest import gsm8k_rows, write_jsonl

GSM8K = [RewardSpec("gsm8k", verifier="gsm8k")]


def task(rewards=GSM8K, **data) -> DatasetTask:
    return DatasetTask(data=data, rewards=rewards, reward_workers=0)


def test_repeated_ids_are_refused_naming_the_file_the_rows_and_the_id(tmp_path):
    rows = [dict(r, id=f"q{i % 7}") for i, r in enumerate(gsm8k_rows(20))]  # rows 0, 7, 14 share q0
    path = write_jsonl(tmp_path / "train.jsonl", rows)
    with pytest.raises(ValueError) as e:
        task(train=str(path), prompt_key="question", id_key="id")
    msg = str(e.value)
    assert msg.startswith(f"task.data.id_key='id': task.data.train={str(path)!r} rows 0, 7, 14 share the id 'q0'")
    assert "(7 id(s) repeat)" in msg and "\n" not in msg
    # 1 and "1" are one uid ("train:1"): refused too
    mixed = write_jsonl(tmp_path / "mixed.jsonl", [dict(r, id=[1, "1", 2][i]) for i, r in enumerate(gsm8k_rows(3))])
    with pytest.raises(ValueError, match=r"rows 0, 1 share the id '1'"):
        task(train=str(mixed), prompt_key="question", id_key="id")


def test_an_id_that_is_a_list_or_a_mapping_is_refused(tmp_path):
    rows = [dict(r, id={"n": i}) for i, r in enumerate(gsm8k_rows(3))]
    with pytest.raises(ValueError, match=r"task.data.id_key='id': train row 0's id is a dict \(\{'n': 0\}\); an id"):
        task(train=str(write_jsonl(tmp_path / "t.jsonl", rows)), prompt_key="question", id_key="id")


def test_unique_ids_and_rows_without_ids_load(tmp_path):
    rows = [dict(r, id=f"q{i}") for i, r in enumerate(gsm8k_rows(20))]
    t = task(train=str(write_jsonl(tmp_path / "train.jsonl", rows)), prompt_key="question", id_key="id")
    uids = [p.uid for s in ("train", "eval") for p in t.rows(s)]
    assert len(set(uids)) == 20 and all(u.split(":")[1].startswith("q") for u in uids)
    same = gsm8k_rows(4) + gsm8k_rows(4)  # GSM8K without ids, a question repeated: rows keep their index
    t = task(train=str(write_jsonl(tmp_path / "noid.jsonl", same)), prompt_key="question", eval_fraction=0.5)
    assert len({p.uid for s in ("train", "eval") for p in t.rows(s)}) == 8


def test_a_file_that_is_not_utf8_names_the_file_and_line(tmp_path):
    path = tmp_path / "latin1.jsonl"
    good = json.dumps(gsm8k_rows(1)[0]) + "\n"
    path.write_bytes(good.encode() * 3 + '{"question": "caf\xe9?", "answer": "#### 1"}\n'.encode("latin-1"))
    with pytest.raises(ValueError) as e:
        task(train=str(path), prompt_key="question")
    assert str(e.value).startswith(f"task.data.train: {path} line 4 is not UTF-8 text (byte 0xe9 at column 18)")
    packed = tmp_path / "latin1.jsonl.gz"
    packed.write_bytes(gzip.compress(path.read_bytes()))
    with pytest.raises(ValueError, match=rf"task.data.train: {packed} line 4 is not UTF-8 text \(byte 0xe9"):
        task(train=str(packed), prompt_key="question")
    csv = tmp_path / "rows.csv"
    csv.write_bytes("question,answer\nq\xe9,1\n".encode("latin-1"))
    with pytest.raises(ValueError, match=rf"task.data.eval: {csv} line 2 is not UTF-8"):
        task(train=str(write_jsonl(tmp_path / "t.jsonl", gsm8k_rows(5))), eval=str(csv), prompt_key="question")


@pytest.mark.parametrize(
    "template, needle",
    [
        ("{question:d}", "has {question:d}, whose format spec does not apply to text (Unknown format code 'd'"),
        ("Q: {question:.2f}", "has {question:.2f}, whose format spec does not apply to text"),
        ("{question:{width}}", "has {question:{width}}, whose format spec does not apply to text"),
        ("{question!x}", "has {question!x}: allowed conversions are !s, !r and !a (or none)"),
        ("{question:>100000000000}", "has {question:>100000000000}, whose format spec does not apply to text"),
        ("{question:>20000}", "has {question:>20000}, which pads a field to 20000 characters; allowed: <= 10000"),
    ],
)
def test_a_template_spec_that_does_not_apply_to_text_is_refused(gsm8k_file, template, needle):
    with pytest.raises(ValueError) as e:
        task(train=str(gsm8k_file), prompt_template=template)
    assert str(e.value).startswith(f"task.data.prompt_template={template!r} {needle}"), str(e.value)


def test_template_specs_and_conversions_that_apply_are_rendered(gsm8k_file):
    t = task(train=str(gsm8k_file), prompt_template="{question:.7}|{difficulty!r}|{difficulty:>6}")
    p = t.rows("train")[0]
    d = p.meta["fields"]["difficulty"]
    assert p.prompt == f"Tom has|{d!r}|{d:>6}"


def test_gsm8k_prefixes_only_a_bare_number_so_boxed_references_fail_the_check(tmp_path):
    boxed = [{"question": f"What is {i}+{i}?", "answer": f"So it is $\\boxed{{{2 * i}}}$"} for i in range(10)]
    t = task(train=str(write_jsonl(tmp_path / "math.jsonl", boxed)), prompt_key="question", eval_fraction=0.2)
    with pytest.raises(ValueError) as e:
        check_reference_answers(t, 8)
    msg = str(e.value)
    assert "task.rewards[0] (verifier gsm8k) does not read the data's answers: train row 0's reference answer" in msg
    assert "'So it is $\\\\boxed{0}$'" in msg and "(it read None)" in msg and "only when it is a bare number" in msg
    alone = [{"question": f"What is {i}+{i}?", "answer": f"\\boxed{{{2 * i}}}"} for i in range(10)]
    t = task(train=str(write_jsonl(tmp_path / "alone.jsonl", alone)), prompt_key="question", eval_fraction=0.2)
    with pytest.raises(ValueError, match="does not read the data's answers"):
        check_reference_answers(t, 8)  # "#### \boxed{0}" read 0: it passed, and boxed completions then scored 0
    bare = [{"question": f"What is {i}+{i}?", "answer": f" {2 * i * 1000:,} "} for i in range(10)]  # verl's "2,000"
    t = task(train=str(write_jsonl(tmp_path / "bare.jsonl", bare)), prompt_key="question", eval_fraction=0.2)
    check_reference_answers(t, 8)


def test_score_a_completions_file_that_is_not_utf8(tmp_path, capsys):
    write_jsonl(tmp_path / "train.jsonl", gsm8k_rows(10))
    cfg = tmp_path / "run.yaml"
    cfg.write_text(
        "warm_start: {enabled: false}\ntask:\n  name: dataset\n"
        f"  data: {{train: {tmp_path / 'train.jsonl'}, prompt_key: question}}\n  rewards: [gsm8k]\n"
        "  reward_workers: 0\n"
    )
    path = tmp_path / "completions.jsonl"
    path.write_bytes(b'{"row": 0, "completion": "#### 1"}\n{"row": 1, "completion": "caf\xe9 #### 3"}\n')
    assert main(["score", str(cfg), str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"harness: completions file {str(tmp_path)!r} is a folder, not a file\n"
    code = main(["score", str(cfg), str(path)])
    out = capsys.readouterr()
    assert code == 2 and out.out == ""
    assert out.err == f"harness: {path}:2: not UTF-8 text (byte 0xe9 at column 30); save the file as UTF-8\n"
