#!/usr/bin/env bash
# Thread-count determinism of everything that runs on OpenBLAS:
# `memwall calib` and `memwall quant --corpus` with the methods whose
# products cover every BLAS call (gptq-act, awq+gptq+round, awq+gptq-act: rtn,
# gptq, awq, round and awq+gptq alone run subsets of them), and with --size /
# --bpw (--bpw with its output-KL probes, --size with --no-probes), give
# byte-identical files at -t 1 and 8 (calib also at 2; 3 under the
# other kernels) and across two runs, under OpenBLAS's default kernel for this CPU and with
# OPENBLAS_CORETYPE set to Haswell, Sandybridge and Prescott (each where this
# CPU can run it). OpenBLAS returns other bits for other row counts and
# thread counts; memwall keeps it single-threaded and cuts every product
# into tiles fixed by its shape (calib/mw_blas.h), so only the kernel, never
# the thread count, may change the bits.
#
# Small but not trivial: 2 samples of 301 positions (two row tiles per
# sample), tinyllama-8m's 768-wide FFN (three column tiles, three Cholesky
# blocks of the ffn_down Hessian). Q8_0 keeps the AWQ search short. The model
# is tinyllama-8m cut to its first 2 layers (tests/lib/mwgguf.py cut-layers:
# every kind of tensor and product, layer 1 fed by layer 0's quantized
# output, the output matrix): the products are the 8-layer model's
# shapes and tiles, a quarter as many; the --bpw probes (one forward pass per
# tensor) were most of the CPU, 58 of them on 8 layers, 16 here. --size 4.5M
# becomes the same share of the smaller F16 file (2,077,997 bytes).
# The unit tests of calib (check_calib: statistics equal for every thread
# count, batch size and row window) run under the Haswell kernel too.
# Under the other kernels: calib at -t 1, 3, 8 and awq+gptq-act (calib's
# statistics, the AWQ search, GPTQ's Hessian, Cholesky and inverse with
# act-order) at -t 1, 3 and again; --bpw (the allocator running gptq-act for
# every candidate type: the same products) under Haswell only.
# When OpenBLAS's default kernel for this CPU is Haswell (OPENBLAS_VERBOSE=2
# names it; Zen 1-3, Haswell..Skylake client; OpenBLAS 0.3.21 gives this Zen 4
# VM Cooperlake, so there nothing changes), the Haswell pass would repeat the default
# pass's products bit for bit (the same kernel table): its checks (check_calib,
# the -t 3 runs) join the default pass instead.
# Usage: determinism_blas.sh CHECK_CALIB [all|default|kernels|quick]
#   all (the default): everything above; default: the default kernel's pass of
#   "all" (CTest: determinism_blas); kernels: the other kernels' passes of "all"
#   (CTest: determinism_blas_kernels, beside it); quick: the default kernel only
. "$(dirname "$0")/common.sh"
CHECK_CALIB=${1:?usage: determinism_blas.sh CHECK_CALIB [all|default|kernels|quick]}
mode=${2:-all}
scratch_on_shm determinism
F16=$(ref tinyllama-8m.llamacpp-f16.gguf)
[ -n "$F16" ] || skip "no tinyllama-8m.llamacpp-f16.gguf"
[ -f "$MW_DATASETS/corpora/calib.txt" ] || skip "no datasets/corpora/calib.txt"
have_python || skip "no python3 (tests/lib/mwgguf.py cut-layers)"
head -c 40000 "$MW_DATASETS/corpora/calib.txt" > "$T/calib.txt"
mwgguf cut-layers "$F16" "$T/l2.gguf" 2 || { fail "mwgguf cut-layers"; finish; }
F16=$T/l2.gguf
SIZE=$(( $(stat -c %s "$F16") * 4718592 / 16891328 )) # 4.5M's share of the 8-layer F16 file
S=(--corpus "$T/calib.txt" --samples 2 --seq-len 300 -q)

# same_bytes WHAT FILE...: every FILE equals the first
same_bytes() {
    local what=$1 first=$2
    shift 2
    for f in "$@"; do
        cmp -s "$first" "$f" || fail "$what: $(basename "$first") and $(basename "$f") differ"
    done
}

# check KERNEL FULL [ALSO]: the whole matrix under one OPENBLAS_CORETYPE ("" =
# default); ALSO=Haswell: the default kernel is Haswell, the Haswell pass's
# checks run here too (check_calib, -t 3)
check() {
    local k=$1 tag=${1:-default} full=$2 also=${3:-}
    echo "== OpenBLAS kernel: $tag${also:+ (= $also)}"
    if [ "$k" = Haswell ] || [ "$also" = Haswell ]; then # the kernel the bug was reported on
        CK_TIMEOUT_MULTIPLIER=10 "$CHECK_CALIB" > "$T/check_calib.log" 2>&1 ||
            { tail -5 "$T/check_calib.log"; fail "check_calib under OPENBLAS_CORETYPE=$k"; }
    fi
    # calib: -t 1 2 3 8, and -t 1 again (other kernels: -t 1 3 8)
    local ct=(1 3 8)
    [ "$full" = 1 ] && ct=(1 2 8 1b)
    [ -n "$also" ] && ct=(1 2 3 8 1b)
    for t in "${ct[@]}"; do
        run 0 calib "$F16" "${S[@]}" -o "$T/$tag-c$t.imatrix" -t ${t%b} || return
    done
    for t in "${ct[@]:1}"; do same_bytes "$tag calib -t $t" "$T/$tag-c1.imatrix" "$T/$tag-c$t.imatrix"; done
    local methods=(awq+gptq-act) threads=(1 3)
    if [ "$full" = 1 ]; then
        # rtn, gptq, awq and awq+gptq run a subset of the products of these
        # (awq+gptq+round: AWQ, GPTQ, learned rounding, the output matrix)
        methods=(gptq-act awq+gptq+round awq+gptq-act)
        threads=(1 8)
    fi
    for m in "${methods[@]}"; do
        local mt=("${threads[@]}")
        [ -n "$also" ] && [ "$m" = awq+gptq-act ] && mt=(1 3 8)
        for t in "${mt[@]}"; do
            run 0 quant "$F16" -o "$T/$tag-$m-$t.gguf" --preset Q8_0 --method "$m" "${S[@]}" -t $t || return
        done
        local files=()
        for t in "${mt[@]:1}"; do files+=("$T/$tag-$m-$t.gguf"); done
        if [ "$m" = awq+gptq-act ]; then
            run 0 quant "$F16" -o "$T/$tag-$m-again.gguf" --preset Q8_0 --method "$m" "${S[@]}" -t 1
            files+=("$T/$tag-$m-again.gguf")
        fi
        same_bytes "$tag quant --method $m" "$T/$tag-$m-1.gguf" "${files[@]}"
        rm -f "$T/$tag-$m-"*.gguf
    done
    # mixed precision: --bpw with gptq-act (its output-KL probes, one forward
    # pass per tensor, included); with the full matrix also --size with gptq
    # (AWQ's part is the methods' above) and --no-probes (the probes are the
    # --bpw run's; probing twice was 35 s of CPU)
    local tb=(1 3)
    [ "$full" = 1 ] && tb=(1 8)
    [ -n "$also" ] && tb=(1 3 8)
    [ "$full" = 1 ] || [ "$k" = Haswell ] || { rm -f "$T/$tag-"*; return; }
    for t in "${tb[@]}"; do
        run 0 quant "$F16" -o "$T/$tag-bpw-$t.gguf" --bpw 4.5 --no-iquants --method gptq-act "${S[@]}" -t $t ||
            return
        [ "$full" = 1 ] && [ "$t" != 3 ] || continue
        run 0 quant "$F16" -o "$T/$tag-size-$t.gguf" --size "$SIZE" --no-iquants --no-probes --method gptq \
            "${S[@]}" -t $t ||
            return
    done
    local sz=() bp=()
    for t in "${tb[@]:1}"; do
        [ "$t" = 3 ] || sz+=("$T/$tag-size-$t.gguf")
        bp+=("$T/$tag-bpw-$t.gguf")
    done
    same_bytes "$tag quant --bpw --method gptq-act" "$T/$tag-bpw-1.gguf" "${bp[@]}"
    [ "$full" = 1 ] && same_bytes "$tag quant --size --method gptq" "$T/$tag-size-1.gguf" "${sz[@]}"
    rm -f "$T/$tag-"*
}

# which x86 kernels this CPU can run (a Haswell kernel needs AVX2 and FMA)
can_run() {
    local flags
    flags=$(grep -m1 '^flags' /proc/cpuinfo 2> /dev/null)
    case $1 in
        Haswell) [[ $flags == *" avx2"* && $flags == *" fma"* ]] ;;
        Sandybridge) [[ $flags == *" avx"* ]] ;;
        Prescott) [[ $flags == *" sse3"* || $flags == *" pni"* ]] ;;
    esac
}

unset OPENBLAS_CORETYPE
others=
[ "$mode" != quick ] && [ "$(uname -m)" = x86_64 ] && others=1
# the default kernel's name (a DYNAMIC_ARCH OpenBLAS prints "Core: NAME" as it loads)
core=$(OPENBLAS_VERBOSE=2 $MW_EMU "$MEMWALL" --version 2>&1 | sed -n 's/^Core: *//p' | head -n 1)
if [ "$mode" = kernels ]; then
    [ -n "$others" ] || skip "the other OpenBLAS kernels: x86-64 only"
elif [ -n "$others" ] && [ "$core" = Haswell ]; then
    check "" 1 Haswell
else
    check "" 1
fi
if [ -n "$others" ] && [ "$mode" != default ]; then
    for k in Haswell Sandybridge Prescott; do
        if [ $k = Haswell ] && [ "$core" = Haswell ]; then
            echo "== OpenBLAS kernel $k: the default kernel here (checked above)"
        elif can_run $k; then
            OPENBLAS_CORETYPE=$k check $k 0
        else
            echo "== OpenBLAS kernel $k: this CPU cannot run it (not checked)"
        fi
    done
fi
finish
