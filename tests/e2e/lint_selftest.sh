#!/usr/bin/env bash
# scripts/lint_modules.sh has teeth: on a small tree with one violation of
# each kind it reports every one and exits 1; on the real tree it exits 0.
set -euo pipefail
src=${MW_SRC:?}
tmp=${MW_TMP:?}/lint
rm -rf "$tmp" && mkdir -p "$tmp"/{core,quant,runtime,hf,tools,tests}
cat > "$tmp/core/a.c" <<'C'
#include "core/mw.h"
#include "../x.h"
#include "quant/quant.h"
/* printf( in a comment is fine */
static const char *s = "exit(1) in a string is fine";
static void f(void) { fprintf(stderr, "no"); }
static void g(void) { exit(1); }
C
printf '#include "quant/quant_int.h"\n#include "rt.h"\n#include "hf/hf.h"\n' > "$tmp/runtime/b.c"
printf '#include "quant/quant_int.h"\nint main(void) { printf("ok"); return 0; }\n' > "$tmp/tests/t.c"
printf '#include "hf/hf.h"\nint main(void) { printf("ok"); exit(0); }\n' > "$tmp/tools/m.c"
printf 'add_library(mw_quant STATIC q.c)\ntarget_link_libraries(mw_quant PUBLIC mw_calib)\n' > "$tmp/quant/CMakeLists.txt"
rc=0
out=$(bash "$src/scripts/lint_modules.sh" "$tmp") || rc=$?
echo "$out"
[ $rc = 1 ] || { echo "FAIL: lint exit $rc on a bad tree, expected 1"; exit 1; }
expect() { grep -qF -- "$1" <<<"$out" || { echo "FAIL: no finding '$1'"; exit 1; }; }
expect 'core/a.c:2: include "../x.h" climbs with ../'
expect 'core/a.c:3: core includes quant ("quant/quant.h"): a back edge'
expect 'core/a.c:6:'
expect 'core/a.c:7:'
expect "runtime/b.c:1: runtime includes another module's internals \"quant/quant_int.h\""
expect 'runtime/b.c:2: include "rt.h" does not name its module'
expect 'runtime/b.c:3: runtime includes hf ("hf/hf.h"): a back edge'
expect 'quant/CMakeLists.txt: quant links mw_calib: a back edge'
n=$(grep -c '^lint:' <<<"$out")
[ "$n" = 8 ] || { echo "FAIL: $n findings, expected 8 (comments, strings, tests/ and tools/ are allowed)"; exit 1; }
bash "$src/scripts/lint_modules.sh" "$src" || { echo "FAIL: the real tree has findings"; exit 1; }
echo "ok: 8 findings on the bad tree, none on the real one"
