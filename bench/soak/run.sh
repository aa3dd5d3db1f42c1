#!/usr/bin/env bash
# The soak: runs the default pipeline until SECONDS pass or the run ends (give it
# `--stop-after N`), sampling the process every INTERVAL seconds: resident memory (VmRSS),
# open file descriptors and threads, with the step it had reached. Prints a CSV (also
# written next to OUT_DIR as OUT_DIR.csv), then the verdict: RSS and descriptors after the
# warm-up must stay within 5% of their value at the warm-up's end.
#
# Usage: bench/soak/run.sh [SECONDS] [WARMUP_SECONDS] [-- extra `roll-flow run` arguments]
#        bench/soak/run.sh --verdict CSV [WARMUP_SECONDS]   (the verdict on a soak's CSV again)
# Defaults: 7200 s (2 hours), 600 s warm-up, 100,000 steps (the clock or --stop-after ends
# it), checkpoints kept: the last 3. INTERVAL (default 60), OUT_DIR and ROLL_FLOW_BIN (the
# binary) from the environment. The small-size soak of bench/history/soak.md:
#   INTERVAL=20 bench/soak/run.sh 7200 300 -- --stop-after 10000 \
#     --set envs.train.groups=2 --set envs.train.group_size=2 --set envs.val.groups=4
set -euo pipefail
# The verdict on a CSV: RSS's largest sample and the descriptors' median after the warm-up
# against their values at its end (a descriptor open for a write at the sampled instant is
# not a leak; a leak moves the median).
verdict() {
    awk -F, -v warmup="$2" '
        NR == 1 { next }
        $1 >= warmup && !base_rss { base_rss = $3; base_fds = $4 }
        base_rss {
            if ($3 > max_rss) max_rss = $3
            if ($4 > max_fds) max_fds = $4
            count[$4]++
            n++
        }
        END {
            if (!base_rss) { print "no sample after the warm-up"; exit 1 }
            for (v = 0; seen < (n + 1) / 2; v++) seen += count[v]
            median = v - 1
            rss_growth = (max_rss / base_rss - 1) * 100
            fds_growth = (median / base_fds - 1) * 100
            printf "after warm-up (%d samples): RSS %d -> max %d KiB (%+.1f%%); fds %d -> median %d (%+.1f%%), max %d\n",
                n, base_rss, max_rss, rss_growth, base_fds, median, fds_growth, max_fds
            if (rss_growth > 5 || fds_growth > 5) { print "FAIL: growth above 5%"; exit 1 }
            print "PASS: flat within 5%"
        }' "$1"
}
if [ "${1:-}" = "--verdict" ]; then
    verdict "$2" "${3:-600}"
    exit
fi
seconds=${1:-7200}
warmup=${2:-600}
shift $(( $# > 2 ? 2 : $# ))
[ "${1:-}" = "--" ] && shift
bin=${ROLL_FLOW_BIN:-${CARGO_TARGET_DIR:-target}/release/roll-flow}
out=${OUT_DIR:-$(mktemp -d)/soak}
"$bin" run pipelines/frozen_lake_starpo.ron --out "$out" --overwrite --steps 100000 \
    --set 'nodes.checkpoint=Checkpoint(every: 50, keep: 3)' "$@" >"$out.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
csv="$out.csv"
echo "seconds,step,rss_kib,fds,threads" | tee "$csv"
start=$(date +%s)
while kill -0 $pid 2>/dev/null; do
    now=$(( $(date +%s) - start ))
    rss=$(awk '/^VmRSS/ {print $2}' /proc/$pid/status 2>/dev/null || echo 0)
    threads=$(awk '/^Threads/ {print $2}' /proc/$pid/status 2>/dev/null || echo 0)
    fds=$(ls /proc/$pid/fd 2>/dev/null | wc -l)
    step=$( (wc -l <"$out/metrics.jsonl") 2>/dev/null || echo 0)
    echo "$now,$step,$rss,$fds,$threads" | tee -a "$csv"
    [ "$now" -ge "$seconds" ] && break
    sleep "${INTERVAL:-60}"
done
if kill -0 $pid 2>/dev/null; then
    kill -TERM $pid  # (a background job ignores SIGINT)
    wait $pid || true
elif ! wait $pid; then
    echo "the run failed; its log: $out.log" >&2
    tail -5 "$out.log" >&2
    exit 1
fi
verdict "$csv" "$warmup"
