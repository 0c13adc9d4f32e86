/* cli.h - what the airlock CLI's files share, top down: airlock.c (the
 * verbs' table, run, grade, wait, status, cancel), session_cmd.c, images.c
 * and admin.c (their verbs), usage.c (every command's usage and options),
 * jobopts.c (run's options), gradejob.c, print.c (results), junit.c and
 * io.c (allocations, local files). Each calls only those after it.
 * Internal to cli/. */
#ifndef AL_CLI_H
#define AL_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../client/client.h"
#include "../proto/job.h"
#include "../proto/result.h"

/* Exit codes for outcomes that are not the job's own exit code. */
enum {
	EXIT_USAGE = 2,
	EXIT_COMPILE = 3,      /* compile_error: a grading job's build failed */
	EXIT_REJECTED = 65,    /* EX_DATAERR: the job was refused */
	EXIT_NOINPUT = 66,     /* a local file is missing */
	EXIT_UNAVAILABLE = 69, /* Redis unreachable */
	EXIT_OSERR = 71,       /* out of memory */
	EXIT_SANDBOX = 70,     /* sandbox_error */
	EXIT_LOST = 75,	       /* worker_lost or expired: try again later */
	EXIT_TIMEOUT = 124,    /* like timeout(1) */
	EXIT_CANCELLED = 130,
	EXIT_MEMORY = 137,
	EXIT_CPU = 152,	   /* 128 + SIGXCPU */
	EXIT_OUTPUT = 153, /* 128 + SIGXFSZ */
};

struct cli_where;
/* admin.c: the operator's verbs (stats; dlq list|show|retry|purge; vm
 * list|stop|extend), printed one line per row; argv[0] is the verb. */
int cli_stats(const struct cli_where *where, int argc, char **argv);
int cli_dlq(const struct cli_where *where, int argc, char **argv);
int cli_vm(const struct cli_where *where, int argc, char **argv);

/* usage.c: every command's usage, from the rows its parser reads too */
enum cli_flag_kind {
	CF_FLAG, /* bool, set by the flag alone */
	CF_STR,	 /* const char *: the value itself (argv outlives it) */
	CF_NUM,	 /* uint64_t: a whole number, at least 1 */
};
struct cli_flag {
	const char *name; /* "--tier", "-c" */
	enum cli_flag_kind kind;
	size_t off;	   /* its place in the command's options struct */
	const char *value; /* the value's name in the usage (NULL: a flag) */
	const char *help;  /* '\n' between its lines */
	unsigned subs;	   /* the subcommands it is one of (bit i: the i-th); 0: all */
};
struct cli_cmd {
	const char *name, *args, *summary; /* "py", "ID (-c CODE | FILE | -)", ... */
	const struct cli_flag *flags;	   /* its options, or NULL */
	const struct cli_cmd *subs;	   /* its subcommands (a NULL name ends them) */
	void (*more)(FILE *f);		   /* run, submit: jobopts.c's options */
};
/* The options' structs of the commands that take them with cli_flags_take */
struct cli_sess_opts {
	const char *tier, *tenant, *image, *code, *outputs, *mode;
	uint64_t timeout_ms, cpu_ms, output_max, memory, cpu_budget_ms;
};
struct cli_grade_flags {
	const char *tier, *image, *compare;
	bool stop_on_failure, json, submit, print_job;
};
struct cli_wait_flags {
	bool json;
	uint64_t timeout_ms;
};
struct cli_images_flags {
	const char *dir;
	bool json;
};
extern const struct cli_flag cli_session_flags[], cli_grade_flags[], cli_wait_flags[],
    cli_images_flags[], cli_global_flags[];
extern const struct cli_cmd cli_commands[];
/* The command named name (NULL: none), and in *subcmd its subcommand sub
 * (NULL: none, or sub NULL). */
const struct cli_cmd *cli_command(const char *name, const char *sub, const struct cli_cmd **subcmd);
/* airlock's usage: every command, where they go, the exit codes. */
void cli_usage(FILE *f);
/* One command's usage (sub: one of its subcommands, or NULL). */
void cli_command_usage(FILE *f, const struct cli_cmd *c, const struct cli_cmd *sub);
void cli_flags_usage(FILE *f, const struct cli_flag *t, unsigned sub);
const struct cli_flag *cli_flag_find(const struct cli_flag *t, const char *arg);
/* The options of table t (those of subcommand number sub) out of argv into
 * opts; the other arguments stay, in order, *argc their count ("--": all
 * after it are). 0, or EXIT_USAGE (said why, naming who: "session py"). */
int cli_flags_take(const struct cli_flag *t, unsigned sub, const char *who, void *opts, int *argc,
		   char **argv);

/* jobopts.c: run's and submit's options, from one table */
struct cli_jobargs {
	bool json;	/* --json: the result as JSON */
	bool no_stream; /* --no-stream: the output at the end, not as it comes */
};
/* A job from argv (argv[0] the verb); 0, or an exit code (said why). */
int cli_build_job(int argc, char **argv, struct al_job *job, struct cli_jobargs *a);
/* The options' lines of the usage text. */
void cli_jobopts_usage(FILE *f);

/* connect.c: where the verbs go (--redis, --gateway, --token-file) */
struct cli_where {
	const char *redis;	/* a Redis URL (direct, the operator's way) */
	const char *gateway;	/* else a gateway's URL ... */
	const char *token_file; /* ... and its API key's file ($AIRLOCK_TOKEN first) */
};
/* The client for where; NULL with *rc set and why printed. */
struct al_client *cli_connect(const struct cli_where *where, int *rc);

/* print.c */
/* What run printed of the live output: bytes of stdout [1] and stderr [2],
 * and the last byte of each (the verdict's line starts a line of its own). */
struct shown {
	uint64_t n[3];
	int last[3];
	unsigned attempt;
};
struct al_chunk;
/* Print a live output chunk (al_client_stream's callback; arg: a shown). */
int cli_on_chunk(const struct al_chunk *ch, void *arg);
/* stdout and stderr of r, its verdict on stderr; the exit code for it. */
int cli_print_result(const struct al_result *r, bool json, const struct shown *sh);
/* The exit code for r (the job's own, or one of the enum above). */
int cli_exit_code_for(const struct al_result *r);

/* io.c */
/* p, or exit EXIT_OSERR with one line when it is NULL (out of memory). */
void *cli_need(void *p);
char *cli_strdup(const char *s);
char *cli_strndup(const char *s, size_t n);
/* A file (or "-": stdin) of at most cap bytes into out; 0, or an exit code
 * (the problem printed). */
int cli_read_path(const char *path, struct al_bytes *out, size_t cap);

/* images.c: airlock images [--dir DIR] [--json] */
int cli_images(const struct cli_where *where, int argc, char **argv);

/* session_cmd.c: airlock session open|exec|py|put|get|ls|close ... */
int cli_session(const struct cli_where *where, int argc, char **argv);

#endif
