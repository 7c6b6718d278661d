"""A researcher's own variants in one file outside the package (tests/plugins/my_variants.py: a median
baseline and a surrogate with its own knob) work exactly as built-in ones: named in YAML by one line
(`objective.plugins`), validated before any model loads, documented by `harness config --explain`,
usable in presets and in study grids; bad input is one line naming the key (docs/extending.md)."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from harness.config import ConfigError, load_config
from harness.objective import ObjectiveConfig, group_advantages, policy_loss

REPO = Path(__file__).resolve().parents[2]
PLUGIN = REPO / "tests" / "plugins" / "my_variants.py"
SMOKE = "experiments/runs/smoke.yaml"
USE = "objective.plugins=[my_variants]"


@pytest.fixture(autouse=True)
def on_path(monkeypatch):
    """The plugin is importable as `my_variants` (as it is from the directory a researcher runs in)."""
    monkeypatch.syspath_prepend(str(PLUGIN.parent))


def T(x):
    return torch.tensor(x, dtype=torch.float64)


def _cfg(*overrides: str):
    return load_config(SMOKE, [USE, *overrides]).objective


def test_median_baseline_by_hand():
    cfg = _cfg("objective.baseline=median", "objective.scale=none")
    # lower median of [3, 1, 2, 0] is 1: r - b = [2, 0, 1, -1]; of [1, 0, 0, 0]: 0 -> [1, 0, 0, 0]
    assert group_advantages(cfg, T([3, 1, 2, 0, 1, 0, 0, 0]), 4).tolist() == [2, 0, 1, -1, 1, 0, 0, 0]
    # with the group std (sample: sqrt(5/3) = 1.290994) as scale, exactly like a built-in baseline
    cfg = _cfg("objective.baseline=median")
    std = math.sqrt(5 / 3)
    torch.testing.assert_close(
        group_advantages(cfg, T([3, 1, 2, 0]), 4), T([2, 0, 1, -1]) / (std + 1e-6), rtol=0, atol=1e-12
    )


def test_tanh_clip_loss_gradient_and_clip_fraction_by_hand():
    cfg = _cfg("objective.clip=tanh_clip", "objective.agg=token_mean", "objective.kl_coef=0")
    assert cfg.tanh_width == 0.2  # its declared default
    lp = torch.log(T([[1.1, 0.5]])).requires_grad_()  # old_logp = 0: rho = [1.1, 0.5]
    loss, metrics = policy_loss(cfg, lp, torch.zeros(1, 2), T([[1.0, -1.0]]), torch.ones(1, 2))
    # l = -A (1 + 0.2 tanh((rho - 1) / 0.2)): tanh(0.5) = 0.462117 -> -1.092423; tanh(-2.5) = -0.986614 -> 0.802677
    want = (-(1 + 0.2 * math.tanh(0.5)) + (1 + 0.2 * math.tanh(-2.5))) / 2
    assert loss.item() == pytest.approx(want, abs=1e-12) and want == pytest.approx(-0.144873, abs=1e-6)
    (g,) = torch.autograd.grad(loss, lp)
    # d l / d logp = -A sech^2((rho - 1) / w) rho, / 2 tokens
    sech2 = [1 - math.tanh(0.5) ** 2, 1 - math.tanh(-2.5) ** 2]
    torch.testing.assert_close(g, T([[-sech2[0] * 1.1 / 2, sech2[1] * 0.5 / 2]]), rtol=0, atol=1e-12)
    # only rho = 0.5 left the band |rho - 1| <= 0.2 (its own masks): a low clip
    assert (metrics["clip/frac"], metrics["clip/frac_low"], metrics["clip/frac_high"]) == (0.5, 0.5, 0.0)


def test_its_knob_is_validated_defaulted_and_only_read_with_its_clip():
    assert _cfg("objective.clip=tanh_clip", "objective.tanh_width=0.3").tanh_width == 0.3
    with pytest.raises(ConfigError) as e:  # set while another clip is selected: nothing would read it
        _cfg("objective.tanh_width=0.3")
    assert "objective.tanh_width=0.3 is read only with objective.clip='tanh_clip', and objective.clip='ppo'" in str(
        e.value
    )


def test_a_plugin_preset_is_a_preset():
    cfg = _cfg("objective.preset=median_tanh", "objective.tanh_width=0.5")
    assert (cfg.algorithm, cfg.baseline, cfg.clip, cfg.tanh_width, cfg.kl_coef) == (
        "median_tanh",
        "median",
        "tanh_clip",
        0.5,
        0.0,
    )
    assert ObjectiveConfig.preset("median_tanh").plugins == ("my_variants",)  # selected: the config names its module


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            [USE, "objective.baseline=medain"],  # a typo of the plugin's mode: the registry lists it
            "'objective.baseline': unknown baseline 'medain'; allowed baseline values: ['group_mean', 'leave_one_out', "
            "'batch_mean', 'none', 'passk', 'critic', 'opo', 'optimal_token', 'prime', 'remax', 'median']",
        ),
        (
            [USE, "objective.clip=tanh_clip", "objective.tanh_width=-1"],
            "'objective.tanh_width': Input should be greater than 0 (got -1)",
        ),
        (
            [USE, "objective.clip=tanh_clip", "objective.tanh_width=true"],
            "'objective.tanh_width': a boolean where a number is expected; write a number (got True)",
        ),
        (
            ["objective.plugins=[no_such_variants]", "objective.baseline=median"],
            "objective.plugins: module 'no_such_variants' does not import (ModuleNotFoundError: No module named "
            "'no_such_variants')",
        ),
        (["objective.plugins=my_variants.py"], "objective.plugins: 'my_variants.py' is not a module name"),
    ],
)
def test_bad_input_is_one_line_naming_the_key(overrides, message):
    with pytest.raises(ConfigError) as e:
        load_config(SMOKE, overrides)
    msg = str(e.value)
    assert message in msg and "\n" not in msg, msg


def test_a_plugin_knob_without_its_plugin_is_unknown_and_says_where_it_lives():
    _cfg()  # the plugin is registered in this process; a config that does not name it does not carry its knobs
    assert "tanh_width" not in load_config(SMOKE).objective.knob_names()
    with pytest.raises(ConfigError) as e:
        load_config(SMOKE, ["objective.tanh_width=0.3"])
    assert "'tanh_width' is declared by plugin ['my_variants']: add it to objective.plugins" in str(e.value)


# ----------------------------------------------------------------------------- as a researcher runs it
def _harness() -> list[str]:
    """The `harness` console script (it does not put the working directory on sys.path; the loader does)."""
    script = Path(sys.executable).with_name("harness")
    return [str(script)] if script.exists() else [sys.executable, "-m", "harness.cli"]


@pytest.fixture
def project(tmp_path):
    """A project folder: the plugin file and a run config that names it in one line."""
    shutil.copy(PLUGIN, tmp_path / "my_variants.py")
    base = yaml.safe_load((REPO / SMOKE).read_text())
    base["objective"] = {"plugins": ["my_variants"], "preset": "median_tanh"}
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(base))
    return tmp_path


def _run(project, *args):
    env = {k: v for k, v in __import__("os").environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(REPO)  # the harness under test; the plugin comes from the working directory
    return subprocess.run([*_harness(), *args], cwd=project, env=env, capture_output=True, text=True, timeout=300)


def test_config_explain_documents_the_plugin_knob(project):
    r = _run(project, "config", "run.yaml", "objective.tanh_width=0.3", "--explain")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    i = lines.index("objective.tanh_width: 0.3  [read with clip='tanh_clip'; read]")
    assert "half-width w of tanh_clip's band" in lines[i + 1]
    assert any(
        line.startswith("objective.baseline: median") and "`median`" in lines[j + 1] for j, line in enumerate(lines)
    )
    r = _run(project, "config", "run.yaml", "objective.tanh_width=0")
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "'objective.tanh_width': Input should be greater than 0 (got 0)" in r.stderr


def test_a_grid_over_the_plugin_knob_expands_and_writes_cells_that_name_the_plugin(project):
    study = {"base": "run.yaml", "grid": {"objective.tanh_width": [0.1, 0.3]}, "seeds": [0], "scale": "smoke"}
    (project / "tanh.yaml").write_text(yaml.safe_dump(study))
    r = _run(project, "grid", "tanh.yaml", "--write-configs", str(project / "cells"))
    assert r.returncode == 0, r.stderr
    cells = sorted((project / "cells").glob("*.yaml"))
    assert [c.stem for c in cells] == ["tanh_width=0.1__seed=0", "tanh_width=0.3__seed=0"]
    for cell, width in zip(cells, (0.1, 0.3)):
        obj = yaml.safe_load(cell.read_text())["objective"]
        assert obj["plugins"] == ["my_variants"] and obj["tanh_width"] == width and obj["clip"] == "tanh_clip"


def test_a_bad_plugin_knob_value_in_a_grid_names_the_cell_and_the_key(project):
    from harness.experiment import StudyError, load_study

    study = {"base": str(project / "run.yaml"), "grid": {"objective.tanh_width": [0.1, -0.3]}, "seeds": [0]}
    with pytest.raises(StudyError) as e:
        load_study(study, "smoke", name="tanh")
    assert "tanh_width=-0.3" in str(e.value) and "'objective.tanh_width': Input should be greater than 0" in str(
        e.value
    )
    study["grid"] = {"objective.tanh_wdith": [0.1]}  # a typo of the plugin's knob: the allowed keys list it
    with pytest.raises(StudyError) as e:
        load_study(study, "smoke", name="tanh")
    assert "'objective.tanh_wdith' is not a run-config key" in str(e.value) and "'tanh_width'" in str(e.value)


def test_registration_refuses_a_taken_name_or_knob():
    from harness.objective import Knob, register_baseline, register_clip, register_preset

    with pytest.raises(ValueError, match="'group_mean' is already registered by harness"):
        register_baseline("group_mean", doc="a second group mean")(lambda rewards, cfg: rewards)
    with pytest.raises(ValueError, match="declares knob 'eps_high'"):  # a field of every config: read it instead
        register_clip("wide", doc="x", knobs=[Knob("eps_high", 0.3, "x")])(lambda *a: None)
    with pytest.raises(ValueError, match="already declares differently"):
        register_clip("sapo2", doc="x", knobs=[Knob("sapo_tau_pos", 2.0, "x", gt=0)])(lambda *a: None)
    with pytest.raises(ValueError, match="preset 'grpo' is built in"):
        register_preset("grpo", clip="ppo")
    with pytest.raises(ValueError, match="preset 'mine': 'no_such_knob' is not a knob"):
        register_preset("mine", no_such_knob=1)
