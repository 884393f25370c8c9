#!/usr/bin/env bash
# Installing memwall like a Debian tool, from this build directory:
#  - `cmake --install --prefix P` puts memwall, memwall-run, the man pages,
#    the GGUF/verify headers, the static libraries and memwall.pc under P;
#  - every man page renders with `man -l` and names every option its
#    command's --help names (and none is listed as undocumented: the page
#    comes from the same text and option table);
#  - a C program outside the tree (tests/tools/install_consumer.c) compiles
#    and links against P through pkg-config and verifies a GGUF file;
#  - `cpack -G DEB` builds memwall_VERSION_ARCH.deb whose Depends are
#    Debian packages installed here (one per alternative group at least);
#    `dpkg-deb -x` unpacks it and the unpacked memwall --version, memwall-run
#    and `man -l` on its pages work.
set -u
source "$(dirname "$0")/common.sh"
scratch_on_shm install-deb
BUILD=$(cd "$MW_BIN/.." && pwd)
for c in cmake cpack dpkg-deb dpkg-query man pkg-config cc; do
    command -v "$c" > /dev/null || skip "no $c (scripts/deps.sh installs it)"
done
[ -f "$BUILD/man/memwall.1" ] || skip "no man pages in $BUILD (a cross build makes none)"
gguf=$(ref tinyllama-8m.llamacpp-f16.gguf)
[ -n "$gguf" ] || skip "no tinyllama-8m reference GGUF"
version=$("$MEMWALL" --version)

man_text() { # PAGE: rendered, not hyphenated or justified, wide
    MANWIDTH=200 man --nh --nj -P cat -l "$1" 2> "$T/man.err"
    [ ! -s "$T/man.err" ] || fail "man -l $1: $(head -n 3 "$T/man.err")"
}
# PAGE CMD...: the page renders and names every option of CMD --help
page_has_help() {
    local page=$1 text opt
    shift
    text=$(man_text "$page")
    [[ $text == *"$(basename "$page" .1 | tr a-z A-Z)(1)"* ]] || fail "$page: no title"
    [[ $text == *"OTHER OPTIONS"* ]] && fail "$page: options missing from $* --help"
    for opt in $("$@" --help | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u); do
        [[ $text == *"$opt"* ]] || fail "$page: no $opt"
    done
}

# cmake --install
run_bin cmake cmake 0 --install "$BUILD" --prefix "$T/inst"
P=$T/inst
for f in bin/memwall bin/memwall-run include/memwall/core/mw.h include/memwall/gguf/gguf.h \
    include/memwall/verify/verify.h; do
    [ -f "$P/$f" ] || fail "cmake --install: no $f"
done
pc=$(find "$P" -name memwall.pc)
[ -n "$pc" ] || fail "cmake --install: no memwall.pc"
[ "$("$P/bin/memwall" --version)" = "$version" ] || fail "installed memwall --version"
n_pages=0
for page in "$P"/share/man/man1/memwall*.1; do
    name=$(basename "$page" .1)
    case $name in
    memwall) page_has_help "$page" "$P/bin/memwall" ;;
    memwall-run) page_has_help "$page" "$P/bin/memwall-run" ;;
    *) page_has_help "$page" "$P/bin/memwall" "${name#memwall-}" ;;
    esac
    n_pages=$((n_pages + 1))
done
# memwall(1), memwall-run(1) and one page per command but run (memwall-run's)
n_cmds=$("$MEMWALL" --help | sed -n '/^commands:/,/^$/p' | grep -cE '^  [a-z]+ ')
[ "$n_pages" = $((n_cmds + 1)) ] || fail "$n_pages man pages for $n_cmds commands"

# a C program links the installed library through pkg-config
export PKG_CONFIG_PATH=$(dirname "$pc")
flags=$(pkg-config --cflags --libs memwall) || fail "pkg-config memwall"
cc -std=c11 -Wall -Wextra -Werror "$MW_SRC/tests/tools/install_consumer.c" $flags \
    -o "$T/consumer" 2> "$T/cc.err" || { fail "cc with pkg-config: $(head -n 5 "$T/cc.err")"; }
run_bin consumer "$T/consumer" 0 "$gguf"
has "$out" "tensors 75 ok" "consumer"

# the .deb
run_bin cpack sh 0 -c "cd '$BUILD' && cpack -G DEB -B '$T/pkg'"
deb=$(ls "$T"/pkg/memwall_*.deb 2> /dev/null | head -n 1)
[ -n "$deb" ] || { fail "cpack made no .deb"; finish; }
[ "$(dpkg-deb -f "$deb" Package)" = memwall ] || fail "Package"
depends=$(dpkg-deb -f "$deb" Depends)
[ -n "$depends" ] || fail "no Depends"
IFS=',' read -ra groups <<< "$depends"
for g in "${groups[@]}"; do # one installed package per alternative group
    ok=0
    IFS='|' read -ra alts <<< "$g"
    for a in "${alts[@]}"; do
        p=$(awk '{print $1}' <<< "$a")
        dpkg-query -W -f='${Status}' "$p" 2> /dev/null | grep -q "install ok installed" && ok=1
    done
    [ $ok = 1 ] || fail "Depends '$g': no such package installed here"
done
dpkg-deb -x "$deb" "$T/x" || fail "dpkg-deb -x"
X=$T/x/usr
[ "$("$X/bin/memwall" --version)" = "$version" ] || fail "unpacked memwall --version"
run_bin memwall-run "$X/bin/memwall-run" 0 --help
has "$(man_text "$X/share/man/man1/memwall-verify.1")" "--junit" "unpacked memwall-verify(1)"
has "$(man_text "$X/share/man/man1/memwall-quant.1")" "--bpw" "unpacked memwall-quant(1)"
[ -f "$X/lib/pkgconfig/memwall.pc" ] || [ -n "$(find "$X" -name memwall.pc)" ] || fail "no memwall.pc in the .deb"
finish
