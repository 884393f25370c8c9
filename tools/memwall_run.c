/*
 * tools/memwall_run.c — `memwall-run`, the phone binary: the runtime's
 * command line (tools/run_cli.c) as a program of its own. Built static for
 * aarch64 (cmake/aarch64-linux-gnu.cmake); links libc, libm and pthreads
 * only. The desktop runs the same code as `memwall run` / `memwall
 * perplexity`. Signals are handled by tools/cmd_signals.c, as in memwall.
 */
#include <stdio.h>
#include <string.h>

#include "core/mw.h"
#include "tools/cmd.h"
#include "tools/run_cli.h"

int main(int argc, char **argv)
{
    /* the model is mapped: a file truncated or rewritten under us raises
     * SIGBUS; report it (file, offset) and exit 3 instead of crashing;
     * SIGPIPE is ignored (a reader that closes early is no error) */
    cmd_signals_install_prog("memwall-run");
    if (argc >= 2 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)) {
        printf("memwall-run %s\n", MW_VERSION_STRING);
        return 0;
    }
    return run_cli_main("memwall-run", RUN_CLI_ANY, argc, argv);
}
