"""What a run records of the Hugging Face Hub ids it loads: each one's repo, revision, commit and snapshot folder.

    hub_record(cfg)   # {"model": {"repo_id": "Qwen/Qwen2.5-0.5B-Instruct", "revision": "main", "commit": "...",
                      #  "folder": ".../snapshots/<commit>"}, "data_train": {..., "config": "main"}}

Written to run.json (each attempt's `hub`) and logged as MLflow params (hub.model.commit, ...): the commit
named as model.revision (task.data.revision) loads the same weights (rows) again. {} when the run names no
Hub id, so a run of built-in names and folders records nothing here.
"""

from __future__ import annotations

from harness.models.hub import hub_snapshot, looks_like_hub_id
from harness.tasks.dataset.hub import is_hub_dataset


def hub_record(cfg) -> dict:
    """{what: its snapshot's record} of every Hub id of the run (the policy, critic_init, reward models, data)."""
    m, t = cfg.model, cfg.task
    out = {}
    if looks_like_hub_id(m.name):
        out["model"] = hub_snapshot(m.name, m.revision, "model.name").record()
    if m.critic_init and looks_like_hub_id(m.critic_init):
        out["critic_init"] = hub_snapshot(m.critic_init, "main", "model.critic_init").record()
    for i, r in enumerate(t.rewards or []):
        if r.model and looks_like_hub_id(r.model):
            out[f"reward_model_{i}"] = hub_snapshot(r.model, "main", f"task.rewards[{i}].model").record()
    d = t.data if t.name == "dataset" else None
    for file in ("train", "eval"):
        if d is not None and is_hub_dataset(getattr(d, file)):
            snap = hub_snapshot(getattr(d, file), d.revision, f"task.data.{file}", repo_type="dataset")
            out[f"data_{file}"] = {**snap.record(), "config": d.config}
    return out
