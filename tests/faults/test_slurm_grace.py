"""The SLURM profile gives train jobs grace time: SIGTERM some minutes before the time limit
(sbatch --signal through the executor plugin's slurm_extra, which the plugin accepts)."""

from __future__ import annotations

import re
from types import SimpleNamespace

import yaml


def test_train_jobs_get_sigterm_before_the_time_limit():
    prof = yaml.safe_load(open("profiles/slurm/config.yaml"))
    extra = prof["set-resources"]["train"]["slurm_extra"]
    m = re.fullmatch(r"'--signal=TERM@(\d+)'", extra)
    assert m and int(m.group(1)) >= 120, extra
    assert prof["retries"] >= 1
    from snakemake_executor_plugin_slurm.validation import validate_slurm_extra

    validate_slurm_extra(SimpleNamespace(resources=SimpleNamespace(slurm_extra=extra)))  # not a forbidden option
