#!/usr/bin/env bash
# Calibration through Gemma 4 (calib/calib_g4fwd.c) on the fixtures of
# tests/fixtures/mk_family_fixture.py, converted to F32 GGUF by memwall
# convert:
#  - gemma4e2b (E2B's layout: per-layer inputs, 2 shared-KV layers of 5,
#    double-wide MLPs in them, head sizes 32 / 64) and gemma4dense (31B's:
#    none of those; its full layer's attn_v dropped, as the 31B's
#    attention_k_eq_v leaves it out: v is wk's output): check_calib_gemma4
#    (calib's forward = the runtime's logits, from the GGUF and from the
#    checkpoint directory, the same bits for threads / batches / callbacks,
#    the imatrix entries, exact AWQ folds);
#  - memwall calib: an imatrix with an entry for every matrix the layers
#    multiply (k and v only where a layer owns them, inp_gate, proj,
#    per_layer_model_proj); from the checkpoint directory the same file;
#    with --llamacpp-chunks, llama.cpp's imatrix of the fixture within its
#    F16 KV cache's rounding and, with an F32 cache, within F32 rounding
#    (tests/fixtures/llamacpp_ref/<kind>-calib32*.imatrix.gguf);
#  - quant --corpus --method gptq+round and awq: GPTQ and learned rounding
#    on every layer matrix Q4_0 takes (inp_gate included), verify --deep, the
#    AWQ log says
#    why v -> attn_output is skipped, and (with the peer) llama.cpp loads the
#    file;
#  - gemma4e2bw (gemma4e2b's layout, per-layer input 32 wide, 3 layers):
#    gptq+round reaches blk.N.proj (Q4_0 instead of gemma4e2b's F16
#    fallback), per_layer_model_proj stays F32 (never quantized), verify
#    --deep, llama.cpp loads the file;
#  - gemma4moe (26B-A4B's experts beside the dense MLP): see its section;
# and what calibration does not run yet, refused by name (exit 1, no file):
# gpt-oss (mk_gptoss_gguf.py; it still quantizes without a corpus).
# Usage: calib_gemma4.sh CHECK_CALIB_GEMMA4. Exit 77 when python3 or the
# tokenizer files are missing.
check=${1:?usage: calib_gemma4.sh CHECK_CALIB_GEMMA4}
. "$(dirname "$0")/common.sh"
have_python || skip "no python3"
fetch_tokenizers
scratch_on_shm calib_gemma4
head -c 6000 "$MW_DATASETS/corpora/calib.txt" > "$T/corpus.txt"
C=(--corpus "$T/corpus.txt" --samples 2 --seq-len 32 -t 2)
peer=
if [ -z "${MW_FAMILY_NO_PEER:-}" ]; then
    peer=$(bash "$MW_SRC/tests/peer/setup.sh" 2> "$T/peer-setup.log" | tail -n 1) || peer=
    [ -x "$peer" ] || { echo "note: no llama.cpp peer: its load checks are left out"; peer=; }
fi

# refused WHAT MODEL LABEL [QUANT_ARGS...]: calib and quant --corpus exit 1
# naming WHAT and write nothing
refused() {
    local what=$1 m=$2 l=$3 o f0=$fails
    shift 3
    for o in im k; do rm -f "$T/$o.gguf"; done
    run 1 calib "$m" "${C[@]}" -q -o "$T/im.gguf" &&
        has "$err" "calibration does not run $what yet" "$l: calib"
    run 1 quant "$m" -o "$T/k.gguf" --preset Q4_K_M "$@" "${C[@]}" -q &&
        has "$err" "calibration does not run $what yet" "$l: quant --corpus"
    for o in im k; do
        [ -e "$T/$o.gguf" ] && fail "$l: a refused run left $o.gguf"
    done
    [ "$fails" -eq "$f0" ] && echo "  $l: refused (calib, quant --corpus)"
}

# gemma4moe (26B-A4B's layout, mk_family_fixture.py gemma4moe: 8 experts,
# top-2, beside the dense MLP in 4 layers; the router on its own input, the
# experts' fused ffn_gate_up_exps; the full layer without attn_v):
#  - check_calib_gemma4 (logits vs the runtime, from the GGUF and the
#    checkpoint directory; threads / batches / callbacks; the entries with
#    the router's and the experts'; exact folds, none into ffn_norm from an
#    expert);
#  - llama.cpp's imatrix (bench/llamacpp_imatrix_qwen35.sh gemma4moe) per
#    expert: the same 39 entries and the same counts per expert (the routing
#    agrees); F16 KV cache: max 1.24e-2, mean 3.2e-4; F32 cache without flash
#    attention: max 2.7e-3, mean 6.1e-6. Both maxima are in ffn_down_exps:
#    an expert's slice averages the few rows routed to it (16 on average
#    here, 64 for a dense matrix), and its input is GELU, which ggml's CPU
#    looks up in an F16 table (the dense kinds' F32 maximum, 1.1e-3, is
#    ffn_down's too). Allowed: 2.5e-2 / 8e-4 and 5e-3 / 6e-5;
#  - quant --method gptq+round: learned rounding on 89 matrices (4 x (q o
#    gate up down) + k, v less the full layer's v = 27 dense, 62 of the 96
#    expert matrices: the other 34 have fewer routed rows than a quarter of
#    their input width, importance-weighted rounding: experts=gptq:62,rtn:34);
#    awq: attn_norm -> q/k/v in 4 of 4 layers; ffn_norm -> the dense gate/up
#    and pre_ffw_norm_2 -> ffn_gate_up_exps (one scale for every expert's
#    gate and up, searched on all rows) 7 of the 8 (layer 0's experts: no
#    gain); up -> down in 31 of 36 (4 x (8 experts + the dense MLP)); the
#    same bytes with -t 1 and -t 2; quant --size
#    --corpus --method gptq; each verify --deep and (with the peer)
#    llama.cpp loads it.
k=gemma4moe
echo "== $k"
d=$T/hf-$k g=$T/$k-f32.gguf f0=$fails
if python3 "$FIX/mk_family_fixture.py" $k "$d" > "$T/mk.log" 2>&1 &&
    run 0 convert "$d" -o "$g" --type f32 -q; then
    ref=$MW_SRC/tests/fixtures/llamacpp_ref/$k-calib32
    if [ -f "$ref.imatrix.gguf" ] && [ -f "$ref-kvf32.imatrix.gguf" ]; then
        if run 0 calib "$g" "${C[@]}" --llamacpp-chunks -q -o "$T/lc.imatrix"; then
            r=$(mwgguf imatrix-cmp-experts "$T/lc.imatrix" "$ref.imatrix.gguf" --max-rel 2.5e-2 \
                --mean-rel 8e-4 --counts-rel 0) || fail "$k: vs llama-imatrix: $r"
            echo "  vs llama-imatrix (F16 KV cache): $r"
            r=$(mwgguf imatrix-cmp-experts "$T/lc.imatrix" "$ref-kvf32.imatrix.gguf" \
                --max-rel 5e-3 --mean-rel 6e-5 --counts-rel 0) ||
                fail "$k: vs llama.cpp's imatrix with an F32 KV cache: $r"
            echo "  vs llama.cpp, F32 KV cache: $r"
        fi
    else
        fail "$k: no llama.cpp imatrix kept ($ref*.imatrix.gguf: bench/llamacpp_imatrix_qwen35.sh $k)"
    fi
    "$check" "$k" "$g" "$d" > "$T/check.txt" 2>&1 || { cat "$T/check.txt"; fail "$k: check_calib_gemma4"; }
    grep 'logits differ\|folds moved' "$T/check.txt" | sed 's/^/  /'
    if run 0 calib "$g" "${C[@]}" -q -o "$T/$k.imatrix"; then
        mwgguf types "$T/$k.imatrix" > "$T/im.txt" 2>&1 || fail "$k: imatrix unreadable"
        n=$(grep -c '\.in_sum2 ' "$T/im.txt")
        # 4 x (q o gate up down ffn_gate_inp ffn_gate_up_exps ffn_down_exps)
        # + k, v less the full layer's v
        [ "$n" -eq 39 ] || fail "$k: $n imatrix entries, expected 39"
        for e in blk.0.ffn_gate_inp blk.3.ffn_gate_up_exps blk.3.ffn_down_exps blk.1.ffn_gate; do
            grep -q "^$e.weight.in_sum2 " "$T/im.txt" || fail "$k: the imatrix has no $e"
        done
        echo "  imatrix: $n entries"
        run 0 calib "$d" "${C[@]}" -q -o "$T/$k-hf.imatrix" &&
            r=$(mwgguf cmp "$T/$k-hf.imatrix" "$T/$k.imatrix") &&
            echo "  imatrix from the HF directory: $r" || fail "$k: the HF directory's imatrix: $r"
    fi
    rm -rf "$d"
    for meth in gptq+round awq size; do
        o=$T/$k-$meth.gguf
        a=(--preset Q4_0 --method $meth)
        # --size: a little above the smallest file (the 262144-row tied
        # token_embd is most of it), so some matrices go below F16
        [ $meth = size ] && a=(--size 34300000 --method gptq --no-probes)
        if run 0 quant "$g" -o "$o" "${a[@]}" "${C[@]}"; then
            ql=$err
            run 0 verify --deep "$o" || fail "$k $meth: verify --deep"
            echo "  $meth: $(echo "$ql" | grep 'memwall quant: wrote' | sed 's/.*gguf (//; s/ in [0-9.]*s$//')"
            mp=$(mwgguf kv "$o" memwall.quant.method_params)
            case $meth in
            gptq+round)
                has "$ql" "round: learned rounding on 89 tensors" "$k: gptq+round"
                has "$mp" "experts=gptq:62,rtn:34,unrouted:0" "$k: gptq+round's experts"
                echo "    $mp" ;;
            awq)
                has "$ql" "attn_norm -> q/k/v: folded in 4 of 4 layers" "$k: awq"
                has "$ql" "ffn_norm -> gate/up, pre_ffw_norm_2 -> ffn_gate_up_exps (one scale for all experts): folded in 7 of 8" "$k: awq"
                has "$ql" "up -> ffn_down: folded in 31 of 36 experts" "$k: awq"
                # the same bytes with one thread (the experts' common Hessian,
                # the searches, the folds)
                run 0 quant "$g" -o "$T/$k-t1.gguf" "${a[@]}" --corpus "$T/corpus.txt" \
                    --samples 2 --seq-len 32 -t 1 -q &&
                    { cmp -s "$o" "$T/$k-t1.gguf" || fail "$k: awq with -t 1 and -t 2 differ"; }
                rm -f "$T/$k-t1.gguf" ;;
            size)
                [ "$(stat -c %s "$o")" -le 34300000 ] || fail "$k: --size 34300000 wrote more"
                has "$mp" "experts=gptq:" "$k: --size's experts" ;;
            esac
            if [ -n "$peer" ]; then
                "$peer" info "$o" > "$T/peer.txt" 2>&1 || { tail -5 "$T/peer.txt"; fail "$k $meth: llama.cpp did not load it"; }
            fi
        fi
        rm -f "$o"
    done
    [ "$fails" -eq "$f0" ] && echo "  $k: ok"
else
    cat "$T/mk.log"; fail "$k: fixture or convert"
fi
rm -rf "$d" "$g" "$T/lc.imatrix" "$T/$k.imatrix" "$T/$k-hf.imatrix"

for k in gemma4e2b gemma4dense; do
    echo "== $k"
    d=$T/hf-$k
    python3 "$FIX/mk_family_fixture.py" "$k" "$d" > "$T/mk.log" 2>&1; rc=$?
    [ $rc -eq 77 ] && skip "$k: tokenizer files missing (tests/fixtures/fetch_tokenizers.sh)"
    [ $rc -eq 0 ] || { cat "$T/mk.log"; fail "$k: fixture"; continue; }
    g=$T/$k-f32.gguf
    run 0 convert "$d" -o "$g" --type f32 -q || { fail "$k: convert f32"; continue; }
    # llama.cpp's own imatrix of the fixture (bench/llamacpp_imatrix_qwen35.sh
    # KIND: llama-imatrix's collection over llama.cpp's graph, -c 32 over the
    # same corpus slice, its converter's F32 file; gemma4dense with attn_v):
    # the same entries less per_layer_model_proj (llama-imatrix records only
    # "blk." weights) and the same counts; importance within its F16 KV cache
    # and flash attention's rounding (attention scale 1 passes it on: seen max
    # 4.3e-3 / 6.0e-3, mean 3.7e-4 / 4.1e-4 on e2b / dense), and against the
    # same graph with an F32 cache and no flash attention within F32 rounding
    # (seen max 1.1e-3 / 4.6e-4, both in ffn_down: ggml's CPU GELU looks its
    # result up in an F16 table; mean 2.8e-5 / 1.2e-5)
    ref=$MW_SRC/tests/fixtures/llamacpp_ref/$k-calib32
    if [ -f "$ref.imatrix.gguf" ] && [ -f "$ref-kvf32.imatrix.gguf" ]; then
        run 0 calib "$g" "${C[@]}" --llamacpp-chunks -q -o "$T/$k-lc.imatrix" &&
            { mwgguf drop "$T/$k-lc.imatrix" "$T/lc.imatrix" per_layer_model_proj.weight ||
              fail "$k: no per_layer_model_proj entry to drop"; } && {
            r=$(mwgguf imatrix-cmp "$T/lc.imatrix" "$ref.imatrix.gguf" --max-rel 1e-2 --mean-rel 8e-4) ||
                fail "$k: vs llama-imatrix: $r"
            echo "  vs llama-imatrix (F16 KV cache): $r"
            r=$(mwgguf imatrix-cmp "$T/lc.imatrix" "$ref-kvf32.imatrix.gguf" --max-rel 2.5e-3 --mean-rel 6e-5) ||
                fail "$k: vs llama.cpp's imatrix with an F32 KV cache: $r"
            echo "  vs llama.cpp, F32 KV cache: $r"
        }
        rm -f "$T/$k-lc.imatrix" "$T/lc.imatrix"
    else
        fail "$k: no llama.cpp imatrix kept ($ref*.imatrix.gguf: bench/llamacpp_imatrix_qwen35.sh $k)"
    fi
    if [ $k = gemma4dense ]; then # the 31B's attention_k_eq_v: no v in the full layer
        mwgguf drop "$g" "$T/kv.gguf" blk.5.attn_v && mv "$T/kv.gguf" "$g" ||
            { fail "$k: dropping blk.5.attn_v"; continue; }
    fi
    hf=$d; [ $k = gemma4dense ] && hf= # its GGUF lost the full layer's attn_v
    "$check" "$k" "$g" $hf > "$T/check.txt" 2>&1 || { cat "$T/check.txt"; fail "$k: check_calib_gemma4"; }
    grep 'logits differ\|folds moved' "$T/check.txt" | sed 's/^/  /'
    # the imatrix: every matrix the layers multiply
    run 0 calib "$g" "${C[@]}" -q -o "$T/$k.imatrix" || { fail "$k: memwall calib"; continue; }
    mwgguf types "$T/$k.imatrix" > "$T/im.txt" 2>&1 || fail "$k: imatrix unreadable"
    n=$(grep -c '\.in_sum2 ' "$T/im.txt")
    if [ $k = gemma4e2b ]; then
        # 5 layers x (q o gate up down inp_gate proj) + k, v in the 3 that own
        # them + per_layer_model_proj
        want=42
        for e in blk.0.inp_gate.weight blk.4.proj.weight per_layer_model_proj.weight \
                 blk.2.attn_v.weight blk.4.attn_q.weight blk.4.ffn_down.weight; do
            grep -q "^$e.in_sum2 " "$T/im.txt" || fail "$k: the imatrix has no $e"
        done
        grep -q '^blk\.[34]\.attn_[kv]\.weight' "$T/im.txt" &&
            fail "$k: an entry for a shared-KV layer's k or v (it reads layer 1's or 2's)"
    else
        want=41 # 6 layers x 7, less the full layer's v
    fi
    [ "$n" -eq "$want" ] || fail "$k: $n imatrix entries, expected $want"
    echo "  imatrix: $n entries"
    if [ -n "$hf" ]; then # the checkpoint directory gives the same statistics
        run 0 calib "$hf" "${C[@]}" -q -o "$T/$k-hf.imatrix" &&
            r=$(mwgguf cmp "$T/$k-hf.imatrix" "$T/$k.imatrix") &&
            echo "  imatrix from the HF directory: $r" || fail "$k: the HF directory's imatrix: $r"
    fi
    rm -rf "$d"
    for meth in gptq+round awq; do
        o=$T/$k-$meth.gguf
        if $MW_EMU "$MEMWALL" quant "$g" -o "$o" --preset Q4_0 "${C[@]}" --method $meth > "$T/q.log" 2>&1; then
            $MW_EMU "$MEMWALL" verify --deep "$o" > "$T/verify.txt" 2>&1 ||
                { cat "$T/verify.txt"; fail "$k $meth: verify --deep"; }
            echo "  $meth: $(grep 'memwall quant: wrote' "$T/q.log" | sed 's/.*gguf (//; s/ in [0-9.]*s$//')"
            if [ $meth = gptq+round ]; then
                # GPTQ then learned rounding on every layer matrix Q4_0 takes:
                # e2b 5 x (q o gate up down inp_gate) + k, v in the 3 layers
                # that own them (proj, 16 wide, falls back to f16: no block
                # of 32; gemma4e2bw below quantizes it); dense 6 x 7 less the
                # full layer's v
                nr=36; [ $k = gemma4dense ] && nr=41
                grep -q "round: learned rounding on $nr tensors" "$T/q.log" ||
                    { grep 'round:' "$T/q.log"; fail "$k: learned rounding did not reach all $nr layer matrices"; }
                grep 'memwall quant: round:' "$T/q.log" | head -1 | sed 's/^memwall quant: /    /'
            fi
            if [ $meth = awq ]; then
                grep -q "v -> attn_output: folded in 0 of .* (layer 0: gemma4's v is RMS-normed per head without a weight" "$T/q.log" ||
                    { grep 'awq:' "$T/q.log"; fail "$k: the AWQ log does not say why v -> attn_output is skipped"; }
                grep -q 'attn_norm -> q/k/v: folded in' "$T/q.log" || fail "$k: no attn_norm fold"
                [ $k = gemma4e2b ] && { grep -q 'awq: gemma4: inp_gate and proj are not folded' "$T/q.log" ||
                    fail "$k: the AWQ log does not say why inp_gate and proj are not folded"; }
            fi
            if [ -n "$peer" ]; then
                "$peer" info "$o" > "$T/peer.txt" 2>&1 || { tail -5 "$T/peer.txt"; fail "$k $meth: llama.cpp did not load it"; }
            fi
        else
            cat "$T/q.log"; fail "$k: quant --method $meth"
        fi
        rm -f "$o"
    done
    rm -f "$g"
done

# GPTQ and learned rounding on proj. gemma4e2b's per-layer input is 16 wide,
# below a quant block, so its blk.N.proj (input that width) falls back to
# F16; gemma4e2bw is the same layout with 32 (one Q4_0 block; the real E2B
# has 256) in 3 layers (sliding, full, sliding sharing layer 0's KV). Its
# gptq+round: learned rounding, which follows GPTQ on the same matrices
# (methods.c, quant_one), on 3 x (q o gate up down inp_gate proj) + k, v in
# the 2 layers that own them = 25, and 22 when an override keeps proj in F16:
# the 3 proj are among the 25, stored Q4_0. per_layer_model_proj stays F32:
# llama-quantize never quantizes it (llama-quant.cpp "not too big";
# quant_tensor_is_quantizable), so no method applies to it. verify --deep,
# and llama.cpp loads the file.
k=gemma4e2bw
echo "== $k (per-layer width 32: proj quantized)"
d=$T/hf-$k g=$T/$k-f32.gguf o=$T/$k-gptq+round.gguf f0=$fails
if python3 "$FIX/mk_family_fixture.py" $k "$d" > "$T/mk.log" 2>&1 &&
    run 0 convert "$d" -o "$g" --type f32 -q; then
    rm -rf "$d"
    if run 0 quant "$g" -o "$o" --preset Q4_0 "${C[@]}" --method gptq+round; then
        has "$err" "round: learned rounding on 25 tensors" "$k: gptq+round"
        echo "$err" | grep 'memwall quant: round:' | head -1 | sed 's/^memwall quant: /  /'
        mwgguf types "$o" > "$T/types.txt" || fail "$k: types"
        n=$(grep -c '^blk\.[0-2]\.proj\.weight q4_0$' "$T/types.txt")
        [ "$n" -eq 3 ] || fail "$k: $n of 3 proj stored q4_0"
        grep -q '^per_layer_model_proj\.weight f32$' "$T/types.txt" ||
            fail "$k: per_layer_model_proj not kept F32: $(grep per_layer_model_proj "$T/types.txt")"
        run 0 verify --deep "$o" || fail "$k: verify --deep"
        if [ -n "$peer" ]; then
            "$peer" info "$o" > "$T/peer.txt" 2>&1 || { tail -5 "$T/peer.txt"; fail "$k: llama.cpp did not load it"; }
        fi
    fi
    run 0 quant "$g" -o "$T/$k-f16proj.gguf" --preset Q4_0 "${C[@]}" --method gptq+round \
        --type-override 'blk\.[0-9]+\.proj\.weight=f16' &&
        has "$err" "round: learned rounding on 22 tensors" "$k: gptq+round, proj kept F16"
    [ "$fails" -eq "$f0" ] &&
        echo "  gptq+round: 3 proj of 25 matrices in Q4_0 (22 with proj in F16); per_layer_model_proj F32"
else
    cat "$T/mk.log"; fail "$k: fixture or convert"
fi
rm -rf "$d" "$g" "$o" "$T/$k-f16proj.gguf"

echo "== refused"
python3 "$FIX/mk_gptoss_gguf.py" "$T/gptoss.gguf" || fail "mk_gptoss_gguf"
if [ -f "$T/gptoss.gguf" ]; then
    refused gpt-oss "$T/gptoss.gguf" "gpt-oss (GGUF)" --allow-requantize
    # the control: without a corpus it quantizes
    run 0 quant "$T/gptoss.gguf" -o "$T/q.gguf" --preset Q8_0 --allow-requantize -t 2 -q ||
        fail "gpt-oss: quant without --corpus"
fi
rm -f "$T"/*.gguf
finish
