/*
 * tools/cmd_quant.h — what `memwall quant`'s files share (internal to
 * tools): the parsed command line (cmd_quant_opts.c) and the tables the
 * command prints (cmd_quant_print.c). cmd_quant.c runs the command.
 */
#ifndef MW_TOOLS_CMD_QUANT_H
#define MW_TOOLS_CMD_QUANT_H

#include <stdbool.h>
#include <stdint.h>

#include "quant/quant.h"
#include "quant/quant_alloc.h"

enum budget_kind { BUDGET_NONE, BUDGET_BPW, BUDGET_SIZE, BUDGET_RAM };

/* --bpw / --size / --fit-ram: the request and what it became. */
struct alloc_req {
    int kind;             /* enum budget_kind */
    double bpw;           /* --bpw */
    uint64_t file_bytes;  /* --size, or --fit-ram's weight budget */
    const char *arg;      /* the budget option's value as given */
    unsigned long ctx;    /* --ctx */
    const char *kv_name;  /* --kv */
    const char *corpus;   /* --corpus */
    bool quiet;
    bool no_iquants;      /* --no-iquants */
    unsigned n_threads;
    char budget[160];     /* the memwall.quant.budget value */
    struct quant_overrides *own_ov; /* --fit-ram: the user's overrides and the flash
                                     * table's (freed with the job) */
};

/* The command line, checked for what is missing or contradicts. */
struct quant_args {
    const char *src, *out, *preset_name, *imatrix_path;
    const char *corpus_path, *method_name;
    const char *work_dir; /* --work-dir */
    const char *kv_name;  /* --kv */
    bool resume, no_probes, quiet, dry;
    bool src_is_dir;      /* SRC is a directory (an HF checkpoint) */
    uint32_t n_samples, seq_len, threads;
    uint64_t max_memory;  /* --max-memory (with --corpus); 0: not given (the machine's
                           * bound, core/mw_mem.h); UINT64_MAX: none (no bound) */
    uint64_t ctx;         /* --ctx */
    int progress;         /* enum cmd_progress_mode */
    const char *report, *card; /* --report FILE.html, --card README.md (tools/report.h) */
    struct quant_opts o;  /* the rules, overrides and thread count; no callbacks yet */
    struct quant_overrides *ov; /* owned: quant_overrides_free */
    struct alloc_req rq;
};

extern const char cmd_quant_usage[];

/* Parse argv into *a (zeroed here): CMD_GO_ON when the command goes on,
 * else the exit code (help printed, or a usage error). a->ov is to be freed
 * either way. */
int cmd_quant_parse(struct quant_args *a, int argc, char **argv);

/* --dry-run: the per-tensor plan on stdout. */
void cmd_quant_print_plan(const struct quant_plan *p);
/* What a budget's file is, for the final line: "mix for BUDGET: 30 IQ2_S,
 * 28 IQ1_M, 17 F32; file type IQ2_S" (the tensors of each type, most first;
 * the general.file_type written), into buf. */
void cmd_quant_mix(const struct quant_plan *p, const char *budget, char *buf, size_t cap);
/* The allocation of a budget (rq->budget) on stderr. */
void cmd_quant_print_alloc(const struct alloc_req *rq, const struct quant_budget_result *r);

#endif /* MW_TOOLS_CMD_QUANT_H */
