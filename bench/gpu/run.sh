#!/usr/bin/env bash
# The GPU checks and figures (bench/README.md, "GPU"), as one command on a lent GPU machine
# from the repository root, with the binaries bench/gpu/build.sh made here:
#   bench/gpu/run.sh [cuda|wgpu|cpu] [BIN_ARCHIVE] [OUT_DIR]
# Defaults: cuda, .bin/gpu.tar.xz, $OUT (the device tool's result folder). Nothing is
# installed or downloaded; models are built on the device with random weights. Each part
# has its own time limit, the whole stays within BUDGET seconds (default 480; PARTS names
# the parts to run, default all: kernels hf_parity pipelines bench step profile; `probe`,
# `ncu`, `matmul` and `stacks` are asked for by name; BENCH_ONLY=kernels or model limits
# the bench to those rows), and every result is a small text or JSON file in OUT_DIR (the
# device tool brings back 8 files at most; the default parts write 8):
#   summary.txt        the GPU, driver and CUDA paths found; each part's exit status and
#                      seconds
#   probe.txt, probe/gpu_bench.json, kernel_sources.log
#                      the log-prob kernel's raw outputs on small host-made logits against
#                      f64, the bf16 log-prob and the PPO kernels once, and the CUDA
#                      source CubeCL generated for each kernel it ran
#   matmul.txt (`matmul`, asked for by name on CUDA)
#                      bf16 products at the model's sizes with each cubek routine
#   stacks.txt, stack_samples.txt (`stacks`, asked for by name on CUDA)
#                      every thread's backtrace every few seconds while the model rows run
#                      (bench/gpu/stacks.sh)
#   ncu.txt, ncu_report.txt (`ncu`, asked for by name on CUDA)
#                      Nsight Compute's sections for each RL kernel launched once at full
#                      size (`gpu --only once`)
#   kernels.txt        the kernel suite: every kernel against the burn-ops reference; then
#                      what one decode step copies between host and device, with its
#                      tokens against the CPU's (model_transfers; one file, as the device
#                      tool brings back 8)
#   hf_parity.txt      the HF fixture's logits against transformers' (max |Δlogit|)
#   pipelines.txt      the FrozenLake pipelines' first step on the GPU against the CPU
#   gpu_bench.json     kernel bandwidth (the RL kernels, the model's fused ops, decode
#                      attention), unfused speed-ups, 0.5B-shape tokens/s and FLOP/s (bf16
#                      at issue 59's targets first, then f32) and where their seconds go
#                      (host queuing, sync wait, CubeCL's device threads' CPU time);
#                      rewritten after each part
#   bench.txt          the same as tables
#   step.txt           one FrozenLake step at the 0.5B shape: each node's seconds, then the
#                      step's metrics.jsonl record
#   profile.txt        the bf16 target-shape training step and generation once more with
#                      CubeCL's profiler on: each kernel's device time summed by name between
#                      syncs (the top rows and the total of each sync's table; the tables
#                      of the last training step and of the 128-token generation are the
#                      ones to read)
# With `wgpu` the same runs on a wgpu build (lavapipe on a machine without a GPU) at small
# sizes, which is how the script is checked before GPU minutes are spent on it; `cpu` runs
# the bench and the step on the CPU at small sizes with whatever build is given.
set -u
cd "$(dirname "$0")/../.."
device="${1:-cuda}"
archive="${2:-.bin/gpu.tar.xz}"
out="${3:-${OUT:-/tmp/roll-flow-gpu}}"
budget="${BUDGET:-480}"
parts=" ${PARTS:-kernels hf_parity pipelines bench step profile} "
mkdir -p "$out"
start=$(date +%s)
bin="$(mktemp -d)"
summary="$out/summary.txt"
: > "$summary"
# The cubecl.toml files below (the PTX cache, the loggers) go with the script, however it ends.
trap 'rm -f cubecl.toml' EXIT

tar -C "$bin" -xJf "$archive" 2>/dev/null ||
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$archive" "$bin"
# shellcheck disable=SC1091
. "$bin/paths.env"

# The test binaries start roll-flow and read the fixtures at the paths they were built with.
if [ "$(cd "$WORKSPACE" 2>/dev/null && pwd -P)" != "$(pwd -P)" ]; then
    mkdir -p "$(dirname "$WORKSPACE")"
    rm -rf "$WORKSPACE" && ln -s "$(pwd -P)" "$WORKSPACE"
fi
if [ "$(readlink -f "$CARGO_BIN_EXE" 2>/dev/null)" != "$(readlink -f "$bin/roll-flow")" ]; then
    mkdir -p "$(dirname "$CARGO_BIN_EXE")"
    cp "$bin/roll-flow" "$CARGO_BIN_EXE"
fi

if [ "$device" = cuda ]; then
    {
        nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv
        for dir in "${CUDA_PATH:-}" /usr/local/cuda /usr/local/cuda-13.0 /opt/cuda; do
            if [ -n "$dir" ] && [ -e "$dir/include/cuda_runtime.h" ]; then
                export CUDA_PATH="$dir"
                break
            fi
        done
        echo "CUDA_PATH=${CUDA_PATH:-none found}"
        nvrtc="$(ldconfig -p | grep -o '/[^ ]*libnvrtc.so.13[^ ]*' | head -1)"
        [ -z "$nvrtc" ] && nvrtc="$(ls "${CUDA_PATH:-/usr/local/cuda}"/lib64/libnvrtc.so.13* 2>/dev/null | head -1)"
        echo "nvrtc=${nvrtc:-none found}"
        if [ -n "$nvrtc" ]; then
            export LD_LIBRARY_PATH="$(dirname "$nvrtc")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        fi
        "${CUDA_PATH:-/usr/local/cuda}/bin/nvcc" --version | tail -2
    } >> "$summary" 2>&1
    # Kernels compiled by NVRTC once, cached for the later processes, and for the next call
    # while the machine stays warm (the device tool keeps git-ignored paths such as .bin/
    # between calls): in run 6 a second call compiled every kernel again, which left the
    # step and profile parts past their limits.
    mkdir -p .bin
    cache_config="$(printf '[compilation]\ncache = { file = "%s" }\n' "$PWD/.bin/ptx-cache")"
    echo "$cache_config" > cubecl.toml
    gpu_device="Cuda(0)"
    bench_size=""
    shape="Tiny(layers: 24, dim: 896, heads: 14, kv_heads: 2, ffn_dim: 4864, vocab: 151936, rope_theta: 1e6)"
    step_sets=()
else
    echo "device $device: a check of this script, at small sizes" >> "$summary"
    gpu_device="$([ "$device" = wgpu ] && echo Wgpu || echo Cpu)"
    bench_size="--small"
    shape="Tiny(layers: 2, dim: 64, heads: 4, kv_heads: 2, ffn_dim: 256, vocab: 4096)"
    step_sets=(--set envs.train.groups=2 --set envs.train.group_size=2 --set envs.train.max_turns=2)
fi

# part NAME LIMIT_SECONDS COMMAND...: runs COMMAND with its output in OUT/NAME.txt, within
# LIMIT and what is left of the budget.
part() {
    local name="$1" limit="$2"
    shift 2
    [[ "$parts" == *" $name "* ]] || return 0
    local left=$((budget - ($(date +%s) - start)))
    [ "$limit" -gt "$left" ] && limit="$left"
    if [ "$limit" -le 5 ]; then
        echo "$name skipped: budget spent" >> "$summary"
        return
    fi
    local t0=$(date +%s)
    timeout "$limit" "$@" > "$out/$name.txt" 2>&1
    local rc=$?
    echo "$name exit $rc in $(($(date +%s) - t0)) s (limit $limit s)" >> "$summary"
    tail -c 12000 "$out/$name.txt" > "$out/$name.tmp" && mv "$out/$name.tmp" "$out/$name.txt"
}

if [[ "$parts" == *" probe "* ]] && [ "$device" = cuda ]; then
    printf '[compilation]\nlogger = { level = "full", file = "%s" }\n' "$out/kernel_sources.log" > cubecl.toml
fi
part probe 60 "$bin/gpu" --device "$device" --only probe --out "$out/probe"
[ "$device" = cuda ] && echo "$cache_config" > cubecl.toml
# Nsight Compute's counters for each RL kernel launched once at full size (`ncu`, asked for
# by name): speed of light, memory, occupancy, launch and warp-stall sections, into
# ncu_report.txt.
if [[ "$parts" == *" ncu "* ]] && [ "$device" = cuda ]; then
    ncu_bin="$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu "${CUDA_PATH:-/usr/local/cuda}"/bin/ncu 2>/dev/null | head -1)"
    part ncu 150 "${ncu_bin:-ncu}" --clock-control none --log-file "$out/ncu_report.txt" \
        -k 'regex:logprob|ppo' --section SpeedOfLight --section MemoryWorkloadAnalysis \
        --section Occupancy --section LaunchStats --section WarpStateStats \
        "$bin/gpu" --device cuda --only once
fi
part kernels 90 sh -c '"$0" --test-threads 1; k=$?; "$1" --test-threads 1; exit $((k | $?))' \
    "$bin/kernels" "$bin/model_transfers"
part hf_parity 40 "$bin/model_hf_parity" --test-threads 1 --nocapture
part pipelines 150 "$bin/gpu_pipelines" --test-threads 1 --nocapture
part bench 260 "$bin/gpu" --device "$device" $bench_size ${BENCH_ONLY:+--only "$BENCH_ONLY"} --out "$out"
# bf16 products with each cubek routine (`matmul`, asked for by name on CUDA).
if [[ "$parts" == *" matmul "* ]] && [ "$device" = cuda ]; then
    part matmul 150 "$bin/gpu" --device cuda --only matmul
fi
# Host backtraces while the model rows run (`stacks`, asked for by name on CUDA), into
# stack_samples.txt.
if [[ "$parts" == *" stacks "* ]] && [ "$device" = cuda ]; then
    part stacks 110 bench/gpu/stacks.sh "$bin/gpu" "$out/stack_samples.txt" 100
fi
run_dir="$(mktemp -d)"
part step 150 "$bin/roll-flow" run bench/gpu/frozen_lake_0.5b_shape.ron --steps 1 --out "$run_dir/step" \
    --set "device=$gpu_device" --set "models.policy.arch=$shape" --set "models.reference.arch=$shape" \
    "${step_sets[@]}"
[ -f "$run_dir/step/metrics.jsonl" ] && { echo "--- metrics.jsonl"; cat "$run_dir/step/metrics.jsonl"; } >> "$out/step.txt"
rm -rf "$run_dir"
# CubeCL's profiler: each kernel's time to a log, and at each sync a table of the times
# summed by name (sorted, with a total). Kept: every table's header, top 30 rows and total,
# a kernel's name without its argument and runtime types, cut to 120 characters.
profile_log="$bin/profile.log"
{
    [ "$device" = cuda ] && echo "$cache_config"
    printf '[profiling]\nlogger = { level = "basic", file = "%s" }\n' "$profile_log"
} > cubecl.toml
part profile 180 "$bin/gpu" --device "$device" $bench_size --only profile
if [ -f "$profile_log" ]; then
    awk -F'|' 'BEGIN { row = -1 }
         /^\|⎺/ { table++; row = 0; print "--- sync " table; next }
         /^\|⎼/ { next }
         /^\|⎯/ { row = -1; next }
         row >= 0 && NF >= 6 {
             name = ""
             for (i = 2; i < NF - 3; i++) {
                 f = $i; gsub(/^ +| +$/, "", f)
                 if (f ~ /^(TensorArgs|DynamicScalar|DynamicSize|__[A-Za-z]+|[A-Za-z]+Runtime)$/) continue
                 name = name (name == "" ? "" : " ") f
             }
             line = "| " substr(name, 1, 120) " |" $(NF - 3) "|" $(NF - 2) "|" $(NF - 1) "|"
             gsub(/  +/, " ", line)
             if (row <= 30 || name == "Total") print line
             row++
         }' "$profile_log" >> "$out/profile.txt"
fi
rm -rf "$bin"
echo "total $(($(date +%s) - start)) s" >> "$summary"
cat "$summary"
