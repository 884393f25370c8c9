#!/usr/bin/env bash
# Module lint (docs/architecture.md): fails on
#   - a back edge: a module including a module that is not to its left in
#       core <- gguf <- quant <- {verify, hf, runtime} <- calib <- methods <- tools
#     (verify, hf and runtime are siblings: none includes another), in C
#     includes and in the module libraries' CMake links;
#   - a quoted include that does not name its module ("quant/quant.h"), or
#     that climbs with ../ (modules, tests, bench);
#   - another module's *_int.h included (tests/ and bench/ may: white-box tests);
#   - printing or exiting in library code (everything but tools/, tests/, bench/):
#     printf, puts, putchar, perror, fprintf/fputs/vfprintf to stdout/stderr,
#     exit, _exit, abort, assert.
# Usage: scripts/lint_modules.sh [SOURCE_ROOT]; exit 0 clean, 1 with findings.
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"
rank() {
  case $1 in
    core) echo 0 ;; gguf) echo 1 ;; quant) echo 2 ;; verify|hf|runtime) echo 3 ;;
    calib) echo 4 ;; methods) echo 5 ;; tools) echo 6 ;; *) echo -1 ;;
  esac
}
modules="core gguf quant verify hf runtime calib methods tools"
bad=0
finding() { echo "lint: $*"; bad=1; }
allowed() { # from to: may module `from` use module `to`?
  local a b
  [ "$1" = "$2" ] && return 0
  a=$(rank "$1"); b=$(rank "$2")
  [ "$b" -ge 0 ] && [ "$b" -lt "$a" ]
}
# C sources of the modules, tests and benchmarks
dirs=$(for d in $modules tests bench; do if [ -d "$d" ]; then echo "$d"; fi; done)
files=$(find $dirs -type f \( -name '*.c' -o -name '*.h' -o -name '*.inc' \) \
          -not -path 'tests/peer/*' | sort)
for f in $files; do
  mod=${f%%/*}
  lib=1; [ "$(rank "$mod")" -ge 0 ] && [ "$mod" != tools ] || lib=0
  while IFS= read -r hit; do
    ln=${hit%%:*}
    inc=$(sed -E 's/.*#[[:space:]]*include[[:space:]]+"([^"]+)".*/\1/' <<<"${hit#*:}")
    case $inc in
      ../*|*/../*) finding "$f:$ln: include \"$inc\" climbs with ../"; continue ;;
    esac
    to=${inc%%/*}
    if [ "$(rank "$mod")" -ge 0 ]; then
      if [ "$to" = "$inc" ] || [ "$(rank "$to")" -lt 0 ]; then
        finding "$f:$ln: include \"$inc\" does not name its module (\"mod/file.h\")"
        continue
      fi
      allowed "$mod" "$to" || finding "$f:$ln: $mod includes $to (\"$inc\"): a back edge"
      case $inc in
        *_int.h) [ "$to" = "$mod" ] || finding "$f:$ln: $mod includes another module's internals \"$inc\"" ;;
      esac
    fi
  done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"' "$f" || true)
  if [ $lib = 1 ]; then
    # comments and string literals stripped (roughly) before looking for calls
    sed -E 's://.*$::; s:"([^"\\]|\\.)*":"":g' "$f" | awk '
      { line = $0 }
      incomment { j = index(line, "*/"); if (j > 0) { line = substr(line, j + 2); incomment = 0 } else next }
      { while ((i = index(line, "/*")) > 0) {
          rest = substr(line, i + 2); j = index(rest, "*/")
          if (j > 0) line = substr(line, 1, i - 1) " " substr(rest, j + 2)
          else { line = substr(line, 1, i - 1); incomment = 1 } } }
      line ~ /(^|[^_a-zA-Z0-9.>])(printf|puts|putchar|perror|exit|_exit|abort|assert)[[:space:]]*\(/ ||
      line ~ /(fprintf|vfprintf|fputs|fputc|fwrite)[[:space:]]*\(.*std(out|err)/ { print src ":" NR ": " $0 }
    ' src="$f" | while IFS= read -r l; do echo "lint: $l  (print/exit in library code)"; done | grep . && bad=1 || true
  fi
done
# CMake: a module library links only modules to its left
for m in $modules; do
  cm=$m/CMakeLists.txt
  [ -f "$cm" ] || continue
  for dep in $(grep -oE 'mw_[a-z_]+' "$cm" | sort -u); do
    case $dep in
      mw_core) to=core ;; mw_gguf) to=gguf ;; mw_quant) to=quant ;; mw_verify) to=verify ;;
      mw_hf) to=hf ;; mw_rt_kernels|mw_runtime) to=runtime ;; mw_calib) to=calib ;;
      mw_methods) to=methods ;; *) continue ;;
    esac
    allowed "$m" "$to" || finding "$cm: $m links $dep: a back edge"
  done
done
# the runtime is the phone binary: libc, libm, pthreads (and core/gguf/quant) only
if [ -f runtime/CMakeLists.txt ] && grep -nE 'OPENBLAS|ZLIB|CJSON' runtime/CMakeLists.txt; then
  finding "runtime/CMakeLists.txt links a library the phone runtime must not need"
fi
if [ $bad = 0 ]; then echo "lint: module graph clean ($(wc -w <<<"$files") files)"; fi
exit $bad
