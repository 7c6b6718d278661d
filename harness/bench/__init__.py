"""`harness bench`: the GRPO step-time breakdown of our trainer, and the same workload through TRL.

    harness bench [--models tiny-dense,smollm2-135m] [--backends hf,vllm] [--steps S] [--warmup W]
                  [--lever-sets defaults,levers] [--fixed-length] [--profile] [--threads 2]
                  [--trl | --no-trl] [--prompts N] [--group-size G] [--max-new-tokens T]

One case = (trainer, model, engine, lever set). Every case runs in its own subprocess (a fresh
interpreter: no vLLM engine, allocator or thread setting leaks from one case into the next):
- ours: `harness.train.train` on the run config of workload.py; the figures are the
  perf/* metrics of DIR/metrics.jsonl (figures.py);
- trl: benchmarks/trl_grpo.py, TRL's GRPOTrainer on the same checkpoint (saved as an HF
  folder), prompts, G, completion length, steps, lr, clip and KL settings. TRL is a
  benchmark-only dependency (requirements-bench.txt): nothing in this package imports it.

The fair protocol (protocol.py, levers.py): the same memory policy, engine, precision and attention on both
sides; untimed warm-up steps until steady, then S measured steps (10 on a GPU); the device synchronised at every
phase edge; tokens/s beside s/step (--fixed-length: exactly T tokens a response on both sides); one ours/TRL
table per lever set (defaults against defaults, every lever against every lever); --profile: one profiled step
per case (profiling.py). The first step is reported on its own (`step0_s`). The tables go to stdout
(markdown) and, with the ratios ours/TRL, to results/bench/<timestamp>.json (report.py).
Figures only: nothing here asserts a timing.
"""
