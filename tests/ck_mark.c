/*
 * tests/ck_mark.c — linked into every Check test (tests/CMakeLists.txt
 * mw_check_test, -Wl,--wrap=_mark_point).
 *
 * Check's ck_assert* macros call _mark_point() on every assertion that
 * passes, and that writes a location message to the runner (one write(2) per
 * assertion). A test that asserts inside a loop of millions of iterations
 * (every f16 value, every logit) then spends its time in the kernel: 4 M
 * passing assertions are ~30 s of wall time on a loaded box, ~10x that under
 * qemu. The assertions themselves are unchanged: each is still evaluated and
 * a failing one is reported by _ck_assert_failed with its file and line. Only
 * the "last passed location" (what Check prints as "(after this point)" for a
 * crash or a timeout) is sent less often: a location is forwarded the first
 * time it is reached, then once every 4096 passes (a crash inside such a loop
 * still names the loop's assertion).
 */
void __real__mark_point(const char *file, int line);
void __wrap__mark_point(const char *file, int line);

void __wrap__mark_point(const char *file, int line)
{
    /* direct-mapped by line: a loop alternating between a few assertion
       lines keeps each of them in its own slot */
    static struct {
        const char *file;
        int line;
        unsigned n;
    } seen[64];
    const unsigned s = (unsigned)line & 63u;
    if (seen[s].file == file && seen[s].line == line && (++seen[s].n & 4095u) != 0)
        return;
    seen[s].file = file;
    seen[s].line = line;
    seen[s].n = 0;
    __real__mark_point(file, line);
}
