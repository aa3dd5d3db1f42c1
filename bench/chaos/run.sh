#!/usr/bin/env bash
# The chaos test at full size: 20 kill -9 at random moments over a small FrozenLake run,
# each followed by `roll-flow run --resume`; the final weights and metrics.jsonl (timing
# fields aside) must equal an uninterrupted run's (tests/chaos_resume.rs; CI runs 4 kills).
#   bench/chaos/run.sh [KILLS]
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/roll-flow-target}"
CHAOS_KILLS="${1:-20}" cargo test --release --test chaos_resume -- --nocapture
