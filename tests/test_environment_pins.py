"""environment.yml (conda users) must pin the same versions as requirements.txt (pip)."""

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _pins(lines):
    out = {}
    for line in lines:
        line = line.split("#")[0].strip()
        if "==" in line and not line.startswith("-"):
            name, ver = line.split("==")
            out[name.strip().lower()] = ver.strip()
    return out


def test_environment_yml_matches_requirements():
    req = _pins((ROOT / "requirements.txt").read_text().splitlines())
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_block = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    conda = _pins(pip_block)
    assert req, "requirements.txt pins nothing"
    missing = {k: v for k, v in req.items() if conda.get(k) != v}
    assert not missing, f"environment.yml differs from requirements.txt on {missing}"
