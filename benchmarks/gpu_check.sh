#!/usr/bin/env bash
# The ready GPU check (benchmarks/gpu_check.py; benchmarks/README.md "A ready GPU check"). On a lent GPU machine,
# from the repository root, with .gpucheck/ carried (`make gpu-check-pack` here):
#     bash benchmarks/gpu_check.sh                 # GPU-ONLY: ~7 minutes, results under $OUT
#     bash benchmarks/gpu_check.sh --cpu-smoke     # anywhere: tiny sizes, seconds
# Installs the carried wheels where TRL is missing (into /tmp/gpucheck-site), reads SmolLM2's tokenizer from the
# carried .gpucheck/models, keeps everything offline.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
if [ -d .gpucheck/wheels ] && ! "$PY" -c "import trl" 2>/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/gpucheck-site \
    .gpucheck/wheels/*.whl || { echo "gpu_check: installing .gpucheck/wheels failed" >&2; exit 3; }
  export PYTHONPATH=/tmp/gpucheck-site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
if [ -f .gpucheck/models/smollm2-135m/tokenizer.json ]; then
  export HARNESS_MODEL_CACHE=${HARNESS_MODEL_CACHE:-$PWD/.gpucheck/models}
fi
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec "$PY" benchmarks/gpu_check.py "$@"
