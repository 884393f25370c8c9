/*
 * tools/run_cli.h — the runtime's command line, shared by the phone binary
 * `memwall-run` (tools/memwall_run.c) and the desktop commands `memwall run`
 * and `memwall perplexity` (tools/cmd_run.c, tools/cmd_perplexity.c): one
 * parser, one driver, so the desktop runs exactly the phone's code.
 */
#ifndef MW_TOOLS_RUN_CLI_H
#define MW_TOOLS_RUN_CLI_H

enum run_cli_mode {
    RUN_CLI_ANY,        /* memwall-run: generation, chat or --perplexity */
    RUN_CLI_RUN,        /* memwall run: generation or chat */
    RUN_CLI_PERPLEXITY, /* memwall perplexity MODEL TEXT */
};

/* prog: the name in messages ("memwall-run", "memwall run"). argv[0] is the
 * program or command name. Returns the process exit code (0 ok, 1 bad
 * file/input, 2 usage, 3 I/O or resource). */
int run_cli_main(const char *prog, enum run_cli_mode mode, int argc, char **argv);

#endif /* MW_TOOLS_RUN_CLI_H */
