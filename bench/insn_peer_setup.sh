#!/usr/bin/env bash
# bench/insn_peer_setup.sh — llama.cpp's own aarch64 build as a llama-peer for
# qemu-aarch64: the prebuilt linux-arm64 libraries of node-llama-cpp (pinned,
# same version and llama.cpp commit as tests/peer/setup.sh's x64 ones) and
# tests/peer/llama_peer.c cross-compiled against them with aarch64-linux-gnu-gcc.
#
#   bash bench/insn_peer_setup.sh    # prints the path of llama-peer-arm64 (last line)
#
# Run it with: qemu-aarch64 -L /usr/aarch64-linux-gnu -cpu CPU llama-peer-arm64 ...
# (the libraries need libstdc++.so.6/libgcc_s.so.1 for arm64: Debian's
# gcc-aarch64-linux-gnu cross toolchain ships them in /usr/aarch64-linux-gnu/lib).
# Exit status: 0 ready, 77 cannot be set up here (no npm/registry/cross gcc).
set -euo pipefail
NLC_VERSION=3.21.1
# npm "dist.integrity" of @node-llama-cpp/linux-arm64@3.21.1
ARM64_INTEGRITY='sha512-eI3anSEGzJiwF2rpMpZVTdHzw47LztbvfvuRzlu/fPO18ROnBOd+75RPUBlV6qENPpmNtbov85+3VODwEwBurg=='
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
PEER_DIR=${MW_PEER_DIR:-$repo/.peer}
say()  { printf 'insn-peer-setup: %s\n' "$*" >&2; }
skip() { say "SKIP: $*"; exit 77; }
die()  { say "ERROR: $*"; exit 1; }

command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || skip "no aarch64-linux-gnu-gcc"
# headers (and the x64 peer) first: the same llama.cpp commit
bash "$repo/tests/peer/setup.sh" >/dev/null || skip "tests/peer/setup.sh failed"
INC=$PEER_DIR/include
[[ -f $INC/llama.h ]] || die "no $INC/llama.h after tests/peer/setup.sh"

if command -v flock >/dev/null 2>&1; then
    exec 9>"$PEER_DIR/.lock-arm64"
    flock 9
fi
ARM=$PEER_DIR/node_modules/@node-llama-cpp/linux-arm64
LIBDIR=$ARM/bins/linux-arm64
STAMP=$PEER_DIR/.installed-arm64-$NLC_VERSION
if [[ ! -f $STAMP || ! -d $LIBDIR ]]; then
    command -v npm >/dev/null 2>&1 || skip "npm not found"
    tmp=$PEER_DIR/tarballs-arm64.tmp
    rm -rf "$tmp" && mkdir -p "$tmp"
    say "npm pack @node-llama-cpp/linux-arm64@$NLC_VERSION"
    (cd "$tmp" && npm pack --prefer-offline --no-audit --no-fund --loglevel=error \
         "@node-llama-cpp/linux-arm64@$NLC_VERSION" >/dev/null 2>&1) || skip "npm could not fetch the arm64 package"
    tgz=$(ls "$tmp"/*.tgz | head -n1)
    got=$(node -e 'const c=require("crypto"),f=require("fs");
          process.stdout.write("sha512-"+c.createHash("sha512").update(f.readFileSync(process.argv[1])).digest("base64"))' "$tgz")
    [[ $got == "$ARM64_INTEGRITY" ]] || die "integrity mismatch: $got"
    rm -rf "$ARM.tmp" && mkdir -p "$ARM.tmp"
    tar -xzf "$tgz" -C "$ARM.tmp" --strip-components=1 --no-same-owner
    rm -rf "$ARM" && mv "$ARM.tmp" "$ARM" && rm -rf "$tmp"
    touch "$STAMP"
fi
LIBLLAMA=$(ls "$LIBDIR"/libllama.v*.so "$LIBDIR"/libllama.so 2>/dev/null | head -n1 || true)
LIBGGML=$(ls "$LIBDIR"/libggml.v*.so "$LIBDIR"/libggml.so 2>/dev/null | head -n1 || true)
[[ -n $LIBLLAMA && -n $LIBGGML && -f $LIBDIR/libggml-base.so ]] || die "no libllama/libggml in $LIBDIR"
BIN=$PEER_DIR/bin/llama-peer-arm64
SRC=("$repo"/tests/peer/llama_peer.c "$repo"/tests/peer/peer_common.c "$repo"/tests/peer/peer_ppl.c
     "$repo"/tests/peer/peer_run.c "$repo"/tests/peer/peer_quantize.c)
stale=0
for f in "${SRC[@]}" "$repo/tests/peer/peer.h" "${BASH_SOURCE[0]}"; do if [[ $f -nt $BIN ]]; then stale=1; fi; done
rel=${LIBDIR#"$PEER_DIR"/}
if [[ ! -x $BIN || $stale = 1 ]]; then
    mkdir -p "$PEER_DIR/bin"
    say "compiling $BIN"
    aarch64-linux-gnu-gcc -std=c11 -O2 -g -Wall -Wextra -fno-fast-math -ffp-contract=off \
        -DPEER_NLC_VERSION="\"$NLC_VERSION\"" -DPEER_LLAMA_COMMIT="\"$(cat "$INC/LLAMA_COMMIT")\"" \
        -DPEER_LIBDIR_REL="\"$rel\"" -I"$INC" -o "$BIN.tmp" "${SRC[@]}" \
        "$LIBLLAMA" "$LIBGGML" "$LIBDIR/libggml-base.so" "-Wl,-rpath,\$ORIGIN/../$rel" \
        -Wl,--enable-new-dtags -ldl -lm || die "cross-compiling llama-peer failed"
    mv "$BIN.tmp" "$BIN"
fi
qemu-aarch64 -L /usr/aarch64-linux-gnu "$BIN" version >/dev/null 2>&1 || die "$BIN does not run under qemu-aarch64"
echo "$BIN"
