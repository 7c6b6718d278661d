"""`snakemake -n` of every shipped study at the smoke scale lists exactly the expected jobs,
and the SLURM profile dry-runs (the plugin needs no sbatch/sinfo for -n: no stubs used)."""

from __future__ import annotations

import subprocess

import pytest
from study_helpers import SHIPPED_STUDIES, clean_env, job_counts, snakemake_cmd

# cells at the smoke scale (1 seed each) and warm starts (one per model x task x SFT settings)
# (+ one `probe` job: the mechanism probe of studies with a `probe:` section)
EXPECTED = {
    "demo": {"warmstart": 1, "train": 1, "eval": 1, "probe": 1},  # grpo; the probe has 3 arms
    "length_bias": {"warmstart": 1, "train": 3, "eval": 3, "probe": 1},  # 3 aggregations
    "difficulty_bias": {"warmstart": 1, "train": 3, "eval": 3, "probe": 1},  # 3 advantage scales
    "moe_stability": {"warmstart": 1, "train": 7, "eval": 7, "probe": 1},  # 3 arms + 4 corrections (5 in the probe)
    "dpo_displacement": {"warmstart": 1, "train": 3, "eval": 3},  # dpo, rpo, dpo_shift
    "clip_higher": {"warmstart": 1, "train": 2, "eval": 2},  # eps_high 0.28, 0.2
    "passk": {"warmstart": 1, "train": 1, "eval": 1},  # one grpo policy (eval --vs-initial)
    "scaling": {"warmstart": 1, "train": 8, "eval": 8},  # 4 losses + grpo/cispo at staleness 2 and 4
}
TAIL = {"summary": 1, "fit": 1, "figures": 1, "all": 1}


@pytest.fixture(scope="module")
def dry_runs(tmp_path_factory):
    """All dry runs at once (each parses the Snakefile, i.e. imports torch: run them in parallel)."""
    from study_helpers import REPO

    jobs = {name: ["--quiet", "rules", "--config", f"study={name}", "scale=smoke"] for name in SHIPPED_STUDIES}
    # not quiet: the job blocks show the resources each sbatch call would get
    jobs["slurm:length_bias:gpu"] = ["--profile", "profiles/slurm", "--config", "study=length_bias", "scale=gpu"]
    jobs["configfile:demo"] = ["--quiet", "rules", "--configfile", "experiments/demo.yaml", "--config", "scale=smoke"]
    # a study whose cells are each one run on 2 processes (train.nproc: 2): 2 GPUs per train job
    two = tmp_path_factory.mktemp("nproc2") / "passk_nproc2.yaml"
    text = (
        (REPO / "experiments" / "passk.yaml")
        .read_text()
        .replace("base: runs/smoke.yaml", "base: " + str(REPO / "experiments" / "runs" / "smoke.yaml"))
    )
    two.write_text(text.replace("  gpu:\n", "  gpu:\n    train.nproc: 2\n    rollout.seeding: prompt\n", 1))
    jobs["slurm:nproc2:gpu"] = ["--profile", "profiles/slurm", "--config", f"study={two}", "scale=gpu"]
    # the same cells on 2 nodes of 1 process each (--config nodes=2): one SLURM job of 2 nodes, srun's launchers
    jobs["slurm:nodes2:gpu"] = ["--profile", "profiles/slurm", "--config", f"study={two}", "scale=gpu", "nodes=2"]
    procs = {}
    for key, args in jobs.items():
        wd = tmp_path_factory.mktemp(key.replace(":", "_"))
        procs[key] = (
            wd,
            subprocess.Popen(
                snakemake_cmd(wd, "-n", *args),
                cwd=REPO,
                env=clean_env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            ),
        )
    out = {}
    for key, (wd, p) in procs.items():
        text, _ = p.communicate(timeout=600)
        out[key] = (p.returncode, text, wd)
    return out


@pytest.mark.parametrize("name", SHIPPED_STUDIES)
def test_dry_run_job_table(dry_runs, name):
    rc, text, wd = dry_runs[name]
    assert rc == 0, text[-3000:]
    want = {**EXPECTED[name], **TAIL}
    want["total"] = sum(want.values())
    assert job_counts(text) == want
    # parse time wrote the cell configs and the index the summary reads
    cfgs = sorted((wd / "results" / name / "smoke" / "configs").glob("*.yaml"))
    assert len(cfgs) == EXPECTED[name]["train"]
    assert (wd / "results" / name / "smoke" / "cells.json").exists()


def test_configfile_form_equals_study_form(dry_runs):
    rc, text, _ = dry_runs["configfile:demo"]
    assert rc == 0, text[-3000:]
    assert job_counts(text) == job_counts(dry_runs["demo"][1])


def test_slurm_profile_dry_run(dry_runs):
    rc, text, _ = dry_runs["slurm:length_bias:gpu"]
    assert rc == 0, text[-3000:]
    counts = job_counts(text)
    assert counts["train"] == 15 and counts["eval"] == 15  # 3 arms x 5 seeds at the gpu scale
    assert counts["probe"] == 1
    assert "warmstart" not in counts  # smollm2 is pretrained: warm_start.enabled is false at the gpu scale


def test_slurm_profile_gpu_resources(dry_runs):
    """The resources a train job would be submitted with: gpu=1 -> `sbatch --gpus=1`, plus the profile's
    partition/memory/CPUs and the Snakefile's per-scale runtime."""
    rc, text, _ = dry_runs["slurm:length_bias:gpu"]
    assert rc == 0, text[-3000:]
    block = text[text.index("rule train:") :]
    res = block[block.index("resources:") :].splitlines()[0]
    for needle in ("gpu=1", "slurm_partition=gpu", "runtime=720", "mem_mb=32000", "cpus_per_task=8"):
        assert needle in res, res


def test_slurm_profile_asks_one_gpu_per_process(dry_runs):
    """A cell with train.nproc = 2 is one job with gpu=2 (`sbatch --gpus=2`); `harness train` starts torchrun."""
    rc, text, _ = dry_runs["slurm:nproc2:gpu"]
    assert rc == 0, text[-3000:]
    block = text[text.index("rule train:") :]
    res = block[block.index("resources:") :].splitlines()[0]
    assert "gpu=2" in res, res


def test_slurm_profile_runs_a_cell_on_two_nodes(dry_runs):
    """`--config nodes=2`: each train job asks for 2 nodes of 1 GPU each (gres is a node's: sbatch --gres=gpu:1
    --nodes=2 --ntasks=2) and `mpi` (the jobstep runs the shell as it is); the shell's srun starts one
    `harness train --nnodes 2 --nproc 1` launcher a node, which reads its rank and node 0 from SLURM."""
    rc, text, _ = dry_runs["slurm:nodes2:gpu"]
    assert rc == 0, text[-3000:]
    block = text[text.index("rule train:") :]
    res = block[block.index("resources:") :].splitlines()[0]
    for needle in ("gpu=0", "gres=gpu:1", "nodes=2", "mpi=srun", "tasks=2", "tasks_per_gpu=0"):
        assert needle in res, res
    shell = block[block.index("Shell command:") :].splitlines()[0]
    assert "srun --nodes=2 --ntasks-per-node=1 --kill-on-bad-exit=1 " in shell, shell
    assert " --nnodes 2 --nproc 1 --out " in shell, shell
    one = dry_runs["slurm:nproc2:gpu"][1]
    single = one[one.index("rule train:") :]
    assert "srun" not in single[single.index("Shell command:") :].splitlines()[0]  # one node: as before
    assert "nodes=" not in single[single.index("resources:") :].splitlines()[0]
