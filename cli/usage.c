/* usage.c - every command's usage, from the rows its parser reads too:
 * `airlock help [COMMAND [SUB]]` and `airlock COMMAND [SUB] --help` print
 * from here, and session_cmd.c, images.c and airlock.c (wait, grade) take
 * their options with cli_flags_take from the same rows, so the usage
 * cannot name an option the parser lacks, nor the parser take one the
 * usage hides. run's and submit's options are jobopts.c's own table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/opt.h"
#include "cli.h"

#define SESS(f) offsetof(struct cli_sess_opts, f)
#define SUB(n)	(1u << (n))
enum { S_OPEN, S_EXEC, S_PY, S_PUT, S_GET, S_LS, S_CLOSE, S_INFO };
#define CALLS (SUB(S_EXEC) | SUB(S_PY))

const struct cli_flag cli_session_flags[] = {
    {"--tenant", CF_STR, SESS(tenant), "T", "the session's tenant (default default)", 0},
    {"--tier", CF_STR, SESS(tier), "T", "the tier (default trusted)", SUB(S_OPEN)},
    {"--image", CF_STR, SESS(image), "NAME", "a catalogue image the tier offers", SUB(S_OPEN)},
    {"--memory", CF_NUM, SESS(memory), "BYTES", "the session's memory (all its calls')",
     SUB(S_OPEN)},
    {"--timeout", CF_NUM, SESS(timeout_ms), "MS",
     "open: each call's default time; py, exec: this call's (past it the call "
     "stops, timeout, and the session goes on)",
     SUB(S_OPEN) | CALLS},
    {"--cpu-budget", CF_NUM, SESS(cpu_budget_ms), "MS",
     "the CPU time of all its calls; the call that passes it ends the "
     "session (default none, never above the tier's)",
     SUB(S_OPEN)},
    {"--cpu", CF_NUM, SESS(cpu_ms), "MS", "the call's CPU time (cpu_limit past it)", CALLS},
    {"--output-max", CF_NUM, SESS(output_max), "BYTES",
     "each stream's first and last halves kept (output_limit)", CALLS},
    {"-c", CF_STR, SESS(code), "CODE", "the code (py) or shell line (exec) itself", CALLS},
    {"--outputs", CF_STR, SESS(outputs), "DIR", "save the call's figures here", SUB(S_PY)},
    {"--mode", CF_STR, SESS(mode), "OCTAL", "the file's mode (default 644)", SUB(S_PUT)},
    {NULL, 0, 0, NULL, NULL, 0},
};

#define GRADE(f) offsetof(struct cli_grade_flags, f)
const struct cli_flag cli_grade_flags[] = {
    {"--tier", CF_STR, GRADE(tier), "T", "the tier (default: grade.yaml's, else trusted)", 0},
    {"--image", CF_STR, GRADE(image), "NAME", "a catalogue image the tier offers", 0},
    {"--compare", CF_STR, GRADE(compare), "exact|trim|tokens",
     "how an output is compared with the expected one", 0},
    {"--stop-on-failure", CF_FLAG, GRADE(stop_on_failure), NULL,
     "skip the tests after the first that fails", 0},
    {"--json", CF_FLAG, GRADE(json), NULL, "print the result as JSON", 0},
    {"--submit", CF_FLAG, GRADE(submit), NULL, "submit, print the job's id, do not wait", 0},
    {"--print-job", CF_FLAG, GRADE(print_job), NULL,
     "print the grading job as JSON and submit nothing", 0},
    {NULL, 0, 0, NULL, NULL, 0},
};

#define WAIT(f) offsetof(struct cli_wait_flags, f)
const struct cli_flag cli_wait_flags[] = {
    {"--json", CF_FLAG, WAIT(json), NULL, "print the result as JSON", 0},
    {"--timeout-wait", CF_NUM, WAIT(timeout_ms), "MS", "give up after this long (default never)",
     0},
    {NULL, 0, 0, NULL, NULL, 0},
};

#define IMAGES(f) offsetof(struct cli_images_flags, f)
const struct cli_flag cli_images_flags[] = {
    {"--dir", CF_STR, IMAGES(dir), "DIR", "the catalogue (default /var/lib/airlock/images)", 0},
    {"--json", CF_FLAG, IMAGES(json), NULL, "print it as JSON", 0},
    {NULL, 0, 0, NULL, NULL, 0},
};

#define WHERE(f) offsetof(struct cli_where, f)
const struct cli_flag cli_global_flags[] = {
    {"--redis", CF_STR, WHERE(redis), "URL",
     "Redis, the operator's way in (default $AIRLOCK_REDIS, else "
     "redis://127.0.0.1:6379)",
     0},
    {"--gateway", CF_STR, WHERE(gateway), "URL",
     "a gateway, a tenant's way in (default $AIRLOCK_GATEWAY): run, submit, "
     "wait, status, cancel, grade, session",
     0},
    {"--token-file", CF_STR, WHERE(token_file), "FILE",
     "the gateway's API key, else $AIRLOCK_TOKEN (never a flag: it "
     "would show in ps)",
     0},
    {NULL, 0, 0, NULL, NULL, 0},
};

static const struct cli_cmd dlq_subs[] = {
    {"list", "", "the dead letters, one line each", NULL, NULL, NULL},
    {"show", "ENTRY", "one dead letter, its job whole", NULL, NULL, NULL},
    {"retry", "ENTRY", "submit its job again", NULL, NULL, NULL},
    {"purge", "", "drop every dead letter", NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL, NULL},
};

static const struct cli_cmd vm_subs[] = {
    {"list", "", "service VMs and their leases", NULL, NULL, NULL},
    {"stop", "NAME", "end a service VM", NULL, NULL, NULL},
    {"extend", "NAME MS", "move its lease's end MS from now (at most the policy's)", NULL, NULL,
     NULL},
    {NULL, NULL, NULL, NULL, NULL, NULL},
};

static const struct cli_cmd session_subs[] = {
    {"open", "[options]", "open a session; prints its id", cli_session_flags, NULL, NULL},
    {"exec", "ID [options] (-c LINE | -- PROG ARGS...)", "a command in its sandbox",
     cli_session_flags, NULL, NULL},
    {"py", "ID [options] (-c CODE | FILE | -)", "Python in its interpreter (state kept)",
     cli_session_flags, NULL, NULL},
    {"put", "ID LOCAL REMOTE [--mode OCTAL]", "a file into it", cli_session_flags, NULL, NULL},
    {"get", "ID REMOTE [LOCAL]", "a file out of it (stdout without LOCAL)", cli_session_flags, NULL,
     NULL},
    {"ls", "ID [PATH]", "its files: SIZE and PATH lines", cli_session_flags, NULL, NULL},
    {"close", "ID", "end it: the sandbox and its files are gone", cli_session_flags, NULL, NULL},
    {"info", "ID", "its limits, usage and time left (JSON)", cli_session_flags, NULL, NULL},
    {"pause", "ID", "save it whole and free its sandbox; its next call resumes it (microVM)",
     cli_session_flags, NULL, NULL},
    {"resume", "ID", "bring a paused session back now (its info, JSON)", cli_session_flags, NULL,
     NULL},
    {"fork", "ID [N]", "N (default 1) new paused sessions from one snapshot of it (JSON: ids)",
     cli_session_flags, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL, NULL},
};

const struct cli_cmd cli_commands[] = {
    {"run", "[options] (-c CODE | FILE | -- ARGV...)",
     "submit, wait, print the output as it comes, exit with the job's exit code", NULL, NULL,
     cli_jobopts_usage},
    {"submit", "[options] (-c CODE | FILE | -- ARGV...)", "submit; print the new job's id", NULL,
     NULL, cli_jobopts_usage},
    {"wait", "ID [options]", "wait for a job's result and print it", cli_wait_flags, NULL, NULL},
    {"status", "ID", "its state, and its result when there is one", NULL, NULL, NULL},
    {"cancel", "ID", "cancel a queued or running job", NULL, NULL, NULL},
    {"grade", "[options] DIR|FILE",
     "a grading job (build once, many tests): a directory (grade.yaml, files/, "
     "tests/NAME.in and .out) or a .json/.yaml job; prints each test's verdict",
     cli_grade_flags, NULL, NULL},
    {"session", "SUB ...", "a sandbox whose state lasts between calls (PROTOCOL.md)", NULL,
     session_subs, NULL},
    {"stats", "", "queues per tier, workers, results by status (operator)", NULL, NULL, NULL},
    {"dlq", "SUB ...", "dead letters: jobs past their attempts (operator)", NULL, dlq_subs, NULL},
    {"vm", "SUB ...", "service VMs and their leases (operator)", NULL, vm_subs, NULL},
    {"images", "[options]",
     "the catalogue images on this host: hash, size, their recipes' packages", cli_images_flags,
     NULL, NULL},
    {"check-job", "FILE|-", "decode a msgpack job, print it as JSON", NULL, NULL, NULL},
    {"version", "", "the protocol version this build speaks", NULL, NULL, NULL},
    {"help", "[COMMAND [SUB]]", "this text, or a command's", NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL, NULL},
};

static const struct cli_cmd *find(const struct cli_cmd *t, const char *name)
{
	for (; t && t->name; t++)
		if (!strcmp(t->name, name))
			return t;
	return NULL;
}

const struct cli_cmd *cli_command(const char *name, const char *sub, const struct cli_cmd **subcmd)
{
	const struct cli_cmd *c = find(cli_commands, name);

	*subcmd = c && sub ? find(c->subs, sub) : NULL;
	return c;
}

#define WIDTH 79

/* text from column at (where the line already is) to WIDTH, its words
 * wrapped onto lines beginning at column col ('\n' in it: a line ends) */
static void wrap(FILE *f, const char *text, int at, int col)
{
	while (*text) {
		size_t n = strcspn(text, " \n");

		if (at > col && at + 1 + (int)n > WIDTH) {
			fprintf(f, "\n%*s", col, "");
			at = col;
		} else if (at > col) {
			fputc(' ', f);
			at++;
		}
		fprintf(f, "%.*s", (int)n, text);
		at += (int)n;
		text += n;
		if (*text == '\n') {
			fprintf(f, "\n%*s", col, "");
			at = col;
		}
		if (*text)
			text++;
	}
	fputc('\n', f);
}

/* "  head  text": text in a column of its own from col, beneath head when
 * head is wider than that. */
static void lines(FILE *f, const char *head, const char *text, int col)
{
	if ((int)strlen(head) + 4 > col)
		fprintf(f, "  %s\n%*s", head, col, "");
	else
		fprintf(f, "  %-*s", col - 2, head);
	wrap(f, text, col, col);
}

void cli_flags_usage(FILE *f, const struct cli_flag *t, unsigned sub)
{
	for (; t && t->name; t++) {
		char head[64];

		if (t->subs && !(t->subs & (1u << sub)))
			continue;
		snprintf(head, sizeof(head), "%s%s%s", t->name, t->value ? " " : "",
			 t->value ? t->value : "");
		lines(f, head, t->help, 26);
	}
}

/* The index of sub among c's subcommands. */
static unsigned sub_index(const struct cli_cmd *c, const struct cli_cmd *sub)
{
	return sub ? (unsigned)(sub - c->subs) : 0;
}

void cli_command_usage(FILE *f, const struct cli_cmd *c, const struct cli_cmd *sub)
{
	const struct cli_cmd *s;

	if (sub) {
		fprintf(f, "usage: airlock %s %s%s%s\n  ", c->name, sub->name,
			*sub->args ? " " : "", sub->args);
		wrap(f, sub->summary, 2, 2);
		if (sub->flags) {
			fprintf(f, "options:\n");
			cli_flags_usage(f, sub->flags, sub_index(c, sub));
		}
		return;
	}
	if (c->subs) {
		fprintf(f, "usage: airlock %s SUB ...\n  ", c->name);
		wrap(f, c->summary, 2, 2);
		for (s = c->subs; s->name; s++) {
			char head[80];

			snprintf(head, sizeof(head), "%s %s%s%s", c->name, s->name,
				 *s->args ? " " : "", s->args);
			lines(f, head, s->summary, 36);
		}
		fprintf(f, "airlock %s SUB --help: a subcommand's options\n", c->name);
		return;
	}
	fprintf(f, "usage: airlock %s%s%s\n  ", c->name, *c->args ? " " : "", c->args);
	wrap(f, c->summary, 2, 2);
	if (c->flags || c->more)
		fprintf(f, "options:\n");
	cli_flags_usage(f, c->flags, 0);
	if (c->more)
		c->more(f);
}

void cli_usage(FILE *f)
{
	fprintf(f,
		"usage: airlock [--redis URL | --gateway URL [--token-file FILE]] COMMAND ...\n");
	for (const struct cli_cmd *c = cli_commands; c->name; c++) {
		char head[80];

		snprintf(head, sizeof(head), "%s%s%s", c->name, *c->args ? " " : "", c->args);
		lines(f, head, c->summary, 36);
	}
	fprintf(f, "airlock help COMMAND [SUB], or airlock COMMAND [SUB] --help: its options.\n"
		   "where the commands go:\n");
	cli_flags_usage(f, cli_global_flags, 0);
	fprintf(
	    f, "Exit codes of run: the job's exit code; 128+N when killed by signal N;\n"
	       "  124 timeout, 137 memory_limit, 152 cpu_limit, 153 output_limit, 130 cancelled,\n"
	       "  65 rejected, 70 sandbox_error, 75 worker_lost or expired, 69 Redis unreachable,\n"
	       "  66 a local file is missing, 71 out of memory, 2 bad usage.\n"
	       "Exit codes of grade: 0 every test accepted, 1 one was not, 3 compile_error; the\n"
	       "  others as run's (65 also for a grading job that cannot be read).\n");
}

const struct cli_flag *cli_flag_find(const struct cli_flag *t, const char *arg)
{
	for (; t && t->name; t++)
		if (!strcmp(t->name, arg))
			return t;
	return NULL;
}

int cli_flags_take(const struct cli_flag *t, unsigned sub, const char *who, void *opts, int *argc,
		   char **argv)
{
	int out = 0;

	for (int i = 0; i < *argc; i++) {
		const char *a = argv[i];
		const struct cli_flag *fl = cli_flag_find(t, a);
		char *at;

		if (!strcmp(a, "--")) { /* the rest is a program and its arguments */
			while (++i < *argc)
				argv[out++] = argv[i];
			break;
		}
		if (!fl && a[0] == '-' && a[1]) {
			fprintf(stderr, "airlock %s: unknown option %s (see airlock %s --help)\n",
				who, a, who);
			return EXIT_USAGE;
		}
		if (!fl) {
			argv[out++] = argv[i];
			continue;
		}
		if (fl->subs && !(fl->subs & (1u << sub))) {
			fprintf(stderr,
				"airlock %s: %s is not one of its options (see airlock %s "
				"--help)\n",
				who, a, who);
			return EXIT_USAGE;
		}
		at = (char *)opts + fl->off;
		if (fl->kind == CF_FLAG) {
			*(bool *)at = true;
			continue;
		}
		if (i + 1 >= *argc) {
			fprintf(stderr, "airlock %s: %s needs a value\n", who, a);
			return EXIT_USAGE;
		}
		if (fl->kind == CF_STR) {
			*(const char **)at = argv[++i];
		} else if (!al_parse_u64(argv[++i], 1, UINT64_MAX, (uint64_t *)at)) {
			fprintf(stderr, "airlock %s: %s: expected a whole number, got \"%s\"\n",
				who, a, argv[i]);
			return EXIT_USAGE;
		}
	}
	*argc = out;
	return 0;
}
