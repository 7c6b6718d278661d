#!/bin/bash
# The shared-core benchmark of benchmarks/README.md ("A shared core"): the thread governor vs
# PASSIVE vs libgomp's spin, quiet and with one busy process, pinned to two cores so that a
# bigger machine measures what a 2-core one sees. Prints one line per run (s/step, steps >= 1).
#   bash benchmarks/threads.sh                # 3 repetitions
#   REPS=4 CORES=0,1 bash benchmarks/threads.sh
# The `unset` case with a busy process takes ~30 s a step (the cliff): run it with FULL=1.
set -euo pipefail
OUT=${OUT:-results/bench/threads}
mkdir -p "$OUT"
HARNESS=${HARNESS:-harness}
for rep in $(seq 1 "${REPS:-3}"); do
  for busy in 0 1; do
    for pol in ${POLS:-inherit passive unset}; do
      if [ "$busy" = 1 ] && [ "$pol" = unset ] && [ -z "${FULL:-}" ]; then continue; fi
      taskset -c "${CORES:-0,1}" $HARNESS bench --models tiny-dense --backends hf --prompts 16 --steps 3 --no-trl \
        --threads 2 --busy "$busy" --omp-wait-policy "$pol" --out-dir "$OUT" > "$OUT/log_${rep}_${busy}_${pol}.txt" 2>&1
      python3 - "$OUT" "$rep" "$busy" "$pol" <<'PY'
import json, pathlib, sys
out, rep, busy, pol = sys.argv[1:]
f = sorted(pathlib.Path(out).glob("*.json"))[-1]
d = json.loads(f.read_text())
r = d["rows"][0]
print(f"rep {rep} busy={busy} {pol:8s} step_s={r['step_s']:.3f} rollout_s={r['rollout_s']:.3f} "
      f"update_s={r['update_s']:.3f}  ({d['meta']['omp_wait_policy']})")
PY
    done
  done
done
