"""The machine on record (harness/machine.py): what it says, and the code digest in every cache key."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from harness import machine
from harness.config import load_config
from harness.train.run import warmstart

# a kernel path no x86 machine runs: "another machine" whatever this one is (AVX2 or AVX512)
OTHER_ISA = "SVE256"


def test_describe_names_the_cpu_the_kernels_and_the_packages():
    d = machine.describe()
    assert d["cpu"] and d["arch"] and d["torch"].startswith("2.")
    assert d["cpu_capability"] in ("DEFAULT", "AVX2", "AVX512", "NO AVX", "ZVECTOR", "SVE256", "SVE")
    assert "torch" in d["packages"] and "transformers" in d["packages"]
    assert set(machine.kernel_path()) <= set(d)
    line = machine.one_line(d)
    assert d["cpu"] in line and str(d["cpu_capability"]) in line and d["torch"] in line


def test_kernel_path_follows_aten_cpu_capability():
    """ATEN_CPU_CAPABILITY=default runs torch's portable kernels: another kernel path, another digest."""
    code = "from harness import machine; import json; print(json.dumps([machine.kernel_path(), machine.kernel_path_digest()]))"
    env = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
    native = json.loads(
        subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    )
    portable = json.loads(
        subprocess.run(
            [sys.executable, "-c", code],
            env={**env, "ATEN_CPU_CAPABILITY": "default"},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    assert portable[0]["cpu_capability"] == "DEFAULT" and portable[0]["env"] == {"ATEN_CPU_CAPABILITY": "default"}
    assert portable[1] != native[1]


def _module(tmp_path, name, source):
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    return name


def test_code_digest_ignores_comments_docstrings_and_layout_but_not_code(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    a = _module(
        tmp_path,
        "digest_a",
        '''
        """Module doc."""
        def f(x):
            """Doc."""
            return x + 1  # a comment
    ''',
    )
    b = _module(
        tmp_path,
        "digest_b",
        """
        def f(x):
            # another comment, other layout
            return (x
                    + 1)
    """,
    )
    c = _module(
        tmp_path,
        "digest_c",
        """
        def f(x):
            return x + 2
    """,
    )
    assert machine._module_digest(a) == machine._module_digest(b)  # the same code
    assert machine._module_digest(a) != machine._module_digest(c)
    assert machine.code_digest([a, c]) == machine.code_digest([c, a]) != machine.code_digest([a, b])


def test_code_digest_of_a_class_covers_its_package_bases():
    from harness.tasks import ArithmeticTask

    digest = machine.code_digest([ArithmeticTask])
    assert digest == machine.code_digest(["harness.tasks.arithmetic", "harness.tasks.common", "harness.tasks.base"])


@pytest.fixture
def ws_cfg(tmp_path):
    return load_config("experiments/runs/smoke.yaml", ["warm_start.steps=5", f"warm_start.cache_dir={tmp_path}"])


def test_warm_start_key_holds_the_code_and_the_kernel_path(ws_cfg, monkeypatch):
    base = warmstart.warm_start_folder(ws_cfg)
    here = machine.kernel_path()
    monkeypatch.setattr(machine, "kernel_path", lambda: {**here, "cpu_capability": OTHER_ISA})
    assert warmstart.warm_start_folder(ws_cfg) != base
    monkeypatch.setattr(machine, "kernel_path", lambda: here)
    assert warmstart.warm_start_folder(ws_cfg) == base
    monkeypatch.setattr(machine, "code_digest", lambda modules: "other-code")
    assert warmstart.warm_start_folder(ws_cfg) != base


def test_warm_start_key_holds_its_thread_count(ws_cfg):
    """warm_start.threads changes the SFT's weights (measured: a 200-step tiny-moe SFT on 1 and on 2 threads ends
    apart on an AVX512 EPYC), so another count is another cache folder."""
    other = ws_cfg.model_copy(update={"warm_start": ws_cfg.warm_start.model_copy(update={"threads": 1})})
    assert ws_cfg.warm_start.threads == 2 and warmstart.warm_start_folder(other) != warmstart.warm_start_folder(ws_cfg)


def test_a_warm_start_from_another_machine_or_code_is_named_not_reused(ws_cfg, monkeypatch):
    """stale_warm_starts lists a cached warm start of the same settings built elsewhere, with why."""
    key = warmstart.warm_start_key(ws_cfg)
    other = warmstart.warm_start_folder(ws_cfg).parent / f"{ws_cfg.model.name}-{ws_cfg.task.name}-0123456789"
    other.mkdir(parents=True)
    kernels = {**key["kernels"], "cpu_capability": OTHER_ISA, "blas": "mkl 2023.1"}
    (other / "warmstart.json").write_text(json.dumps({"key": {**key, "kernels": kernels}}))
    stale = warmstart.stale_warm_starts(ws_cfg)
    assert len(stale) == 1 and stale[0][0] == other
    why = "; ".join(stale[0][1])
    assert f"cpu_capability {OTHER_ISA} -> {key['kernels']['cpu_capability']}" in why and "blas mkl 2023.1" in why
    (other / "warmstart.json").write_text(json.dumps({"key": {**key, "code": "old"}}))
    assert warmstart.stale_warm_starts(ws_cfg)[0][1] == ["code"]
    # other SFT settings are another warm start, not a stale copy of this one
    (other / "warmstart.json").write_text(json.dumps({"key": {**key, "steps": 7, "code": "old"}}))
    assert warmstart.stale_warm_starts(ws_cfg) == []
