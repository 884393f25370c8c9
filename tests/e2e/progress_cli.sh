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
set -u
. "$(dirname "$0")/skip.sh"
T=${MW_TMP:?}
rm -rf "$T" && mkdir -p "$T" || exit 1
mw="$MW_EMU $MW_BIN/memwall"
f16=$MW_DATASETS/reference/tinyllama-8m.llamacpp-f16.gguf
hf=$MW_DATASETS/tinyllama-8m
[ -f "$f16" ] || skip "no $f16"
[ -f "$MW_DATASETS/corpora/calib.txt" ] || skip "no corpora/calib.txt"
command -v python3 > /dev/null 2>&1 && python3 -c 'import json' 2> /dev/null ||
    skip "no python3 with json"
head -c 20000 "$MW_DATASETS/corpora/calib.txt" > "$T/c.txt"
small=(--samples 4 --seq-len 64 -t 2)
bad=0
fail() { echo "FAIL: $*"; bad=1; }

# check_json FILE CMD KIND STRICT OUTPUT: KIND grouped|forward|none (the stage
# events expected), STRICT 1: every line must be JSON
check_json() {
    python3 - "$@" << 'EOF'
import json, sys
path, cmd, kind, strict, output = sys.argv[1:6]
errs = []
ev = []
for no, line in enumerate(open(path, encoding="utf-8", errors="strict").read().split("\n"), 1):
    if line == "":
        continue
    if not line.startswith("{"):
        if strict == "1" or not line.startswith("memwall %s:" % cmd):
            errs.append("line %d is neither JSON nor a 'memwall %s:' text line: %r" % (no, cmd, line[:120]))
        continue
    try:
        o = json.loads(line)
    except ValueError as e:
        errs.append("line %d does not parse: %s: %r" % (no, e, line[:120]))
        continue
    if not isinstance(o, dict) or o.get("cmd") != cmd:
        errs.append("line %d: not an object of cmd %s" % (no, cmd))
        continue
    ev.append(o)
if not ev:
    errs.append("no JSON events")
el = [o.get("elapsed_s") for o in ev]
if any(not isinstance(x, (int, float)) or x < 0 for x in el):
    errs.append("an event without a number elapsed_s >= 0")
elif any(b < a for a, b in zip(el, el[1:])):
    errs.append("elapsed_s decreases")
stages = [o for o in ev if o.get("event") == "stage"]
if kind == "none":
    if stages:
        errs.append("unexpected stage events")
else:
    per = (["attn_in", "attn_out", "ffn_in", "ffn_down"] if kind == "grouped" else ["forward"]) + ["layer"]
    n = stages[0]["n_layer"] if stages else 0
    if n < 1:
        errs.append("no stage events / n_layer")
    first = stages[0].get("first_layer") if stages else 0
    want = [("embed", "start", first), ("embed", "end", first)]
    for L in range(first, n):
        for s in per:
            want += [(s, "start", L), (s, "end", L)]
    got = [(o.get("stage"), o.get("state"), o.get("layer")) for o in stages]
    if got != want:
        k = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        errs.append("stage order: at event %d got %s, want %s (%d events, want %d)"
                    % (k, got[k] if k < len(got) else None, want[k] if k < len(want) else None,
                       len(got), len(want)))
    done_prev = 0
    for o in stages:
        for key in ("n_layer", "first_layer", "layers_done", "pass", "eta_s", "rate_layers_per_s", "run_s"):
            if key not in o:
                errs.append("stage event without %s: %s" % (key, o))
                break
        else:
            d = o["layers_done"]
            if o["n_layer"] != n or o["first_layer"] != first or o["pass"] != 1:
                errs.append("n_layer/first_layer/pass change: %s" % o)
            if d < done_prev or d > n - first:
                errs.append("layers_done %d after %d (n_layer %d)" % (d, done_prev, n))
            done_prev = d
            if o["stage"] == "layer" and o["state"] == "end" and d != o["layer"] - first + 1:
                errs.append("layer %d ends with layers_done %d" % (o["layer"], d))
            e, r = o["eta_s"], o["rate_layers_per_s"]
            if d == 0:
                if e is not None and not (isinstance(e, (int, float)) and e >= 0):
                    errs.append("bad eta_s before the first layer: %s" % o)
            elif not (isinstance(e, (int, float)) and e >= 0):
                errs.append("eta_s not a number >= 0 after a finished layer: %s" % o)
            if d > 0 and not (isinstance(r, (int, float)) and r > 0):
                errs.append("rate_layers_per_s not > 0 after a finished layer: %s" % o)
    if stages and (stages[-1]["layers_done"] != n - first or stages[-1]["eta_s"] != 0):
        errs.append("the last stage event: layers_done %s (want %d), eta_s %s (want 0)"
                    % (stages[-1]["layers_done"], n - first, stages[-1]["eta_s"]))
writes = [o for o in ev if o.get("event") == "write"]
if cmd in ("quant", "convert"):
    if not writes:
        errs.append("no write events")
    ti = [o.get("tensor") for o in writes]
    if any(b < a for a, b in zip(ti, ti[1:])) or any(o["tensor"] >= o["n_tensors"] for o in writes):
        errs.append("write tensor indexes: %s" % ti)
    if writes and writes[-1]["bytes_done"] != writes[-1]["bytes_total"]:
        errs.append("the last write event is not complete: %s" % writes[-1])
    if any(not isinstance(o.get("name"), str) or "eta_s" not in o for o in writes):
        errs.append("a write event without name / eta_s")
    if stages and writes and ev.index(writes[0]) < ev.index(stages[-1]):
        errs.append("write events before the end of the calibration")
elif writes:
    errs.append("unexpected write events")
d = ev[-1] if ev else {}
if d.get("event") != "done" or d.get("ok") is not True or d.get("exit") != 0 or d.get("output") != output:
    errs.append("the last event is not done/ok/exit 0/output %s: %s" % (output, d))
if sum(1 for o in ev if o.get("event") == "done") != 1:
    errs.append("not exactly one done event")
for e in errs:
    print("  " + e)
print("  %s: %d events (%d stage, %d write)" % (path.rsplit("/", 1)[-1], len(ev), len(stages), len(writes)))
sys.exit(1 if errs else 0)
EOF
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
elif [ $bad -eq 0 ]; then
    skip "util-linux script (a pty) not available"
fi
[ $bad -eq 0 ] && echo PASS
exit $bad
