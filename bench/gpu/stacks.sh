#!/usr/bin/env bash
# Where the host's threads are while the bench's model rows run on CUDA (run.sh's `stacks`
# part): the bench's `--only model` in the background, and every few seconds cuda-gdb
# attached for one backtrace of each thread (the GPU machines have no perf; cuda-gdb
# attaches to a program with no GPU code of its own), into SAMPLES with the seconds since
# the start. Run 7 found a bf16 training step queuing its forward for 3.9 s against 1.9 s
# of kernel time; these samples say where that thread and CubeCL's device thread are.
#   bench/gpu/stacks.sh GPU_BENCH SAMPLES [SECONDS]
set -u
bench="$1" samples="$2" seconds="${3:-100}"
gdb="$(command -v cuda-gdb || echo "${CUDA_PATH:-/usr/local/cuda}/bin/cuda-gdb")"
"$bench" --device cuda --only model &
pid=$!
start=$(date +%s)
: > "$samples"
sleep 8
while kill -0 "$pid" 2>/dev/null && [ $(($(date +%s) - start)) -lt "$seconds" ]; do
    echo "=== $(($(date +%s) - start)) s" >> "$samples"
    timeout 20 "$gdb" -q -batch -p "$pid" -ex "thread apply all bt 24" 2>&1 |
        grep -E '^(Thread|#)' | cut -c1-200 >> "$samples"
    kill -CONT "$pid" 2>/dev/null # in case a cut-off attach left it stopped
    sleep 1
done
kill "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
echo "samples: $(grep -c '^===' "$samples")"
