#!/usr/bin/env bash
# Steps per second of one pipeline at staleness 0, 1 and 2, one after another on the same
# binary, ROUNDS times (alternating), each run STEPS steps of the file's own schedule
# (`--stop-after`); prints one line per run and the medians.
#
#   bench/async_training/run.sh pipelines/frozen_lake_starpo_async.ron 100 2
#
# ROLL_FLOW_BIN picks the binary (default: the release build); OUT_DIR keeps the runs
# (default: a temporary folder). Figures: bench/history/async_training.md.
set -euo pipefail
file=${1:?pipeline file}
steps=${2:-100}
rounds=${3:-1}
bin=${ROLL_FLOW_BIN:-${CARGO_TARGET_DIR:-target}/release/roll-flow}
out=${OUT_DIR:-$(mktemp -d)}
declare -A rates
for round in $(seq 1 "$rounds"); do
  for n in 0 1 2; do
    dir="$out/n${n}_r${round}"
    rm -rf "$dir"
    "$bin" run "$file" --stop-after "$steps" --out "$dir" \
      --set "nodes.rollout.staleness=$n" >/dev/null 2>"$dir.log"
    rate=$(python3 - "$dir/metrics.jsonl" "$steps" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
first, last = rows[0], rows[-1]
# from the end of the first step, so model loading and the first rollout are left out
print(f"{(len(rows) - 1) / (last['wall_s'] - first['wall_s']):.3f}")
PY
)
    rates[$n]="${rates[$n]:-} $rate"
    echo "round $round, staleness $n: $rate steps/s"
  done
done
for n in 0 1 2; do
  median=$(printf '%s\n' ${rates[$n]} | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  echo "staleness $n: median $median steps/s over $rounds round(s) (${rates[$n]# })"
done
