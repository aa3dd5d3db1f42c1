#!/usr/bin/env bash
# Data-parallel speed on one machine: STEPS steps of FILE (default the FrozenLake StarPO
# file) as 1 process x 1 thread, 2 processes x 1 thread (-n 2) and 1 process x 2 threads
# (the ordinary run), ROUNDS rounds in turn; prints each run's steps/s and the bytes the
# collective calls sent per step.
#   bench/data_parallel/run.sh [FILE] [STEPS] [ROUNDS] [--set KEY=VALUE ...]
# "x 1 thread": RAYON_NUM_THREADS=1 and one inference loop per process.
set -euo pipefail
FILE=${1:-pipelines/frozen_lake_starpo.ron}
STEPS=${2:-40}
ROUNDS=${3:-3}
BIN=${ROLL_FLOW:-${CARGO_TARGET_DIR:-target}/release/roll-flow}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
one_thread=(--set nodes.rollout.inference_loops=1)
common=(--steps 1700 --stop-after "$STEPS" --overwrite "${@:4}")
rate() { # DIR: steps/s from the first to the last record (the first step's load excluded)
  python3 - "$1/metrics.jsonl" <<'PY'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
wall = r[-1]["wall_s"] - r[0]["wall_s"]
sent = [v for rec in r for k, v in rec.items() if k.endswith("sent_bytes")]
per_step = sum(sent) / len(r) if sent else 0
print(f"{(len(r) - 1) / wall:.3f} steps/s  {per_step / 1e6:.2f} MB sent per step by worker 0")
PY
}
for round in $(seq 1 "$ROUNDS"); do
  RAYON_NUM_THREADS=1 "$BIN" run "$FILE" "${common[@]}" "${one_thread[@]}" --out "$OUT/a" >/dev/null 2>&1
  echo "round $round  1 process x 1 thread:   $(rate "$OUT/a")"
  RAYON_NUM_THREADS=1 "$BIN" run "$FILE" "${common[@]}" "${one_thread[@]}" -n 2 --out "$OUT/b" >/dev/null 2>&1
  echo "round $round  2 processes x 1 thread: $(rate "$OUT/b")"
  "$BIN" run "$FILE" "${common[@]}" --out "$OUT/c" >/dev/null 2>&1
  echo "round $round  1 process x 2 threads:  $(rate "$OUT/c")"
done
