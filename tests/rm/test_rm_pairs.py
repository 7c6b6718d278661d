"""Pairs of a reward model (harness/rm/pairs.py): files in every accepted form, a run directory's samples,
the split by prompt, and the one-line refusals."""

import json
from pathlib import Path

import pytest

from harness.rm.pairs import PairsError, RMPair, pairs_from_run, read_pairs_file, split_pairs

MSG = [{"role": "user", "content": "2+2?"}]


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_text_pairs_and_the_dpo_format(tmp_path):
    f = _jsonl(
        tmp_path / "p.jsonl",
        [
            {"prompt": "2+2=?\n", "chosen": "4", "rejected": "5", "difficulty": "easy"},  # harness/train/dpo/pairs.py
            {"prompt": "3+3=?\n", "chosen": "6", "rejected": "7", "difficulty": "easy"},
        ],
    )
    assert read_pairs_file(f) == [RMPair("2+2=?\n", "4", "5"), RMPair("3+3=?\n", "6", "7")]


def test_conversational_pairs_with_and_without_prompt(tmp_path):
    rows = [
        {
            "prompt": MSG,
            "chosen": [{"role": "assistant", "content": "4"}],
            "rejected": [{"role": "assistant", "content": "5"}],
        },
    ]
    pairs = read_pairs_file(_jsonl(tmp_path / "c.jsonl", rows))
    assert pairs[0].prompt == MSG and pairs[0].chosen == [{"role": "assistant", "content": "4"}]
    implicit = [
        {
            "chosen": [*MSG, {"role": "assistant", "content": "4"}],
            "rejected": [*MSG, {"role": "assistant", "content": "5"}],
        }
    ]
    pairs = read_pairs_file(_jsonl(tmp_path / "i.jsonl", implicit))
    assert pairs[0].prompt == [] and pairs[0].chosen[0] == MSG[0]  # the conversations hold the prompt


def test_parquet_with_margin(tmp_path):
    import datasets

    path = tmp_path / "p.parquet"
    datasets.Dataset.from_list(
        [
            {"prompt": "a", "chosen": "b", "rejected": "c", "margin": 0.5},
            {"prompt": "d", "chosen": "e", "rejected": "f", "margin": 1},
        ]
    ).to_parquet(str(path))
    assert [x.margin for x in read_pairs_file(path)] == [0.5, 1.0]


@pytest.mark.parametrize(
    "rows, message",
    [
        ([{"prompt": "a", "chosen": "b"}], r"row 1: field 'rejected' is missing"),
        (
            [{"prompt": "a", "chosen": "b", "rejected": "c"}, {"prompt": "a", "chosen": "b", "rejected": "b"}],
            r"row 2: field 'rejected' equals field 'chosen'",
        ),
        (
            [{"prompt": "a", "chosen": 5, "rejected": "c"}],
            r"row 1: field 'chosen' is 5; allowed: a non-empty string or a list of chat messages",
        ),
        ([{"prompt": "a", "chosen": " ", "rejected": "c"}], r"field 'chosen' is ' '; allowed"),
        ([{"chosen": "b", "rejected": "c"}], r"row 1: field 'prompt' is None; allowed"),
        (
            [{"prompt": "a", "chosen": [{"role": "assistant"}], "rejected": "c"}],
            r"field 'chosen' is \[\{'role': 'assistant'",
        ),
        (
            [
                {"prompt": "a", "chosen": "b", "rejected": "c", "margin": 1.0},
                {"prompt": "a", "chosen": "b", "rejected": "d"},
            ],
            r"row 2: field 'margin' is missing; allowed: a margin on every row or on none",
        ),
        (
            [{"prompt": "a", "chosen": "b", "rejected": "c", "margin": "big"}],
            r"row 1: field 'margin' is 'big'; allowed: a finite number",
        ),
    ],
)
def test_bad_rows_are_refused_naming_row_field_and_value(tmp_path, rows, message):
    with pytest.raises(PairsError, match=message) as err:
        read_pairs_file(_jsonl(tmp_path / "bad.jsonl", rows))
    assert "\n" not in str(err.value) and "bad.jsonl" in str(err.value)


def test_bad_files_are_refused(tmp_path):
    with pytest.raises(PairsError, match=r"--pairs='.*nope.jsonl': no such file"):
        read_pairs_file(tmp_path / "nope.jsonl")
    (tmp_path / "p.txt").write_text("x")
    with pytest.raises(PairsError, match=r"cannot tell its format from the name; allowed: .jsonl"):
        read_pairs_file(tmp_path / "p.txt")
    (tmp_path / "e.jsonl").write_text("")
    with pytest.raises(PairsError, match="holds no rows|does not parse|is empty: no rows"):
        read_pairs_file(tmp_path / "e.jsonl")
    (tmp_path / "j.jsonl").write_text("{not json\n")
    with pytest.raises(PairsError, match="does not parse"):
        read_pairs_file(tmp_path / "j.jsonl")


def _sample(step, prompt, completion, correct):
    """One record as harness/train/rl/step.py logs it to samples.jsonl."""
    return {
        "step": step,
        "prompt": prompt,
        "difficulty": "easy",
        "completion": completion,
        "reward": float(correct),
        "correct": correct,
    }


def test_pairs_from_a_run_directory(tmp_path):
    records = [
        _sample(0, "A", "a-right-1", True),
        _sample(0, "B", "b-right", True),
        _sample(0, "C", "c-right", True),
        _sample(1, "A", "a-wrong-1", False),
        _sample(1, "C", "c-wrong-1", False),
        _sample(2, "A", "a-right-1", True),  # the same text again: used once
        _sample(2, "C", "c-wrong-2", False),
        _sample(3, "A", "a-wrong-2", False),
        _sample(3, "A", "a-right-2", True),
    ]
    _jsonl(tmp_path / "samples.jsonl", records)
    pairs, counts = pairs_from_run(tmp_path)
    assert pairs == [
        RMPair("A", "a-right-1", "a-wrong-1"),
        RMPair("A", "a-right-2", "a-wrong-2"),
        RMPair("C", "c-right", "c-wrong-1"),  # k-th correct with k-th incorrect: c-wrong-2 has no partner
    ]
    assert counts == {"samples": 9, "prompts": 3, "prompts_with_pairs": 2, "pairs": 3}


def test_run_directories_that_give_no_pairs_are_refused(tmp_path):
    with pytest.raises(PairsError, match="no samples in .*samples.jsonl"):
        pairs_from_run(tmp_path)
    (tmp_path / "pairs.jsonl").write_text("")
    with pytest.raises(PairsError, match="pass that with --pairs"):
        pairs_from_run(tmp_path)
    _jsonl(tmp_path / "samples.jsonl", [_sample(0, "A", "x", True), _sample(1, "A", "y", True)])
    with pytest.raises(PairsError, match="its 2 logged samples give no pair"):
        pairs_from_run(tmp_path)
    _jsonl(tmp_path / "samples.jsonl", [{"step": 0, "prompt": "A", "completion": "x"}])
    with pytest.raises(PairsError, match=r"samples.jsonl, line 1: field 'correct' is None; allowed: a bool"):
        pairs_from_run(tmp_path)
    with pytest.raises(PairsError, match="not a folder"):
        pairs_from_run(tmp_path / "samples.jsonl")


def test_split_holds_out_whole_prompts():
    pairs = [RMPair(f"p{i % 10}", f"c{i}", f"r{i}") for i in range(40)]
    train, held = split_pairs(pairs, 0.2, seed=3)
    assert len({x.prompt for x in held}) == 2 and len(held) == 8
    assert not {x.prompt for x in held} & {x.prompt for x in train}
    assert split_pairs(pairs, 0.2, seed=3) == (train, held)  # seeded
    assert split_pairs(pairs, 0.0, seed=3) == (pairs, [])
    with pytest.raises(PairsError, match="leaves none to train on"):
        split_pairs(pairs[:1], 0.5, seed=0)


def test_implicit_prompts_are_split_by_the_turns_both_sides_share():
    def conv(i, answer):
        return [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": answer}]

    pairs = [RMPair([], conv(i % 5, "yes"), conv(i % 5, "no")) for i in range(20)]
    train, held = split_pairs(pairs, 0.2, seed=0)
    assert len(held) == 4 and len(train) == 16  # one of 5 prompts held out, not all 20 pairs under one key
    assert not {x.prompt_key() for x in held} & {x.prompt_key() for x in train}


def test_pairs_from_a_real_runs_samples():
    """fixtures/run/samples.jsonl: 28 records of an 8-step GRPO run on the arithmetic task (tiny-dense, 16 prompts
    a step, train.samples_to_log=16), as harness/train/rl/step.py wrote them: the records of the 9 prompts that
    came back with both a correct and an incorrect logged completion, and of 6 that did not."""
    pairs, counts = pairs_from_run(Path(__file__).parent / "fixtures" / "run")
    assert counts == {"samples": 28, "prompts": 15, "prompts_with_pairs": 9, "pairs": 9}
    assert pairs[0] == RMPair("9+9=?\n", "9+9=18\nAnswer: 18", "9+9=13\nAnswer: 133")
