#!/usr/bin/env bash
# Time to a validation success target at several staleness values, one run after another
# on the same binary: each run stops once an eval reaches TARGET, or after MAX_MIN minutes.
#
#   bench/async_training/time_to.sh pipelines/frozen_lake_starpo_async.ron 0.9 15 "0 1 2"
#
# Arguments after the fourth go to every run (`--set ...`). ROLL_FLOW_BIN picks the binary
# (default: the release build); OUT_DIR keeps the runs (default: a temporary folder).
# Figures: bench/history/async_training.md.
set -euo pipefail
file=${1:?pipeline file}
target=${2:-0.9}
max_min=${3:-15}
values=${4:-0 1 2}
shift $(( $# < 4 ? $# : 4 ))
bin=${ROLL_FLOW_BIN:-${CARGO_TARGET_DIR:-target}/release/roll-flow}
out=${OUT_DIR:-$(mktemp -d)}
mkdir -p "$out"
reached() { # METRICS TARGET: "step wall success" of the first eval at or above TARGET
  python3 - "$1" "$2" <<'PY'
import json, sys
try:
    rows = [json.loads(l) for l in open(sys.argv[1])]
except (FileNotFoundError, json.JSONDecodeError):
    rows = []
for r in rows:
    if r.get("eval/val/success", -1) >= float(sys.argv[2]):
        print(r["step"], round(r["wall_s"]), r["eval/val/success"])
        break
PY
}
for n in $values; do
  dir="$out/n$n"
  rm -rf "$dir"
  "$bin" run "$file" --out "$dir" --set "nodes.rollout.staleness=$n" "$@" >/dev/null 2>"$dir.log" &
  pid=$!
  deadline=$(( $(date +%s) + 60 * max_min ))
  hit=""
  while kill -0 "$pid" 2>/dev/null && [ "$(date +%s)" -lt "$deadline" ]; do
    sleep 5
    hit=$(reached "$dir/metrics.jsonl" "$target")
    [ -n "$hit" ] && break
  done
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  if [ -n "$hit" ]; then
    read -r step wall success <<<"$hit"
    echo "staleness $n: $success at step $step after $wall s"
  else
    best=$(python3 -c "
import json,sys
r=[json.loads(l) for l in open('$dir/metrics.jsonl')]
v=[(x['eval/val/success'],x['step'],round(x['wall_s'])) for x in r if 'eval/val/success' in x]
print('best %.3f at step %d (%d s); %d steps in %d s' % (max(v)+(len(r),round(r[-1]['wall_s']))))")
    echo "staleness $n: $target not reached in $max_min min; $best"
  fi
done
