#!/usr/bin/env bash
# README's second command: sets up what the tests need, then runs every test suite in one
# cargo build.
#
# 1. Checks the system tools the tests call (Rust, Python 3 with venv, Graphviz's `dot`, a
#    Vulkan driver for the wgpu tests) and stops at once, naming what to install.
# 2. Makes the project's Python environment, `.venv` (or $ROLL_FLOW_VENV), with
#    `python3 -m venv`: no system pip, so it works where pip is "externally managed"
#    (PEP 668). Installs python/ there with its `test` extra (gem-llm, gymnasium,
#    openenv-core, uvicorn); skipped while the venv imports them all and
#    python/pyproject.toml is unchanged.
# 3. Points the tests at that interpreter (ROLL_FLOW_PYTHON; tests/common/mod.rs reads it)
#    and runs `cargo test --workspace --features wgpu`: every crate's tests, the kernels'
#    wgpu suite and tests/gpu_pipelines.rs, compiled once with one feature set.
#
# Arguments go to `cargo test`, e.g. `./test.sh --test remote_envs`, `./test.sh --lib` or
# `./test.sh -- gae` (a test-name filter). `-p`/`--package` is refused: a package of its own
# would be built with another feature set, a second build. `.ci/run` calls this script.
set -euo pipefail
cd "$(dirname "$0")"

missing() {
    echo "test.sh: $1" >&2
    exit 1
}

for arg in "$@"; do
    [ "$arg" = -- ] && break
    case "$arg" in
        -p | -p* | --package | --package=*) missing "the whole workspace runs in one build; pick tests with --test NAME, --lib or a name filter after --, not $arg" ;;
    esac
done
command -v cargo >/dev/null 2>&1 || missing "cargo is not on PATH: install Rust 1.92 or newer (https://rustup.rs)"
command -v python3 >/dev/null 2>&1 || missing "python3 is not on PATH: apt-get install python3 python3-venv"
command -v dot >/dev/null 2>&1 || missing "Graphviz's \`dot\` is not on PATH (the \`graph\` command's tests render with it): apt-get install graphviz"
if [ "$(uname -s)" = Linux ] && [ -z "${VK_ICD_FILENAMES:-}${VK_DRIVER_FILES:-}" ]; then
    found=""
    for dir in /usr/share/vulkan/icd.d /usr/local/share/vulkan/icd.d /etc/vulkan/icd.d; do
        if compgen -G "$dir/*.json" >/dev/null; then found=1; fi
    done
    [ -n "$found" ] || missing "no Vulkan driver for the wgpu tests (on a machine without a GPU, Mesa's software Vulkan): apt-get install mesa-vulkan-drivers"
fi

venv="${ROLL_FLOW_VENV:-$PWD/.venv}"
python="$venv/bin/python"
stamp="$venv/roll-flow-pyproject.toml"
modules="import gem, gymnasium, openenv.core, uvicorn, roll_flow_env"
if ! { [ -x "$python" ] && cmp -s python/pyproject.toml "$stamp" && "$python" -c "$modules" >/dev/null 2>&1; }; then
    if [ ! -x "$python" ]; then
        echo "test.sh: making the tests' Python environment in $venv" >&2
        made="$(python3 -m venv "$venv" 2>&1)" || {
            rm -rf "$venv"
            echo "$made" >&2
            missing "python3 -m venv failed (on Debian and Ubuntu the venv module is a package of its own): apt-get install python3-venv"
        }
    fi
    echo "test.sh: installing python/ with its test extra (gem-llm, gymnasium, openenv-core, uvicorn) into $venv" >&2
    "$python" -m pip install --quiet --disable-pip-version-check --no-cache-dir --editable "./python[test]"
    cp python/pyproject.toml "$stamp"
fi
export ROLL_FLOW_PYTHON="$python"

exec cargo test --workspace --features wgpu --no-fail-fast "$@"
