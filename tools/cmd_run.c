/*
 * tools/cmd_run.c — `memwall run`: the device runtime on the desktop, the
 * same code as the phone binary memwall-run (tools/run_cli.c): generation
 * from -p PROMPT, or an interactive chat with -i.
 */
#include "tools/cmd.h"
#include "tools/run_cli.h"

int cmd_run(int argc, char **argv)
{
    return run_cli_main("memwall run", RUN_CLI_RUN, argc, argv);
}
