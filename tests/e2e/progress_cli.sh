#!/usr/bin/env bash
# --progress=auto|none|json of `memwall quant --corpus`, `memwall
# calib` and `memwall convert`, on tinyllama-8m with a small corpus run:
#   json: every line starting with '{' parses as JSON and every other line is
#     a "memwall CMD:" text line (with -q: every line is JSON); the stage
#     events come in calib's order (embed, then per layer attn_in, attn_out,
#     ffn_in, ffn_down — quant's methods — or forward — plain calib — and
#     layer, each start then end), layers 0..n_layer-1, layers_done counts
#     them up to n_layer, elapsed_s never decreases, eta_s is there on every
#     stage event (null only before the first layer is done, >= 0 after, 0
#     at the end); quant and convert have write events (tensor indexes not
#     decreasing, the last with bytes_done == bytes_total); a final done
#     event (ok, exit 0, the output path);
#   none: no progress (with -q: stderr empty);
#   auto with stderr in a file: no escape codes, no carriage returns;
#   auto on a terminal (a pty from util-linux `script`): the line shows
#     "layer N/M" and "ETA";
#   an unknown mode: exit 2.
# No wall-clock time is asserted.
. "$(dirname "$0")/common.sh"
mw="$MW_EMU $MW_BIN/memwall"
f16=$MW_DATASETS/reference/tinyllama-8m.llamacpp-f16.gguf
hf=$MW_DATASETS/tinyllama-8m
[ -f "$f16" ] || skip "no $f16"
[ -f "$MW_DATASETS/corpora/calib.txt" ] || skip "no corpora/calib.txt"
command -v python3 > /dev/null 2>&1 && python3 -c 'import json' 2> /dev/null ||
    skip "no python3 with json"
head -c 20000 "$MW_DATASETS/corpora/calib.txt" > "$T/c.txt"
small=(--samples 4 --seq-len 64 -t 2)

# check_json FILE CMD KIND STRICT OUTPUT: KIND grouped|forward|none (the stage
# events expected), STRICT 1: every line must be JSON
check_json() {
    python3 "$MW_SRC/tests/lib/check_progress.py" "$@"
}

# --- an unknown mode: exit 2 ---
for c in "quant $f16 -o $T/u.gguf --preset Q8_0" "calib $f16 --corpus $T/c.txt -o $T/u.imatrix" \
         "convert $hf -o $T/u.gguf"; do
    $mw $c --progress=bogus > /dev/null 2> "$T/u.err"; rc=$?
    [ $rc -eq 2 ] || fail "${c%% *} --progress=bogus: exit $rc, expected 2"
    grep -q "unknown --progress 'bogus'" "$T/u.err" || fail "${c%% *}: no message for --progress=bogus"
done
[ -e "$T/u.gguf" ] || [ -e "$T/u.imatrix" ] && fail "a usage error wrote an output"

# --- json: quant --corpus (method stages, write events), with notices ---
$mw quant "$f16" -o "$T/j.gguf" --preset Q8_0 --corpus "$T/c.txt" --method gptq "${small[@]}" \
    --progress=json > "$T/j.out" 2> "$T/j.err" || { cat "$T/j.err"; fail "quant --progress=json"; }
check_json "$T/j.err" quant grouped 0 "$T/j.gguf" || fail "quant --progress=json events"
grep -q '^memwall quant: wrote' "$T/j.err" || fail "quant --progress=json: the summary line is gone"
[ -s "$T/j.out" ] && fail "quant --progress=json wrote to stdout"
# with -q: JSON only
$mw quant "$f16" -o "$T/jq.gguf" --preset Q8_0 --corpus "$T/c.txt" --method rtn "${small[@]}" \
    -q --progress json 2> "$T/jq.err" || { cat "$T/jq.err"; fail "quant -q --progress json"; }
check_json "$T/jq.err" quant grouped 1 "$T/jq.gguf" || fail "quant -q --progress json events"

# --- json: calib (one fused pass per layer), quant without --corpus, convert ---
$mw calib "$f16" --corpus "$T/c.txt" -o "$T/c.imatrix" "${small[@]}" -q --progress=json \
    2> "$T/cj.err" || { cat "$T/cj.err"; fail "calib --progress=json"; }
check_json "$T/cj.err" calib forward 1 "$T/c.imatrix" || fail "calib --progress=json events"
$mw quant "$f16" -o "$T/p.gguf" --preset Q8_0 -q --progress=json 2> "$T/p.err" ||
    { cat "$T/p.err"; fail "quant --preset --progress=json"; }
check_json "$T/p.err" quant none 1 "$T/p.gguf" || fail "quant --preset --progress=json events"
if [ -f "$hf/config.json" ]; then
    $mw convert "$hf" -o "$T/cv.gguf" -q --progress=json 2> "$T/cv.err" ||
        { cat "$T/cv.err"; fail "convert --progress=json"; }
    check_json "$T/cv.err" convert none 1 "$T/cv.gguf" || fail "convert --progress=json events"
fi
# a failing run ends with done/ok false and its exit status
$mw calib "$f16" --corpus "$T/no-such.txt" -o "$T/x.imatrix" --progress=json 2> "$T/f.err"; rc=$?
last=$(grep '^{' "$T/f.err" | tail -n 1)
case $last in
*'"event":"done"'*'"ok":false,"exit":'$rc*) ;;
*) fail "failed calib (exit $rc): last event '$last'" ;;
esac

# --- none: no progress at all ---
$mw quant "$f16" -o "$T/n.gguf" --preset Q8_0 --corpus "$T/c.txt" --method rtn "${small[@]}" \
    --progress=none 2> "$T/n.err" || { cat "$T/n.err"; fail "quant --progress=none"; }
grep -q '^{' "$T/n.err" && fail "--progress=none printed JSON"
grep -q 'ETA' "$T/n.err" && fail "--progress=none printed a progress line"
grep -q '^memwall quant: wrote' "$T/n.err" || fail "--progress=none: the summary line is gone"
$mw calib "$f16" --corpus "$T/c.txt" -o "$T/n.imatrix" "${small[@]}" -q --progress=none \
    2> "$T/nq.err" || fail "calib -q --progress=none"
[ -s "$T/nq.err" ] && { cat "$T/nq.err"; fail "calib -q --progress=none wrote to stderr"; }

# --- auto with stderr in a file: no escape codes, no carriage returns ---
$mw quant "$f16" -o "$T/a.gguf" --preset Q8_0 --corpus "$T/c.txt" --method rtn "${small[@]}" \
    2> "$T/a.err" || { cat "$T/a.err"; fail "quant (auto, stderr a file)"; }
LC_ALL=C grep -q $'[\r\033]' "$T/a.err" && fail "escape codes or CRs in a file (quant)"
grep -q '^{' "$T/a.err" && fail "auto printed JSON into a file"
$mw calib "$f16" --corpus "$T/c.txt" -o "$T/a.imatrix" "${small[@]}" 2> "$T/ac.err" ||
    fail "calib (auto, stderr a file)"
LC_ALL=C grep -q $'[\r\033]' "$T/ac.err" && fail "escape codes or CRs in a file (calib)"

# --- auto on a terminal: util-linux script gives the command a pty ---
if script -qec true /dev/null > /dev/null 2>&1 < /dev/null; then
    for c in "quant $f16 -o $T/t.gguf --preset Q8_0 --corpus $T/c.txt --method rtn" \
             "calib $f16 --corpus $T/c.txt -o $T/t.imatrix"; do
        name=${c%% *}
        script -qec "$mw $c ${small[*]}" /dev/null < /dev/null > "$T/tty-$name.txt" 2>&1 ||
            { cat "$T/tty-$name.txt"; fail "$name on a pty"; continue; }
        # the redrawn line: "\r\033[K<name>: layer N/M <stage>  elapsed ...  ETA ..."
        tr '\r' '\n' < "$T/tty-$name.txt" | LC_ALL=C sed 's/\x1b\[K//g' > "$T/tty-$name.lines"
        grep -Eq "^$name: layer [0-9]+/[0-9]+ [a-z_]+  elapsed [0-9hms]+  ([0-9.]+|--) layers/(s|min)  ETA ([0-9hms]+|--)" \
            "$T/tty-$name.lines" || { cat "$T/tty-$name.lines"; fail "$name: no 'layer N/M ... ETA' line on a pty"; }
        LC_ALL=C grep -q $'\033\\[K' "$T/tty-$name.txt" || fail "$name: the line is not redrawn in place"
        # --progress=none on the pty: no line
        script -qec "$mw $c ${small[*]} --progress=none" /dev/null < /dev/null > "$T/ttyn-$name.txt" 2>&1 ||
            fail "$name --progress=none on a pty"
        grep -q 'ETA' "$T/ttyn-$name.txt" && fail "$name --progress=none drew a line on a pty"
    done
elif [ $fails -eq 0 ]; then
    skip "util-linux script (a pty) not available"
fi
finish
