"""`harness bench`: the GRPO step-time breakdown of our trainer, and the same workload through TRL.

    harness bench [--models tiny-dense,smollm2-135m] [--backends hf,vllm] [--steps 3] [--threads 2]
                  [--trl | --no-trl] [--prompts N] [--group-size G] [--max-new-tokens T]

One case = (trainer, model, backend). Every case runs in its own subprocess (a fresh
interpreter: no vLLM engine, allocator or thread setting leaks from one case into the next):
- ours: `harness.train.train` on the run config of workload.py; the figures are the
  perf/* metrics of DIR/metrics.jsonl (figures.py);
- trl: benchmarks/trl_grpo.py, TRL's GRPOTrainer on the same checkpoint (saved as an HF
  folder), prompts, G, completion length, steps, lr, clip and KL settings. TRL is a
  benchmark-only dependency (requirements-bench.txt): nothing in this package imports it.

Step 0 is warm-up (lazy initialisation; ours also runs the initial eval in it): it is
reported on its own (`step0_s`) and left out of the means. The table goes to stdout
(markdown) and, with the ratios ours/TRL, to results/bench/<timestamp>.json (report.py).
Figures only: nothing here asserts a timing.
"""
