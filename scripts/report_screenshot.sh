#!/usr/bin/env bash
# Regenerates docs/report.png, the README's picture of `memwall report`:
# tinyllama-8m quantized to 3 bits per weight with a calibration corpus
# (a mix of i-quants and k-quants), its report rendered by headless Chromium
# at 900 px wide (the top of the page: summary, type mix, type map).
# Usage: scripts/report_screenshot.sh [BUILD_DIR] (default build). Needs
# chromium (scripts/deps.sh). About a minute of CPU.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
MEMWALL=$BUILD/tools/memwall
CHROME=$(command -v chromium || command -v chromium-browser || true)
[ -x "$MEMWALL" ] || { echo "no $MEMWALL: build first" >&2; exit 2; }
[ -n "$CHROME" ] || { echo "chromium missing (scripts/deps.sh)" >&2; exit 2; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
# relative paths, so the page shows no machine's folders
cd "$ROOT"
"$MEMWALL" quant datasets/tinyllama-8m -o "$W/tinyllama-8m-3bpw.gguf" --bpw 3 \
    --corpus datasets/corpora/calib.txt --samples 16 --seq-len 128 --no-probes -q
cd "$W"
"$MEMWALL" report tinyllama-8m-3bpw.gguf -o report.html
"$CHROME" --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
    --user-data-dir="$W/profile" --window-size=900,1310 --screenshot="$W/report.png" \
    "file://$W/report.html" 2> /dev/null
cp "$W/report.png" "$ROOT/docs/report.png"
echo "wrote docs/report.png ($(stat -c %s "$ROOT/docs/report.png") bytes)"
