#!/usr/bin/env bash
# Runs every fuzz target (or those in $TARGETS) for SECONDS each (default 600) and prints
# what each did.
# Needs cargo-fuzz (`cargo install cargo-fuzz`); on a stable toolchain RUSTC_BOOTSTRAP=1
# lets it build, without a sanitizer (`-s none`: the targets look for panics, and the
# code is safe Rust). New inputs go to fuzz/corpus/TARGET (not committed); the seeds are
# fuzz/seeds/TARGET (and the shipped pipelines for `pipeline`); a crash lands in
# fuzz/artifacts/TARGET, to be fixed and kept as a regression input under fuzz/seeds.
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-600}"
export RUSTC_BOOTSTRAP=1
cargo fuzz build -s none -O
targets="${TARGETS:-pipeline set_override env_protocol env_actions chat_template model_dir tokenizer batch_dump gguf}"
for target in $targets; do
    mkdir -p "corpus/$target" "seeds/$target"
    seeds="seeds/$target"
    [ "$target" = pipeline ] && seeds="../pipelines"
    echo "== $target, ${seconds}s"
    cargo fuzz run -s none -O "$target" "corpus/$target" "$seeds" -- \
        -max_total_time="$seconds" -print_final_stats=1 2>&1 |
        grep -E "stat::number_of_executed_units|stat::peak_rss_mb|Done [0-9]+ runs|ERROR|panicked" || true
done
