/*
 * tools/cmd_opts.h — the option parser of every command (memwall's
 * subcommands and memwall-run): a table of option specs per command.
 *
 *   const struct cmd_opt opts[] = {
 *       {"-o", "--output", CMD_OPT_STR, .str = &out},
 *       {"-t", "--threads", CMD_OPT_U32, .u32 = &threads, .min = 1, .max = 512,
 *        .bad = "--threads: '%v' is not 1..512"},
 *   };
 *   struct cmd_opts p = {CMD_OPTS_TABLE(opts), .pos = &src, .max_pos = 1,
 *                        .too_many = "one SRC at a time (got '%p' and '%a')"};
 *   switch (cmd_opts_parse(&p, argc, argv)) ...   (or cmd_parse_args, cmd.h)
 *
 * argv[0] is the command name. An argument is an option when it starts with
 * '-' and is not "-" alone, up to "--" (the end of options; the rest are
 * positionals). -h / --help end the parse (CMD_OPTS_HELP). An option takes
 * its value from the next argument ("-o OUT", "--output OUT", even when that
 * starts with '-'), and a long option also as "--output=OUT". Options may be
 * repeated: the last value counts, except for CMD_OPT_CALL, which sees every
 * one. Values are converted as they are met, in argv order; a "late" option
 * is only recorded, and converted by cmd_opts_finish() (the last value),
 * so that a command can check what is missing first.
 *
 * Messages (the `bad`, `too_many` and `needs_value` texts) are templates:
 * %a the argument as given ("--ctx=x"), %v the value, %p the first
 * positional, %n / %x the spec's min / max (decimal), %% a '%'.
 *
 * Needs core only (mw_parse_size): memwall-run links it.
 */
#ifndef MW_TOOLS_CMD_OPTS_H
#define MW_TOOLS_CMD_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum cmd_opt_kind {
    CMD_OPT_FLAG,   /* no value: *flag = true */
    CMD_OPT_STR,    /* *str = the value, as given */
    CMD_OPT_U32,    /* a decimal number in [min, max] (no sign): *u32 */
    CMD_OPT_U64,    /* the same: *u64 */
    CMD_OPT_SIZE,   /* a size for mw_parse_size ("512M", "2GiB"): *u64 */
    CMD_OPT_DOUBLE, /* a finite number in [dmin, dmax] ((dmin, dmax] with dmin_open) */
    CMD_OPT_FLOAT,  /* the same as a float (the range checked on the float) */
    CMD_OPT_ENUM,   /* one of names (exact): *idx = its index */
    CMD_OPT_CALL,   /* call(ctx, value, msg, cap) at each occurrence */
};

/* call: false for a bad value, with a message written to msg (cap bytes,
 * NUL-terminated, sent as is), or msg left empty for the spec's `bad`. */
typedef bool (*cmd_opt_fn)(void *ctx, const char *val, char *msg, size_t cap);

struct cmd_opt {
    const char *sname; /* "-o", or NULL */
    const char *lname; /* "--output", or NULL */
    enum cmd_opt_kind kind;
    union { /* the destination, by kind; written only with a good value */
        bool *flag;
        const char **str;
        uint32_t *u32;
        uint64_t *u64;
        double *dbl;
        float *flt;
        int *idx;
        void *ctx; /* CALL: passed to call */
    };
    uint64_t min, max;        /* U32, U64 */
    double dmin, dmax;        /* DOUBLE, FLOAT */
    bool dmin_open;           /* DOUBLE, FLOAT: dmin itself is refused */
    const char *const *names; /* ENUM: NULL-terminated */
    cmd_opt_fn call;          /* CALL */
    const char *bad;          /* message for a bad value; NULL: "bad value '%v' for %a" */
    unsigned when;            /* 0: always an option; else only when cmd_opts.when shares a bit */
    bool late;                /* converted by cmd_opts_finish(), not as met */
    /* Mutually exclusive options share one_of (0: none given yet): a good
     * value sets it to one_of_val and *one_of_arg to the value as given; an
     * option of the group met when it is already set is the error
     * one_of_msg. */
    int *one_of;
    int one_of_val;
    const char **one_of_arg;
    const char *one_of_msg;
};

#define CMD_OPTS_MAX 48 /* specs per table */

enum {
    CMD_OPTS_NO_EQ = 1u << 0,       /* no "--long=VALUE" form */
    CMD_OPTS_NO_DASHDASH = 1u << 1, /* "--" is no end of options (an unknown option) */
};

struct cmd_opts {
    const struct cmd_opt *opt; /* the table: CMD_OPTS_TABLE(opts) */
    size_t n_opt;
    unsigned when;             /* the specs with a `when` that apply */
    unsigned flags;            /* CMD_OPTS_NO_* */
    const char **pos;          /* positionals, in order: max_pos slots */
    int max_pos;
    const char *too_many;      /* one positional more than max_pos; NULL:
                                * "unexpected argument '%a'" */
    const char *needs_value;   /* NULL: "%a needs a value" */
    /* out */
    int n_pos;
    char msg[2 * 4096 + 256];  /* the error of CMD_OPTS_ERR (two paths fit) */
    /* private */
    const char *late_val[CMD_OPTS_MAX], *late_arg[CMD_OPTS_MAX];
};

#define CMD_OPTS_TABLE(t) .opt = (t), .n_opt = sizeof(t) / sizeof((t)[0])

enum cmd_opts_rc {
    CMD_OPTS_OK,
    CMD_OPTS_HELP, /* -h or --help met: nothing after it was looked at */
    CMD_OPTS_ERR,  /* a usage error: p->msg (without the program's name) */
};

enum cmd_opts_rc cmd_opts_parse(struct cmd_opts *p, int argc, char **argv);
/* Convert the late options met, in table order; the first bad one is the
 * error. */
enum cmd_opts_rc cmd_opts_finish(struct cmd_opts *p);

/* The number rules of the kinds above, for CALL functions. */
bool cmd_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);
bool cmd_parse_double(const char *s, double *out); /* finite */

#endif /* MW_TOOLS_CMD_OPTS_H */
