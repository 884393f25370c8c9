#!/usr/bin/env bash
# The report in a real browser: Debian's headless Chromium loads the page
# made by quant --report for tinyllama-8m at Q4_K_M from disk; its DOM (as
# the browser parsed it) holds a map cell per matrix with the file's type,
# and screenshots at phone width (390 px) and desktop width are not blank
# (many colours, ink on at least 5% of the pixels; tests/lib/png_stats.py).
# Also the page of llama.cpp's F16 (no memwall.* keys).
. "$(dirname "$0")/common.sh"
have_python || skip "python3 missing"
CHROME=$(command -v chromium || command -v chromium-browser)
[ -n "$CHROME" ] || skip "chromium missing (scripts/deps.sh installs it)"
HF=$(model_dir tinyllama-8m)
F16=$(ref tinyllama-8m.llamacpp-f16.gguf)
[ -n "$HF" ] && [ -n "$F16" ] || skip "tinyllama-8m or its llama.cpp F16 missing"

# chrome WIDTH ARGS...: headless, its profile in $T, no network needed
chrome() {
    local w=$1
    shift
    timeout 120 "$CHROME" --headless --no-sandbox --disable-gpu --hide-scrollbars \
        --no-first-run --user-data-dir="$T/profile" --window-size="$w" "$@" 2> "$T/chrome.log"
}

run 0 quant "$HF" -o "$T/q4.gguf" --preset Q4_K_M -q --report "$T/q4.html"
run 0 report "$F16" -o "$T/f16.html"

chrome 1000,1400 --dump-dom "file://$T/q4.html" > "$T/dom.html" || fail "chromium --dump-dom exit $?"
n=0
while read -r name type; do
    [ "$type" = f32 ] && continue
    n=$((n + 1))
    grep -q "<g class=\"cell\" data-tensor=\"$name\" data-type=\"${type^^}\">" "$T/dom.html" ||
        fail "DOM: no cell $name ${type^^}"
done < <(mwgguf types "$T/q4.gguf")
[ "$n" -eq 58 ] || fail "$n matrices, want 58"
grep -q '<table id="fits">' "$T/dom.html" || fail "DOM: no plan table"
grep -q '<dd id="bpw">4.997</dd>' "$T/dom.html" || fail "DOM: bits per weight 4.997"

for spec in "390,1400 q4" "1000,1400 q4" "390,1400 f16"; do
    set -- $spec
    png="$T/$2-${1%%,*}.png"
    chrome "$1" --screenshot="$png" "file://$T/$2.html" > /dev/null || fail "screenshot $png: exit $?"
    python3 "$PYLIB/png_stats.py" "$png" --width "${1%%,*}" --min-colours 16 --min-ink 0.05 ||
        fail "screenshot $png is blank or the wrong width"
done
finish
