#!/usr/bin/env bash
# Steps per second of one pipeline at staleness 0, 1 and 2, one after another on the same
# binary, ROUNDS times (alternating), each run STEPS steps of the file's own schedule
# (`--stop-after`); prints one line per run and the medians.
#
#   bench/async_training/run.sh pipelines/frozen_lake_starpo_async.ron 100 2
#   RAYON_NUM_THREADS=1 bench/async_training/run.sh FILE 100 2 --set nodes.rollout.inference_loops=1
#
# Arguments after the third go to every run (`--set ...`); the environment is passed on.
# ROLL_FLOW_BIN picks the binary (default: the release build); OUT_DIR keeps the runs
# (default: a temporary folder). Figures: bench/history/async_training.md.
set -euo pipefail
file=${1:?pipeline file}
steps=${2:-100}
rounds=${3:-1}
shift $(( $# < 3 ? $# : 3 ))
bin=${ROLL_FLOW_BIN:-${CARGO_TARGET_DIR:-target}/release/roll-flow}
out=${OUT_DIR:-$(mktemp -d)}
mkdir -p "$out"
declare -A rates
for round in $(seq 1 "$rounds"); do
  for n in 0 1 2; do
    dir="$out/n${n}_r${round}"
    rm -rf "$dir"
    "$bin" run "$file" --stop-after "$steps" --out "$dir" \
      --set "nodes.rollout.staleness=$n" "$@" >/dev/null 2>"$dir.log"
    read -r rate phases < <(python3 - "$dir/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
first, last = rows[0], rows[-1]
# from the end of the first step, so model loading and the first rollout are left out
rate = (len(rows) - 1) / (last["wall_s"] - first["wall_s"])
def mean(key):
    values = [r[key] for r in rows[1:] if key in r]
    return sum(values) / len(values) if values else float("nan")
keys = ["rollout/play_seconds", "old_logprob/seconds", "actor_step/seconds",
        "rollout/trainer_idle_seconds", "rollout/rollout_idle_seconds"]
print(f"{rate:.3f}", " ".join(f"{k.split('/')[0][:7]}:{k.split('/')[1].replace('_seconds', '')}={mean(k):.3f}s" for k in keys))
PY
)
    rates[$n]="${rates[$n]:-} $rate"
    echo "round $round, staleness $n: $rate steps/s; means per step: $phases"
  done
done
for n in 0 1 2; do
  median=$(printf '%s\n' ${rates[$n]} | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  echo "staleness $n: median $median steps/s over $rounds round(s) (${rates[$n]# })"
done
