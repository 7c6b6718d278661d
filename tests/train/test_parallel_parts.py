"""The parts of a data-parallel run, on one process (the 2-process runs: test_data_parallel.py).

Per-row seeded sampling (harness/rollout/row_seeds.py), shard boundaries and the merge of the processes'
update metrics (harness/parallel.py, UpdateMetrics.merged), the gathered rollout (concat_rollouts),
and the config's refusal of train.nproc > 1 with batch seeding.
"""

from dataclasses import replace

import pytest
import torch

from harness.config import ConfigError, load_config
from harness.parallel import bounds
from harness.rollout import SamplingParams, make_backend
from harness.rollout.base import RolloutBatch
from harness.rollout.row_seeds import RowSampler, row_seed
from harness.rollout.sharded import concat_rollouts
from harness.train.diagnostics.metrics import UpdateMetrics
from harness.train.run.warmstart import initial_policy


def test_row_sampler_takes_the_token_where_the_cdf_first_exceeds_u():
    # probs (0.1, 0.2, 0.3, 0.4): cdf (0.1, 0.3, 0.6, 1.0); u from the row's own generator
    scores = torch.log(torch.tensor([[0.1, 0.2, 0.3, 0.4]]))
    u = float(torch.rand(1, generator=torch.Generator().manual_seed(7)))
    want = int((torch.tensor([0.1, 0.3, 0.6, 1.0]) > u).nonzero()[0])
    s = RowSampler([7])
    out = s(None, scores.clone())
    assert int(out.argmax()) == want and torch.isinf(out).sum() == 3 and out.max() == 0.0
    assert torch.equal(s.logps[0], torch.log_softmax(scores, -1)[0, want].reshape(1))  # the sampler's log-prob


def test_row_sampler_never_picks_a_token_without_mass():
    scores = torch.tensor([[float("-inf"), 0.0, float("-inf"), 0.0]] * 64)  # top-p kept tokens 1 and 3
    s = RowSampler(list(range(64)))
    picked = s(None, scores).argmax(-1)
    assert set(picked.tolist()) == {1, 3}


def test_row_sampler_draws_a_step_at_a_time_numbers_in_blocks():
    """The uniforms drawn `block` steps at a time (one host->device copy a block) are each row's successive
    rand(1): the tokens of every step, across block edges, are those of one draw a row and step."""
    seeds, steps = [3, 11, 12], 7
    scores = [torch.randn(len(seeds), 50, generator=torch.Generator().manual_seed(s)) for s in range(steps)]
    gens = [torch.Generator().manual_seed(s) for s in seeds]
    s = RowSampler(seeds, block=3)
    for x in scores:
        u = torch.cat([torch.rand(1, generator=g) for g in gens])  # the draw a step, row by row
        cdf = torch.softmax(x, -1).cumsum(-1)
        want = torch.searchsorted(cdf, (u * cdf[:, -1]).unsqueeze(1), right=True).squeeze(1)
        assert torch.equal(s(None, x.clone()).argmax(-1), want)


def test_row_seed_depends_on_prompt_index_and_sample_only():
    assert row_seed(5, 3, 1) == row_seed(5, 3, 1)
    assert len({row_seed(5, i, j) for i in range(20) for j in range(8)}) == 160
    assert row_seed(5, 3, 1) != row_seed(6, 3, 1)


def test_a_prompts_samples_do_not_depend_on_its_batch(fast_config):
    """rollout.seeding=prompt: generating 4 prompts at once, or 2 and 2 (as 2 processes would, the second
    shard starting at first_prompt=2), gives the same tokens and the same sampler log-probs."""
    cfg = fast_config("rollout.seeding=prompt")
    model, tok = initial_policy(cfg, torch.device("cpu"))[:2]
    be = make_backend(cfg.rollout, model, tok)
    prompts = [tok.encode(f"{a}+{b}=") for a, b in [(1, 2), (13, 45), (7, 8), (100, 23)]]
    p = SamplingParams(max_new_tokens=20, temperature=1.0, seed=123)
    whole = be.generate(prompts, 4, p)
    halves = [be.generate(prompts[:2], 4, p), be.generate(prompts[2:], 4, replace(p, first_prompt=2))]
    joined = concat_rollouts(halves, be.pad_id)
    assert joined.texts == whole.texts
    assert torch.equal(joined.response_ids, whole.response_ids)
    assert torch.allclose(joined.sampler_logp, whole.sampler_logp, atol=1e-6)
    other = be.generate(prompts[2:], 4, p)  # the same prompts at another index sample otherwise
    assert other.texts != halves[1].texts


def test_concat_rollouts_pads_to_the_widest():
    def batch(T, fill):
        return RolloutBatch(
            [[1]], torch.full((1, T), fill), torch.ones(1, T), torch.full((1, T), -0.5), torch.tensor([False]), ["x"]
        )

    out = concat_rollouts([batch(2, 5), batch(4, 6)], pad_id=0)
    assert out.response_ids.tolist() == [[5, 5, 0, 0], [6, 6, 6, 6]]
    assert out.response_mask.tolist() == [[1, 1, 0, 0], [1, 1, 1, 1]]
    assert out.sampler_logp[0].tolist() == [-0.5, -0.5, 0.0, 0.0]


def test_shard_bounds_cover_every_row_once():
    for n in (0, 1, 5, 8, 33):
        for parts in (1, 2, 3, 8):
            b = bounds(n, parts)
            assert b[0] == 0 and b[-1] == n and all(b[i] <= b[i + 1] for i in range(parts))
            assert max(b[i + 1] - b[i] for i in range(parts)) - min(b[i + 1] - b[i] for i in range(parts)) <= 1


def test_merged_update_metrics_equal_one_accumulator():
    """Token-weighted means, maxima and the summed (already normalised) losses of two processes' rows
    merge into what one accumulator over all rows gives."""
    rows = [
        ({"clip/frac": 0.1, "ratio/max": 1.2, "loss/policy": 0.3}, 10.0),
        ({"clip/frac": 0.4, "ratio/max": 1.5, "loss/policy": -0.1}, 30.0),
    ]
    one = UpdateMetrics()
    for m, w in rows:
        one.add(m, w)
    one.end_minibatch()
    parts = []
    for m, w in rows:
        p = UpdateMetrics()
        p.add(m, w)
        p.end_minibatch()
        parts.append(p)
    got, want = UpdateMetrics.merged(parts).result(), one.result()
    assert got == pytest.approx(want)
    assert want["clip/frac"] == pytest.approx((0.1 * 10 + 0.4 * 30) / 40) and want["loss/policy"] == pytest.approx(0.2)


def test_nproc_needs_per_prompt_seeding():
    with pytest.raises(ConfigError, match=r"train.nproc=2 with rollout.seeding='batch'.*rollout.seeding=prompt"):
        load_config("experiments/runs/smoke.yaml", ["train.nproc=2"])
    assert load_config("experiments/runs/smoke.yaml", ["train.nproc=2", "rollout.seeding=prompt"]).train.nproc == 2


def test_fsdp_config_rules():
    """train.parallel: ddp | fsdp, named when wrong; fsdp refuses what it does not combine with, before any model loads."""
    base = ["train.nproc=2", "rollout.seeding=prompt"]
    assert load_config("experiments/runs/smoke.yaml", [*base, "train.parallel=fsdp"]).train.parallel == "fsdp"
    with pytest.raises(ConfigError, match=r"train.parallel.*'ddp' or 'fsdp'"):
        load_config("experiments/runs/smoke.yaml", [*base, "train.parallel=zero3"])
    with pytest.raises(ConfigError, match=r"train.parallel='fsdp' with model.lora.*train.parallel=ddp"):
        load_config("experiments/runs/smoke.yaml", [*base, "train.parallel=fsdp", "model.lora={r: 8}"])
    with pytest.raises(ConfigError, match=r"train.parallel='fsdp' with train.grad_share_every=2"):
        load_config("experiments/runs/smoke.yaml", [*base, "train.parallel=fsdp", "train.grad_share_every=2"])


@pytest.mark.parametrize(
    "rows, micro, want",
    [
        (7, 1, {0: [1, 1, 1, None], 1: [1, 1, 1, 1]}),  # 3 and 4 rows: rank 0 pads its fourth micro-batch
        (7, None, {0: [3], 1: [4]}),  # the whole share: one forward each
        (1, None, {0: [None], 1: [1]}),  # one row: rank 0 has none and pads
        (8, 2, {0: [2, 2], 1: [2, 2]}),  # equal shares: no pad
    ],
)
def test_lockstep_micro_batches_pad_the_shorter_share(rows, micro, want, monkeypatch):
    """Batch.my_micro_batches(lockstep=True) (FSDP): each process's share in micro-batches, then None (a pad) up
    to the count of the process with the most; without lockstep, no pad."""
    import harness.parallel as parallel
    from harness.train.core.batch import Batch

    batch = Batch(
        [[1]] * rows,
        torch.zeros(rows, 2, dtype=torch.long),
        torch.ones(rows, 2),
        torch.ones(rows, 2),
        torch.zeros(rows, 2),
    )
    monkeypatch.setattr(parallel, "world", lambda: 2)
    for r in (0, 1):
        monkeypatch.setattr(parallel, "rank", lambda r=r: r)
        got = [None if p is None else len(p) for p in batch.my_micro_batches(micro, lockstep=True)]
        assert got == want[r], (r, got)
        assert None not in [None if p is None else len(p) for p in batch.my_micro_batches(micro)]
