/*
 * tools/cmd_perplexity.c — `memwall perplexity MODEL TEXT`: perplexity (and
 * KL divergence against saved logits) with llama.cpp's llama-perplexity
 * protocol, on the device runtime (tools/run_cli.c; memwall-run
 * --perplexity runs the same code).
 */
#include "tools/cmd.h"
#include "tools/run_cli.h"

int cmd_perplexity(int argc, char **argv)
{
    return run_cli_main("memwall perplexity", RUN_CLI_PERPLEXITY, argc, argv);
}
