"""`--out` of `harness train` and `harness sample-data` names a folder that is one or can be made: a file, a
path under a file or a path that cannot be created is refused by argparse (exit 2, one error line naming --out
and the value) before any config, data or model is read (not a traceback from mkdir)."""

from __future__ import annotations

import pytest

from harness.cli import main

SMOKE = "experiments/runs/smoke.yaml"


def refused(argv, capsys) -> str:
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and "Traceback" not in err
    return err.strip().splitlines()[-1]


@pytest.mark.parametrize("command", [["train", SMOKE], ["sample-data"]])
def test_out_naming_a_file_or_a_path_under_one(command, tmp_path, capsys):
    f = tmp_path / "notes.txt"
    f.write_text("x")
    line = refused([*command, "--out", str(f)], capsys)
    assert line.endswith(
        f"error: argument --out: {str(f)!r} is a file, not a folder; name a folder (it is created if missing)"
    )
    line = refused([*command, "--out", str(f / "run")], capsys)
    assert line.endswith(
        f"error: argument --out: {str(f / 'run')!r} cannot be created: {str(f)!r} is a file, not a folder"
    )


def test_out_that_cannot_be_created(tmp_path, capsys):
    assert refused(["train", SMOKE, "--out", ""], capsys).endswith(
        "argument --out: an empty path; name a folder (it is created if missing)"
    )
    line = refused(["sample-data", "--out", "/proc/harness-no/such"], capsys)
    assert "argument --out: '/proc/harness-no/such' cannot be created in '/proc' (" in line


def test_out_folders_that_can_be_made_are_used(tmp_path, capsys):
    out = tmp_path / "a" / "b"
    assert main(["sample-data", "--out", str(out), "--rows", "40"]) == 0
    assert (out / "gsm8k_sample" / "train.jsonl").is_file()
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".harness-probe")]  # the probe is removed
