/* cli.h - what the airlock CLI's files share (airlock.c: options, output,
 * exit codes; session.c: the session verbs). Internal to cli/. */
#ifndef AL_CLI_H
#define AL_CLI_H

#include <stdbool.h>
#include <stddef.h>

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

/* The client for url (or --gateway); NULL with *rc set and why printed. */
struct al_client *cli_connect(const char *url, int *rc);
/* A file (or "-": stdin) of at most cap bytes into out; 0, or an exit code
 * (the problem printed). */
int cli_read_path(const char *path, struct al_bytes *out, size_t cap);
struct shown;
/* stdout and stderr of r, its verdict on stderr; the exit code for it. */
int cli_print_result(const struct al_result *r, bool json, const struct shown *sh);

/* images.c: airlock images [--dir DIR] [--json] */
int cli_images(const char *url, int argc, char **argv);

/* session.c: airlock session open|exec|py|put|get|ls|close ... */
int cli_session(const char *url, int argc, char **argv);

#endif
