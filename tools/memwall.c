/*
 * tools/memwall.c — the `memwall` front end: dispatches `memwall <command>`
 * to tools/cmd_<command>.c through the table built from tools/cmd.h.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cmd.h"

static const struct mw_cmd commands[] = {
#define MW__CMD_ROW(name, help) {#name, cmd_##name, help},
    MW_COMMANDS(MW__CMD_ROW) MW_COMMANDS_FULL(MW__CMD_ROW)
#undef MW__CMD_ROW
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *out)
{
    fprintf(out,
            "usage: memwall <command> [options]\n"
            "       memwall help [<command>]\n"
            "       memwall --version\n"
            "\ncommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].help);
    fprintf(out,
            "\n'memwall <command> --help' describes a command's options.\n"
            "exit status: 0 ok, 1 bad input or failed verification, 2 usage error,\n"
            "3 I/O or resource error.\n");
}

static const struct mw_cmd *find_command(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0) return &commands[i];
    return NULL;
}

int main(int argc, char **argv)
{
    const int usage_rc = mw_status_exit_code(MW_E_USAGE);
    cmd_signals_install(NULL); /* also for --version / help: SIGPIPE ignored */
    if (argc < 2) {
        usage(stderr);
        return usage_rc;
    }
    const char *name = argv[1];
    if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0 ||
        strcmp(name, "version") == 0) {
        printf("memwall %s\n", MW_VERSION_STRING);
        return cmd_finish_output("--version", 0);
    }
    if (strcmp(name, "--help-man") == 0) { /* memwall(1) (tools/cmd_man.c) */
        char *u = NULL;
        size_t n = 0;
        FILE *f = open_memstream(&u, &n);
        if (!f) return mw_status_exit_code(MW_E_NOMEM);
        usage(f);
        int rc = fclose(f) == 0 ? 0 : mw_status_exit_code(MW_E_NOMEM);
        if (rc == 0)
            rc = cmd_man_print("memwall", "quantize, calibrate, verify and run LLMs in GGUF files",
                               u, NULL);
        free(u);
        return rc;
    }
    if (strcmp(name, "help") == 0 || cmd_is_help(name)) {
        if (argc >= 3 && strcmp(name, "help") == 0) {
            const struct mw_cmd *c = find_command(argv[2]);
            if (!c) {
                fprintf(stderr, "memwall help: unknown command '%s'\n", argv[2]);
                usage(stderr);
                return usage_rc;
            }
            char help_flag[] = "--help";
            char *sub_argv[] = {argv[2], help_flag, NULL};
            return c->fn(2, sub_argv);
        }
        usage(stdout);
        return cmd_finish_output("help", 0);
    }
    const struct mw_cmd *c = find_command(name);
    if (!c) {
        fprintf(stderr, "memwall: unknown command '%s'\n", name);
        usage(stderr);
        return usage_rc;
    }
    cmd_signals_install(c->name); /* hardening: see tools/cmd_signals.c */
    return c->fn(argc - 1, argv + 1);
}
