#!/bin/bash
# device speed run: llama-bench vs memwall-run (new and base) on the same llama.cpp-made Q4_K_M files
cd "$(dirname "$0")" && tar xJf pack.tar.xz
export LD_LIBRARY_PATH=$PWD/lib
B=$PWD/bin; T=/tmp/mw; mkdir -p $T; L=$OUT/log.txt
exec > >(tee $L) 2>&1
lscpu | grep -E "Model name|^CPU\(s\)|Flags" | cut -c1-400
grep -o "avx_vnni\|avx512_vnni\|avx512f" /proc/cpuinfo | sort | uniq -c
REF=../datasets/reference/tinyllama-8m.llamacpp-f16.gguf
[ "${MODELS:-wide}" = tiny ] || $B/quant_mkmodel $T/f16.gguf 8 2048 5632 32 4 4096 $REF >/dev/null 2>&1 || echo mkmodel failed
[ "${MODELS:-wide}" = tiny ] || $B/llama-quantize $T/f16.gguf $T/wide.gguf Q4_K_M 16 >/dev/null 2>&1 || echo quantize wide failed
$B/llama-quantize $REF $T/tiny.gguf Q4_K_M 16 >/dev/null 2>&1 || echo quantize tiny failed
ls -la $T
P="$(cat prompt512.txt)"
mw() { # bin model threads prompt -> mean pp, tg over 3
  for i in 1 2 3; do $1 -m $2 -p "$4" -n 128 -t $3 --temp 0 --ignore-eos --ctx 1024 2>&1 >/dev/null | sed -n 's/.*prompt \([0-9]*\) tokens.*(\([0-9.]*\) tok\/s); generated.*(\([0-9.]*\) tok\/s).*/\1 \2 \3/p'; done |
    awk '{n++; pp+=$2; tg+=$3; np=$1} END {printf "pp%d %.1f tg %.1f", np, pp/n, tg/n}'
}
for m in ${MODELS:-tiny wide}; do for t in ${THREADS:-1 2 4}; do
  echo "=== $m t=$t"
  timeout 200 $B/llama-bench -m $T/$m.gguf -p 512 -n 128 -d 0,512 -t $t -r 3 2>/dev/null | grep -E "pp512|tg128"
  for b in memwall-run memwall-run.base memwall-run; do
    echo "$b: long $(mw $B/$b $T/$m.gguf $t "$P") | short $(mw $B/$b $T/$m.gguf $t "It was a")"
  done
  /usr/bin/time -f "memwall-run peak RSS %M KB" $B/memwall-run -m $T/$m.gguf -p "$P" -n 128 -t $t --temp 0 --ignore-eos --ctx 1024 -q >/dev/null 2>$T/rss.txt; tail -1 $T/rss.txt
done; done
