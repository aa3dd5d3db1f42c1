#!/usr/bin/env bash
# Builds what bench/gpu/run.sh runs on a GPU machine (which has no registry and no
# network), here, into BIN_DIR (default .bin/gpu, git-ignored), as one compressed archive
# under the 64 MiB a device call may carry:
#   bench/gpu/build.sh [cuda|wgpu] [BIN_DIR]
# roll-flow itself, the kernel suite (every kernel against the burn-ops reference), the HF
# parity test of the model, the GPU pipeline test (first step against the CPU), and the
# `gpu` bench (kernel and model figures), all built with `--features FEATURE`, stripped.
set -euo pipefail
cd "$(dirname "$0")/../.."
feature="${1:-cuda}"
bin="${2:-.bin/gpu}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/roll-flow-target}"
# cudarc picks the CUDA API it binds from nvcc, which this machine lacks: bind CUDA 13.0,
# the lent GPU machines' toolkit (driver 580); NVRTC 13.0 is found there at run time.
export CUDARC_CUDA_VERSION="${CUDARC_CUDA_VERSION:-13000}"

# The executable a `cargo ... --message-format=json` build produced for target `name`.
executable() {
    python3 -c '
import json, sys
name = sys.argv[1]
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == name and m.get("executable"):
        print(m["executable"])' "$1" | tail -1
}

mkdir -p "$bin"
rm -f "$bin"/*
# One cargo call for the test and bench targets, so their features unify once (each
# package alone would build the burn stack again with its own feature set); it builds the
# roll-flow binary the pipeline test starts, too.
cargo test --release --no-run --message-format=json \
    -p roll-flow -p roll-flow-kernels -p roll-flow-model --features "roll-flow/$feature" \
    --test kernels --test model_hf_parity --test model_transfers --test gpu_pipelines \
    --bench gpu > "$bin/targets.json"
for target in kernels model_hf_parity model_transfers gpu_pipelines gpu; do
    cp "$(executable "$target" < "$bin/targets.json")" "$bin/$target"
done
rm "$bin/targets.json"
cp "$CARGO_TARGET_DIR/release/roll-flow" "$bin/roll-flow"
# The bench keeps its symbols (not its debug info), so that run.sh's `stacks` part names
# the functions in its backtraces.
strip --strip-debug "$bin/gpu"
strip "$bin"/kernels "$bin"/model_* "$bin"/gpu_pipelines "$bin"/roll-flow
# The test binaries find roll-flow and the fixtures at the paths they were built with.
{
    echo "CARGO_BIN_EXE=$CARGO_TARGET_DIR/release/roll-flow"
    echo "WORKSPACE=$PWD"
} > "$bin/paths.env"
tar -C "$bin" -cJf "$bin.tar.xz" .
ls -l "$bin" "$bin.tar.xz"
