#!/usr/bin/env bash
# `memwall quant` end to end, without llama.cpp (tests/e2e/quant_peer.sh
# compares with llama.cpp):
#  - usage errors (exit 2) and bad sources (exit 1, nothing written)
#  - every preset on tinyllama-8m: exit 0, `memwall verify --deep` decodes
#    every tensor of every type, provenance keys present
#  - determinism: byte-identical files for --threads 1, 2 and 8 (with and
#    without imatrix)
#  - imatrix: llama.cpp's GGUF imatrix changes the tensor data; a legacy
#    .dat made from it gives the same tensor data; wrong names warn, missing
#    entries are notices, a wrong length and a truncated file are errors
#    naming what is wrong (exit 1, no output)
#  - an HF checkpoint directory quantizes to the same bytes as `memwall
#    convert` followed by `memwall quant`
# Usage: quant_cli.sh [presets|imatrix]: one part (CTest runs them as
# quant_cli and quant_cli_imatrix, side by side); no argument: both.
# Where the preset is incidental to a check (overrides, the imatrix readers,
# the HF source) it is Q3_K_M (q3_K, q4_K, q5_K and q6_K, per-layer rules;
# 2.4x cheaper than Q4_K_M under qemu) or, for the .dat files that only have
# to load, Q4_0 (which weighs with the imatrix too).
source "$(dirname "${BASH_SOURCE[0]}")/quant_common.sh"
PART=${1:-all}
case $PART in all | presets | imatrix) ;; *) echo "usage: quant_cli.sh [presets|imatrix]"; exit 2 ;; esac
part() { [ "$PART" = all ] || [ "$PART" = "$1" ]; }

[ -n "$F16" ] || { skip "no tinyllama-8m.llamacpp-f16.gguf"; }
DET_PRESETS="Q4_K_M Q2_K Q4_0" DET_IM_THREADS="1 2 8"
# under qemu and the sanitizers (MW_LIGHT=1): a few presets (every block
# family) only; the native release build runs them all. Thread determinism
# under qemu: Q3_K_M (its mix holds Q4_K_M's q4_K and q6_K) at -t 1 and 8
# against -t 2, Q3_K_M with the imatrix at -t 1 and 8 against the default;
# under the sanitizers none here: that build's faults_determinism (quick)
# runs the same comparisons (Q4_K_M, and Q3_K_M with the imatrix, -t 1
# against 8).
if [ -n "$MW_EMU" ] || [ "${MW_LIGHT:-0}" = 1 ]; then
    PRESETS="Q8_0 Q4_K_M Q3_K_M Q2_K Q4_0"
    EXTRA_PRESETS="Q5_1 IQ4_NL"
    DET_PRESETS="Q3_K_M" DET_IM_THREADS="1 8"
    [ -z "$MW_EMU" ] && DET_PRESETS="" DET_IM_THREADS=""
fi

if part presets; then
    # --- usage ---
    run 2 quant || finish
    has "$err" "missing SRC" "no args"
    run 2 quant "$F16" -o "$T/x.gguf"
    has "$err" "missing --preset" "no preset"
    run 2 quant "$F16" -o "$T/x.gguf" --preset Q4_K_X
    has "$err" "unknown preset 'Q4_K_X'" "bad preset"
    run 2 quant "$F16" --preset Q4_K_M
    has "$err" "missing -o" "no output"
    run 2 quant "$F16" -o "$T/x.gguf" --preset Q4_K_M --threads 0
    run 2 quant "$F16" -o "$T/x.gguf" --preset Q4_K_M --type-override 'attn_v'
    has "$err" "not REGEX=TYPE" "override without ="
    run 2 quant "$F16" -o "$T/x.gguf" --preset Q4_K_M --type-override 'attn_(v=q8_0'
    has "$err" "bad regex" "bad regex"
    run 2 quant "$F16" -o "$T/x.gguf" --preset Q4_K_M --type-override 'attn_v=q9_0'
    has "$err" "unknown type 'q9_0'" "bad type"
    run 2 quant "$F16" -o "$T/x.gguf" --preset Q4_K_M --bogus
    run 0 quant --help
    has "$out" "--imatrix FILE" "help"
    [ -e "$T/x.gguf" ] && fail "a usage error left $T/x.gguf"

    # --- bad sources ---
    run 3 quant "$T/nonexistent.gguf" -o "$T/x.gguf" --preset Q4_K_M
    head -c 100000 "$F16" > "$T/cut.gguf"
    run 1 quant "$T/cut.gguf" -o "$T/x.gguf" --preset Q4_K_M
    has "$err" "cut.gguf" "truncated source"
    [ -e "$T/x.gguf" ] && fail "a failed quant left $T/x.gguf"

    # --- every preset: exit 0, verify --deep, provenance ---
    for p in $PRESETS $EXTRA_PRESETS; do
        run 0 quant "$F16" -o "$T/$p.gguf" --preset "$p" -t 2 -q || continue
        run 0 verify --deep "$T/$p.gguf" || echo "$err" | head -5
        run 0 inspect "$T/$p.gguf"
        has "$out" "memwall.quant.preset" "$p provenance"
        has "$out" "\"$p\"" "$p preset name"
        has "$out" '"rtn"' "$p method"
    done
    echo "all presets written and verified with --deep"

    # --- determinism (with the imatrix: the imatrix part) ---
    for p in $DET_PRESETS; do
        for t in 1 8; do
            run 0 quant "$F16" -o "$T/d-$p-$t.gguf" --preset "$p" -t $t -q
            cmp -s "$T/d-$p-$t.gguf" "$T/$p.gguf" || fail "$p: --threads $t differs from --threads 2"
        done
    done
    [ -n "$DET_PRESETS" ] && echo "determinism: presets $DET_PRESETS at threads 1, 2, 8: byte-identical"

    # --- dry run ---
    run 0 quant "$F16" --preset Q4_K_M --dry-run
    has "$out" "blk.0.attn_v.weight" "dry run"
    has "$out" "q6_K" "dry run types"
    [ "$(echo "$out" | grep -c ' q6_K ')" -eq 9 ] || fail "dry run: expected 9 q6_K tensors"

    # --- overrides (over Q3_K_M's per-layer ffn_down and attn rules) ---
    run 0 quant "$F16" -o "$T/ov.gguf" --preset Q3_K_M -q --type-override 'ffn_down=q8_0' \
        --type-override 'attn_(q|k)=q5_K'
    run 0 inspect "$T/ov.gguf"
    has "$out" "memwall.quant.type_overrides" "override provenance"
    [ "$(echo "$out" | grep -c 'ffn_down.weight *q8_0')" -eq 8 ] || fail "override: ffn_down not q8_0"
    [ "$(echo "$out" | grep -cE 'attn_[qk].weight *q5_K')" -eq 16 ] || fail "override: attn_q/k"
fi

# --- imatrix (Q3_K_M: q3_K, q4_K, q5_K and q6_K all weigh with it) ---
if part imatrix && [ -n "$IMAT" ]; then
    run 0 quant "$F16" -o "$T/im.gguf" --preset Q3_K_M --imatrix "$IMAT"
    has "$err" "note: tensor 'output.weight': no imatrix entry" "imatrix notice"
    run 0 inspect "$T/im.gguf"
    has "$out" '"imatrix"' "imatrix method"
    has "$out" "memwall.quant.imatrix_xxh3" "imatrix hash"
    has "$out" "quantize.imatrix.chunks_count" "llama.cpp imatrix keys"
    [ -f "$T/Q3_K_M.gguf" ] || run 0 quant "$F16" -o "$T/Q3_K_M.gguf" --preset Q3_K_M -t 2 -q
    if have_python; then
        mwgguf same-data "$T/im.gguf" "$T/Q3_K_M.gguf" && fail "the imatrix changed no tensor data"
    else
        cmp -s "$T/im.gguf" "$T/Q3_K_M.gguf" && fail "the imatrix changed nothing"
    fi
    # determinism: -t 1, 2, 8 (qemu: 1, 8) against the default thread count
    for t in $DET_IM_THREADS; do
        run 0 quant "$F16" -o "$T/di-$t.gguf" --preset Q3_K_M --imatrix "$IMAT" -t $t -q
        cmp -s "$T/im.gguf" "$T/di-$t.gguf" || fail "imatrix: --threads $t differs from the default"
    done
    [ -n "$DET_IM_THREADS" ] &&
        echo "determinism: imatrix at threads $DET_IM_THREADS and the default: byte-identical"

    head -c 5000 "$IMAT" > "$T/cut-im.gguf"
    run 1 quant "$F16" -o "$T/x.gguf" --preset Q4_K_M --imatrix "$T/cut-im.gguf"
    has "$err" "cut-im.gguf" "truncated imatrix names the file"
    run 3 quant "$F16" -o "$T/x.gguf" --preset Q4_K_M --imatrix "$T/nonexistent.dat"
    run 1 quant "$F16" -o "$T/x.gguf" --preset Q4_K_M --imatrix "$F16"
    has "$err" "missing imatrix metadata" "model as imatrix"
    [ -e "$T/x.gguf" ] && fail "a failed quant left $T/x.gguf"

    if have_python; then
        # legacy .dat (ncall 1: the very same values) -> the same tensor data
        mwgguf imatrix-dat "$IMAT" "$T/im.dat" --trailer
        run 0 quant "$F16" -o "$T/im-dat.gguf" --preset Q3_K_M --imatrix "$T/im.dat" -q
        run 0 inspect "$T/im-dat.gguf"
        has "$out" 'quantize.imatrix.dataset' "legacy dataset name"
        mwgguf same-data "$T/im.gguf" "$T/im-dat.gguf" || fail "legacy .dat: tensor data differs"
        # ncall 7 (values * 7 / 7): still loads and quantizes
        mwgguf imatrix-dat "$IMAT" "$T/im7.dat" --ncall 7
        run 0 quant "$F16" -o "$T/im7.gguf" --preset Q4_0 --imatrix "$T/im7.dat" -q
        # a name the model lacks: warning, still written
        mwgguf imatrix-dat "$IMAT" "$T/bogus.dat" --bogus
        run 0 quant "$F16" -o "$T/bogus.gguf" --preset Q4_0 --imatrix "$T/bogus.dat"
        has "$err" "warning: imatrix entry 'blk.99.bogus.weight' names no tensor" "bogus name"
        # a wrong length: error naming tensor, expected and actual
        mwgguf imatrix-dat "$IMAT" "$T/badlen.dat" --badlen blk.2.ffn_down.weight
        run 1 quant "$F16" -o "$T/x.gguf" --preset Q4_K_M --imatrix "$T/badlen.dat"
        has "$err" "tensor 'blk.2.ffn_down.weight'" "bad length: tensor"
        has "$err" "has 767 values, expected 768" "bad length: lengths"
        # truncated legacy files
        sz=$(stat -c %s "$T/im.dat")
        for cut in 3 4 11 100 2000 $((sz / 2)) $((sz - 13)) $((sz - 1)); do
            head -c $cut "$T/im.dat" > "$T/cut.dat"
            run 1 quant "$F16" -o "$T/x.gguf" --preset Q4_K_M --imatrix "$T/cut.dat" ||
                echo "(cut at $cut)"
            has "$err" "cut.dat" "truncated .dat ($cut) names the file"
        done
        [ -e "$T/x.gguf" ] && fail "a failed quant left $T/x.gguf"
    fi
fi

# --- HF checkpoint directory, converted on the fly (with the imatrix part) ---
HF=$(model_dir tinyllama-8m)
if part imatrix && [ -n "$HF" ] && "$MEMWALL" help convert > /dev/null 2>&1; then
    run 0 quant "$HF" -o "$T/hf-q3.gguf" --preset Q3_K_M -q
    run 0 convert "$HF" -o "$T/hf-f16.gguf" -q
    run 0 quant "$T/hf-f16.gguf" -o "$T/hf2-q3.gguf" --preset Q3_K_M -q
    cmp -s "$T/hf-q3.gguf" "$T/hf2-q3.gguf" ||
        fail "quant of the HF dir differs from convert + quant"
    run 0 verify --deep "$T/hf-q3.gguf"
    ls "$T"/hf-q3.gguf.kv-* > /dev/null 2>&1 && fail "a temp KV file was left behind"
    echo "HF dir: same bytes as convert + quant"
fi
finish
