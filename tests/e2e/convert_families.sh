#!/usr/bin/env bash
# The Qwen3 / Gemma 2-3 / Phi-3 families against llama.cpp's converter: each fixture of
# tests/fixtures/mk_family_fixture.py (qwen3, gemma3, gemma3mm, gemma2, phi3,
# phi3long: real config.json layouts and tokenizer files, random BF16
# weights; gemma2-f16src: gemma2 with F16 weights) is converted by `memwall convert` to f16, bf16 and q8_0 and
# compared with the digest of what llama.cpp's convert_hf_to_gguf.py (the
# bundled commit) wrote for the same checkpoint
# (tests/fixtures/llamacpp_ref/<kind>-<type>.json, made by
# bench/llamacpp_ref.sh): every tensor's name, order, type, shape and bytes,
# and every KV key by key (type and value). Allowed differences, exactly:
#   memwall.*                          memwall's provenance keys
#   general.name, general.basename,    llama.cpp derives them from the
#   general.finetune, general.size_label  directory name / parameter count
# Gemma 3 (gemma3, gemma3mm) ships only a tokenizer.json (SentencePiece-style
# BPE with byte fallback). llama.cpp's converter takes it through transformers'
# AutoTokenizer, which Debian does not ship and the bench shim does not
# emulate for byte-fallback vocabularies, so its reference comes from the same
# checkpoint with a tokenizer.model (what real Gemma 3 checkpoints carry);
# memwall's own tokenizer keys for it are judged by tok_family_peer.sh
# (llama.cpp tokenizes the file as Hugging Face does). Tensors and every non-tokenizer key are judged as for
# the other families; the tokenizer.* keys that differ are listed as NOTE
# lines, not judged (MW_FAMILIES_GEMMA3_TOK=strict judges them too). That
# twin itself (tokenizer.model + tokenizer.json) is converted as well and
# judged on every key.
#
# Mixture of experts: qwen3moe (two shards, split inside layer
# 1's experts), mixtral (arch llama with experts), qwen2moe (shared expert,
# q8_0 falling back to F16 for ffn_down_exps), qwen3moe-fused (transformers
# 5's fused mlp.experts.gate_up_proj / down_proj, f16): the experts stacked into
# ffn_{gate,up,down}_exps as llama.cpp's converter does, judged by the same
# digests.
#
# Gated delta net: qwen35 (Qwen3_5ForConditionalGeneration: text_config,
# vision tensors skipped, tied), qwen35moe (Qwen3_5MoeForConditionalGeneration:
# fused experts, shared expert), qwen3next (Qwen3NextForCausalLM: fused
# in_proj_qkvz / in_proj_ba, per-expert tensors), all with linear key heads
# 2 != value heads 6 and the MTP block; qwen35-causal and qwen35moe-causal
# (Qwen3_5ForCausalLM / Qwen3_5MoeForCausalLM, f16): the (1 + w) norms, ssm_a
# = -exp(A_log), the V-head reorder, qwen3next's de-interleave and the MTP
# renames judged by the same digests. Their pre-tokenizer (qwen35) is named
# by the reference shim, not by llama.cpp's hash (bench/llamacpp_ref.sh).
#
# Gemma 4: gemma4e2b (Gemma4ForConditionalGeneration in E2B's layout:
# per-layer embeddings, 2 of 5 layers sharing KV with double-wide MLPs, both
# head dims, vision and audio towers skipped), gemma4moe (26B-A4B's: the
# fused 3-D experts and .scale tensors beside the dense MLP,
# attention_k_eq_v, per-layer head_count_kv) and gemma4dense
# (Gemma4ForCausalLM, 31B's), every tensor and every non-tokenizer key judged
# as above, the tokenizer's included: Gemma 3's tokenizer.json made Gemma
# 4-like (mk_family_fixture.py) written as llama.cpp's Gemma4Model does
# (model gemma4, no pre, scores -1000, LlamaHfVocab's types with the channel
# and tool tokens USER_DEFINED, add_space_prefix false, add_bos true). The
# runtime does not run gemma4 yet, so calib_hparams_from_hf is not compared
# for them. gemma4dense
# runs f16 only; the peer run loads gemma4e2b and gemma4moe in f16.
#
# qwen35 and qwen3next are also quantized (Q4_K_M) straight from the HF
# directory and from their f16 conversion: the same tensors (the gathers run
# through quant's HF source as through convert).
#
# calib_hparams_from_hf (config.json -> runtime hyper-parameters: plan,
# --fit-ram, calibration from an HF directory) equals what the runtime reads
# from each converted file (HPARAMS_CMP: tests/tools/hparams_cmp.c), the MoE
# kinds included (their expert counts and widths come from hf_config's
# n_expert, n_expert_used, n_ff_exp, n_ff_shexp, norm_topk_prob).
#
# With "peer": llama.cpp (tests/peer llama-peer) loads every converted file,
# reports the fixture's architecture and vocabulary size, and logs no
# pre-tokenizer warning ("missing pre-tokenizer type" / "GENERATION QUALITY");
# the digests, the hparams comparison and the tokenizer.model twin are left
# to the "mw" run. With "mw+peer" (hf_convert_families in the plain build):
# both on each file as it is converted (one fixture and one conversion
# serve both; a peer run of its own made them all again), the llama.cpp
# side left out with a note where llama-peer cannot be built; the sanitizer
# build runs "mw" (no llama.cpp).
#
# With "moemem" (hf_convert_moe_memory, release builds): the memory bound of
# expert stacking. The moebig fixture (Mixtral layout, hidden 1024, 64
# experts of 512 x 1024, 2 layers: ~525 MiB of BF16 in one file; one expert
# matrix 1 MiB, one stacked tensor 64 MiB, one layer's experts 192 MiB) is
# converted to bf16, f16 and q8_0; the peak RSS (/usr/bin/time %M) of each
# must stay under MOE_RSS_BOUND_KIB (48 MiB: below one stacked tensor, a
# tenth of the file) — the experts are streamed one by one into the output,
# their source pages dropped as they are consumed. Measured (2026-12, x86-64
# release): 18-21 MiB for all three types.
#
#   convert_families.sh mw|peer|mw+peer|moemem [HPARAMS_CMP]
# MW_FAMILIES_TYPES: the output types (default f16 bf16 q8_0; the sanitizer
# build runs f16 only: the code paths per type are the plain build's).
# Skips (77) when the tokenizer files cannot be fetched (npm) or, with peer,
# when llama-peer cannot be built.
source "$(dirname "${BASH_SOURCE[0]}")/hf_common.sh"
WITH_PEER=${1:-}
MW_CHECKS=1 # the digests, hparams and twins: every mode but "peer"
[ "$WITH_PEER" = peer ] && MW_CHECKS=
HPCMP=${2:-}
have_python || skip "python3 needed for the fixtures"
scratch_on_shm families
TOKDIR=$(bash "$FIX/fetch_tokenizers.sh" 2> "$T/fetch.log")
frc=$?
[ $frc -eq 77 ] && skip "tokenizer files unavailable: $(tail -n 1 "$T/fetch.log")"
[ $frc -eq 0 ] || { fail "fetch_tokenizers.sh exit $frc: $(tail -n 2 "$T/fetch.log")"; finish; }
TOKDIR=$(echo "$TOKDIR" | tail -n 1)
REF=$FIX/llamacpp_ref
IGN=(--ignore-kv 'memwall.*' --ignore-kv general.name --ignore-kv general.basename
     --ignore-kv general.finetune --ignore-kv general.size_label)

if [ "$WITH_PEER" = moemem ]; then
    [ -x /usr/bin/time ] && [ -z "${MW_EMU:-}" ] || skip "needs GNU /usr/bin/time and a native run"
    python3 "$FIX/mk_family_fixture.py" moebig "$T/moebig" > "$T/mk.log" 2>&1
    mrc=$?
    [ $mrc -eq 77 ] && skip "fixture moebig: $(tail -n 1 "$T/mk.log")"
    [ $mrc -eq 0 ] || { fail "mk_family_fixture.py moebig: exit $mrc: $(tail -n 2 "$T/mk.log")"; finish; }
    src_kib=$(( $(stat -c %s "$T/moebig/model.safetensors") / 1024 ))
    bound=${MOE_RSS_BOUND_KIB:-49152}
    for t in bf16 f16 q8_0; do
        /usr/bin/time -f "MAXRSS %M" -o "$T/time" "$MEMWALL" convert "$T/moebig" -o "$T/big-$t.gguf" \
            --type $t -q > "$T/out" 2> "$T/err" ||
            { fail "convert moebig --type $t: exit $?: $(tail -n 3 "$T/err")"; continue; }
        rss=$(sed -n 's/^MAXRSS //p' "$T/time")
        echo "  moebig ($src_kib KiB of BF16, 64 experts x 2 layers) --type $t: peak RSS $rss KiB (bound $bound KiB)"
        [ -n "$rss" ] && [ "$rss" -lt "$bound" ] ||
            fail "convert moebig --type $t: peak RSS ${rss:-?} KiB, bound $bound KiB (the experts must stream)"
        # the stacked tensors are there, 3-D, in llama.cpp's layout
        mwgguf shapes "$T/big-$t.gguf" blk.1.ffn_down_exps.weight=512x1024x64 \
            blk.1.ffn_gate_exps.weight=1024x512x64 blk.1.ffn_up_exps.weight=1024x512x64 \
            blk.1.ffn_gate_inp.weight=1024x64 > "$T/shp" 2>&1 ||
            fail "big-$t: stacked tensors: $(tr '\n' ' ' < "$T/shp")"
        rm -f "$T/big-$t.gguf"
    done
    finish
fi

if [ "$WITH_PEER" = peer ]; then
    need_peer
elif [ "$WITH_PEER" = mw+peer ]; then
    find_peer
    if [ -n "$PEER" ]; then WITH_PEER=peer
    else echo "note: no llama.cpp peer: the llama.cpp loads are left out"; WITH_PEER=mw; fi
fi

for k in qwen3 gemma3 gemma3mm gemma2 phi3 phi3long gemma2-f16src qwen3moe mixtral qwen2moe \
         qwen3moe-fused qwen35 qwen35moe qwen3next qwen35-causal qwen35moe-causal phi4mini \
         gemma4e2b gemma4moe gemma4dense; do
    mkargs=("$k")
    types=${MW_FAMILIES_TYPES:-f16 bf16 q8_0}
    # gemma2 with F16 weights: the F16 source path (Gemma's norm + 1 rounded in F16)
    [ $k = gemma2-f16src ] && mkargs=(gemma2 --dtype F16)
    # qwen3moe in transformers 5's fused expert layout (f16: the per-type
    # paths are qwen3moe's)
    [ $k = qwen3moe-fused ] && { mkargs=(qwen3moe --fused-experts); types=f16; }
    # the Qwen3_5*ForCausalLM layouts (f16: the per-type paths are the
    # ConditionalGeneration kinds')
    case $k in *-causal) mkargs=("${k%-causal}" --causal-lm); types=f16 ;; esac
    # gemma4dense: f16 (the per-type paths are gemma4e2b's); llama.cpp loads
    # the PLE and MoE layouts in f16 (peer)
    [ $k = gemma4dense ] && types=f16
    # the llama.cpp loads: every type but gemma4e2b/gemma4moe's (f16) and gemma4dense's (none)
    peer_types=
    if [ "$WITH_PEER" = peer ]; then
        peer_types=$types
        case $k in gemma4e2b|gemma4moe) peer_types=f16 ;; gemma4dense) peer_types= ;; esac
        [ -n "$MW_CHECKS" ] || types=$peer_types
        [ -n "$types" ] || continue
    fi
    want_nv= # (the fixture's vocabulary size: read once per kind)
    python3 "$FIX/mk_family_fixture.py" "${mkargs[@]}" "$T/$k" --tok-dir "$TOKDIR" > "$T/mk.log" 2>&1
    mrc=$?
    [ $mrc -eq 77 ] && skip "fixture $k: $(tail -n 1 "$T/mk.log")"
    [ $mrc -eq 0 ] || { fail "mk_family_fixture.py $k: exit $mrc: $(tail -n 2 "$T/mk.log")"; continue; }
    for t in $types; do
        g="$T/$k-$t.gguf"
        run 0 convert "$T/$k" -o "$g" --type $t -q || continue
        # "peer" alone: the files are judged by a "mw" run; here only what
        # llama.cpp makes of them
        if [ -n "$MW_CHECKS" ]; then
            ref="$REF/$k-$t.json"
            [ -f "$ref" ] || { fail "no reference $ref (bench/llamacpp_ref.sh)"; continue; }
            case $k in
            gemma3|gemma3mm)
                if [ "${MW_FAMILIES_GEMMA3_TOK:-}" = strict ]; then
                    mwgguf digest-cmp "$ref" "$g" "${IGN[@]}" > "$T/cmp" ||
                        fail "$k $t differs from llama.cpp: $(head -n 8 "$T/cmp")"
                else
                    mwgguf digest-cmp "$ref" "$g" "${IGN[@]}" \
                        --ignore-kv 'tokenizer.*' > "$T/cmp" ||
                        fail "$k $t differs from llama.cpp: $(head -n 8 "$T/cmp")"
                    if [ $t = f16 ]; then
                        mwgguf digest-cmp "$ref" "$g" "${IGN[@]}" > "$T/cmp-tok"
                        sed -n 's/^kv \(tokenizer\.[^:]*\):.*/NOTE: '"$k"': tokenizer key \1 differs from the tokenizer.model twin/p' \
                            "$T/cmp-tok"
                    fi
                fi
                ;;
            *)
                mwgguf digest-cmp "$ref" "$g" "${IGN[@]}" > "$T/cmp" ||
                    fail "$k $t differs from llama.cpp: $(head -n 8 "$T/cmp")"
                ;;
            esac
            if [ -n "$HPCMP" ] && [ $t = f16 ] && [ "${k#gemma4}" = "$k" ]; then
                "$HPCMP" "$T/$k" "$g" > "$T/hp" 2>&1 ||
                    fail "$k: calib_hparams_from_hf differs from the runtime's reading: $(head -n 6 "$T/hp")"
            fi
            # the delta net's gathers through quant's HF source (hf_quant.c):
            # quantizing the directory writes what quantizing its conversion does
            case $k in qwen35|qwen3next)
                if [ $t = f16 ]; then
                    run 0 quant "$T/$k" -o "$T/$k-hfq.gguf" --preset Q4_K_M -q &&
                        run 0 quant "$g" -o "$T/$k-gq.gguf" --preset Q4_K_M -q &&
                        { mwgguf tensors-cmp "$T/$k-hfq.gguf" "$T/$k-gq.gguf" > "$T/qcmp" 2>&1 ||
                              fail "$k: quant from the HF dir differs from quant of its conversion: $(tail -n 3 "$T/qcmp")"; }
                    rm -f "$T/$k-hfq.gguf" "$T/$k-gq.gguf"
                fi ;;
            esac
        fi
        [[ " $peer_types " == *" $t "* ]] || continue
        if ! "$PEER" -v info "$g" > "$T/info" 2> "$T/info.err"; then
            fail "llama.cpp cannot load $k-$t: $(grep -v '^llama_model_loader: - ' "$T/info.err" | tail -n 3)"
            continue
        fi
        arch=$(awk '$1=="arch"{print $2}' "$T/info")
        nv=$(awk '$1=="n_vocab"{print $2}' "$T/info")
        want_arch=$k
        case $k in gemma3mm) want_arch=gemma3 ;; phi3long|phi4mini) want_arch=phi3 ;; gemma2-f16src) want_arch=gemma2 ;;
        mixtral) want_arch=llama ;; qwen3moe-fused) want_arch=qwen3moe ;; *-causal) want_arch=${k%-causal} ;;
        gemma4*) want_arch=gemma4 ;; esac
        [ -n "${want_nv:-}" ] || want_nv=$(python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))
print(c.get("vocab_size") or c.get("text_config", {}).get("vocab_size") or 262208)' "$T/$k/config.json")
        [ "$arch" = "$want_arch" ] || fail "$k-$t: llama.cpp reads arch '$arch', want $want_arch"
        [ "$nv" = "$want_nv" ] || fail "$k-$t: llama.cpp reads n_vocab $nv, want $want_nv"
        if grep -qiE 'pre-tokenizer|GENERATION QUALITY' "$T/info.err"; then
            fail "$k-$t: llama.cpp warns about the pre-tokenizer: $(grep -iE 'pre-tokenizer|GENERATION QUALITY' "$T/info.err" | head -n 2)"
        fi
    done
    rm -rf "${T:?}/$k" "$T/$k"-*.gguf
    [ -n "$MW_CHECKS" ] || continue # the twin below has no llama.cpp side
    # Gemma 3 with a tokenizer.model (the --spm twin, as real Gemma 3
    # checkpoints ship): every key, the tokenizer's included, is llama.cpp's
    case $k in
    gemma3|gemma3mm)
        python3 "$FIX/mk_family_fixture.py" "$k" "$T/$k-spm" --spm --tok-dir "$TOKDIR" > "$T/mk.log" 2>&1 ||
            { fail "mk_family_fixture.py $k --spm: $(tail -n 2 "$T/mk.log")"; continue; }
        for t in ${MW_FAMILIES_TYPES:-f16 q8_0}; do
            run 0 convert "$T/$k-spm" -o "$T/$k-spm-$t.gguf" --type $t -q || continue
            mwgguf digest-cmp "$REF/$k-$t.json" "$T/$k-spm-$t.gguf" "${IGN[@]}" > "$T/cmp" ||
                fail "$k (tokenizer.model) $t differs from llama.cpp: $(head -n 8 "$T/cmp")"
        done
        rm -rf "${T:?}/$k-spm" "$T/$k-spm"-*.gguf
        ;;
    esac
done
finish
