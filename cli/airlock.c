/* airlock.c - the `airlock` command-line client. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../client/client.h"
#include "gradejob.h"
#include "../proto/json.h"
#include "../common/opt.h"
#include "../proto/grade.h"
#include "cli.h"
#include "junit.h"

/* Connect and submit job (its id into id); NULL with *rc set when either fails. */
static struct al_client *connect_and_submit(const struct cli_where *where, struct al_job *job,
					    char id[AL_ID_MAX + 1], bool *existing, int *rc)
{
	struct al_err err = {0};
	struct al_client *c = cli_connect(where, rc);

	if (c && al_client_submit(c, job, id, existing, &err)) {
		fprintf(stderr, "airlock: %s\n", err.msg);
		*rc = err.code == AL_EINVAL ? EXIT_REJECTED : EXIT_UNAVAILABLE;
		al_client_close(c);
		c = NULL;
	}
	return c;
}

static int cmd_run(const struct cli_where *where, int argc, char **argv, bool wait)
{
	struct al_job job;
	struct al_result res;
	struct al_err err = {0};
	struct al_client *c;
	char id[AL_ID_MAX + 1];
	struct cli_jobargs args;
	bool existing = false, streamed = false;
	struct shown sh = {.last = {'\n', '\n', '\n'}};
	int rc = cli_build_job(argc, argv, &job, &args);

	if (rc || !(c = connect_and_submit(where, &job, id, &existing, &rc)))
		goto out_job;
	if (!wait) {
		printf("%s\n", id);
		if (existing)
			fprintf(stderr,
				"airlock: idempotency key already used: this is the earlier job\n");
		goto out_client;
	}
	if (!args.json && !args.no_stream) {
		/* the output as it comes; what the stream missed comes from the result */
		if (al_client_stream(c, id, NULL, 0, cli_on_chunk, &sh, &err))
			/* e.g. a Redis user without XREAD: the result still has it all */
			fprintf(stderr,
				"airlock: no live output for job %s (%s); waiting for its "
				"result\n",
				id, err.msg);
		streamed = true; /* what was shown is not shown again */
	}
	if (al_client_wait(c, id, 0, &res, &err)) {
		fprintf(stderr, "airlock: job %s: %s\n", id, err.msg);
		rc = EXIT_UNAVAILABLE;
		goto out_client;
	}
	rc = cli_print_result(&res, args.json, streamed ? &sh : NULL);
	al_result_free(&res);
out_client:
	al_client_close(c);
out_job:
	al_job_free(&job);
	return rc;
}

/* airlock grade [options] DIR|FILE: a grading job, its verdict table. */
static int cmd_grade(const struct cli_where *where, int argc, char **argv)
{
	struct cli_grade_flags fl = {0};
	struct cli_grade_opts go = {0};
	struct al_job job;
	struct al_result res;
	struct al_err err = {0};
	struct al_client *c;
	char id[AL_ID_MAX + 1];
	bool json, submit_only, print_job, existing = false;
	int n = argc - 1, rc;

	if ((rc = cli_flags_take(cli_grade_flags, 0, "grade", &fl, &n, argv + 1)))
		return rc;
	if (fl.compare && al_compare_parse(fl.compare) < 0) {
		fprintf(stderr, "airlock: --compare: expected exact, trim or tokens, got \"%s\"\n",
			fl.compare);
		return EXIT_USAGE;
	}
	if (n != 1) {
		fprintf(stderr,
			"airlock: grade: give one directory or .json/.yaml file (see airlock "
			"grade --help)\n");
		return EXIT_USAGE;
	}
	go.tier = fl.tier;
	go.image = fl.image;
	go.compare = fl.compare;
	go.stop_on_failure = fl.stop_on_failure;
	json = fl.json;
	submit_only = fl.submit;
	print_job = fl.print_job;
	go.no_new_id = where->gateway && !print_job;
	if (cli_grade_job_load(argv[1], &go, &job, &err)) {
		fprintf(stderr, "airlock: %s\n", err.msg);
		return err.code == AL_EINVAL ? EXIT_REJECTED : EXIT_NOINPUT;
	}
	if (print_job) { /* what would be submitted, as JSON */
		json_t *j = al_job_to_json(&job);

		rc = j ? 0 : EXIT_OSERR;
		if (j)
			json_dumpf(j, stdout, JSON_SORT_KEYS | JSON_INDENT(2));
		putchar('\n');
		json_decref(j);
		goto out_job;
	}
	if (!(c = connect_and_submit(where, &job, id, &existing, &rc)))
		goto out_job;
	if (submit_only) {
		printf("%s\n", id);
		rc = 0;
		goto out_client;
	}
	if (al_client_wait(c, id, 0, &res, &err)) {
		fprintf(stderr, "airlock: job %s: %s\n", id, err.msg);
		rc = EXIT_UNAVAILABLE;
		goto out_client;
	}
	if (json) {
		rc = cli_print_result(&res, true, NULL);
	} else {
		cli_grade_print(stdout, &res);
		rc = cli_exit_code_for(&res);
	}
	al_result_free(&res);
out_client:
	al_client_close(c);
out_job:
	al_job_free(&job);
	return rc;
}

static int cmd_wait(const struct cli_where *where, int argc, char **argv)
{
	struct cli_wait_flags fl = {0};
	struct al_result res;
	struct al_err err = {0};
	struct al_client *c;
	const char *id;
	bool json;
	int n = argc - 1, rc = 0;

	if ((rc = cli_flags_take(cli_wait_flags, 0, "wait", &fl, &n, argv + 1)))
		return rc;
	if (n != 1) {
		fprintf(stderr,
			"airlock: wait: which job? give its ID (see airlock wait --help)\n");
		return EXIT_USAGE;
	}
	id = argv[1];
	json = fl.json;
	if (!(c = cli_connect(where, &rc)))
		return rc;
	if (al_client_wait(c, id, fl.timeout_ms, &res, &err)) {
		fprintf(stderr, "airlock: job %s: %s\n", id, err.msg);
		al_client_close(c);
		return EXIT_UNAVAILABLE;
	}
	rc = cli_print_result(&res, json, NULL);
	al_result_free(&res);
	al_client_close(c);
	return rc;
}

static int cmd_status(const struct cli_where *where, const char *id)
{
	struct al_result res;
	struct al_err err = {0};
	struct al_client *c;
	enum al_job_state state;
	int rc = 0;

	if (!(c = cli_connect(where, &rc)))
		return rc;
	if (al_client_status(c, id, &state, &res, &err)) {
		fprintf(stderr, "airlock: %s\n", err.msg);
		al_client_close(c);
		return err.code == AL_EINVAL ? 1 : EXIT_UNAVAILABLE;
	}
	printf("%s %s", id, al_job_state_name(state));
	if (res.version)
		printf(" %s%s%s", al_status_name(res.status), res.error ? ": " : "",
		       res.error ? res.error : "");
	putchar('\n');
	al_result_free(&res);
	al_client_close(c);
	return 0;
}

static int cmd_cancel(const struct cli_where *where, const char *id)
{
	struct al_err err = {0};
	struct al_client *c;
	int rc = 0;

	if (!(c = cli_connect(where, &rc)))
		return rc;
	rc = al_client_cancel(c, id, &err);
	al_client_close(c);
	if (rc < 0) {
		fprintf(stderr, "airlock: %s\n", err.msg);
		return err.code == AL_EINVAL ? 1 : EXIT_UNAVAILABLE;
	}
	printf("%s %s\n", id,
	       rc == AL_CANCEL_ENDED	   ? "cancelled"
	       : rc == AL_CANCEL_KILL_SENT ? "kill requested"
	       : rc == AL_CANCEL_REQUESTED
		   ? "cancel requested (no scheduler answered in time; it is "
		     "carried out when one reads the intake)"
		   : "already finished");
	return 0;
}

static int cmd_check_job(const char *path)
{
	struct al_bytes b = {0};
	struct al_job job;
	struct al_err err = {0};
	json_t *j;
	int rc = cli_read_path(path, &b, AL_JOB_MAX_BYTES);

	if (rc)
		return rc;
	if (al_job_decode(b.data, b.len, &job, &err)) {
		fprintf(stderr, "airlock: %s: invalid job: %s\n", path, err.msg);
		free(b.data);
		return 1;
	}
	if (!(j = al_job_to_json(&job))) {
		fprintf(stderr, "airlock: out of memory making the job's JSON\n");
		al_job_free(&job);
		free(b.data);
		return 1;
	}
	json_dumpf(j, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
	putchar('\n');
	json_decref(j);
	al_job_free(&job);
	free(b.data);
	return 0;
}

static int verb_version(const struct cli_where *where, int argc, char **argv)
{
	(void)where;
	(void)argc;
	(void)argv;
	printf("airlock protocol %d\n", AL_PROTO_VERSION);
	return 0;
}

/* airlock help [COMMAND [SUB]] */
static int verb_help(const struct cli_where *where, int argc, char **argv)
{
	const struct cli_cmd *c, *sub;

	(void)where;
	if (argc < 2) {
		cli_usage(stdout);
		return 0;
	}
	c = cli_command(argv[1], argc > 2 ? argv[2] : NULL, &sub);
	if (!c || (argc > 2 && !sub)) {
		fprintf(stderr, "airlock help: no command \"%s%s%s\" (airlock help lists them)\n",
			argv[1], argc > 2 ? " " : "", argc > 2 ? argv[2] : "");
		return EXIT_USAGE;
	}
	cli_command_usage(stdout, c, sub);
	return 0;
}

static int verb_run(const struct cli_where *where, int argc, char **argv)
{
	return cmd_run(where, argc, argv, !strcmp(argv[0], "run"));
}

static int verb_status(const struct cli_where *where, int argc, char **argv)
{
	(void)argc;
	return cmd_status(where, argv[1]);
}

static int verb_cancel(const struct cli_where *where, int argc, char **argv)
{
	(void)argc;
	return cmd_cancel(where, argv[1]);
}

static int verb_check_job(const struct cli_where *where, int argc, char **argv)
{
	(void)where;
	(void)argc;
	return cmd_check_job(argv[1]);
}

/* The verbs: name, how many arguments after it (min..max), the handler
 * (given the verb's own argc/argv: argv[0] is the verb). */
static const struct verb {
	const char *name;
	int min, max;
	int (*fn)(const struct cli_where *where, int argc, char **argv);
} verbs[] = {
    {"run", 0, 1 << 20, verb_run},
    {"submit", 0, 1 << 20, verb_run},
    {"wait", 0, 1 << 20, cmd_wait},
    {"grade", 0, 1 << 20, cmd_grade},
    {"status", 1, 1, verb_status},
    {"cancel", 1, 1, verb_cancel},
    {"check-job", 1, 1, verb_check_job},
    {"stats", 0, 0, cli_stats},
    {"dlq", 1, 2, cli_dlq},
    {"vm", 1, 3, cli_vm},
    {"session", 1, 1 << 20, cli_session},
    {"images", 0, 3, cli_images},
    {"version", 0, 0, verb_version},
    {"--version", 0, 0, verb_version},
    {"help", 0, 2, verb_help},
    {"--help", 0, 2, verb_help},
    {"-h", 0, 2, verb_help},
};

int main(int argc, char **argv)
{
	struct cli_where where = {
	    .redis = getenv("AIRLOCK_REDIS") ? getenv("AIRLOCK_REDIS") : "redis://127.0.0.1:6379",
	    .gateway = getenv("AIRLOCK_GATEWAY") && *getenv("AIRLOCK_GATEWAY")
			   ? getenv("AIRLOCK_GATEWAY")
			   : NULL,
	};
	int i = 1;

	const struct cli_flag *g;
	const struct cli_cmd *cmd, *sub;

	/* where the command goes: usage.c's rows */
	while (i + 1 < argc && (g = cli_flag_find(cli_global_flags, argv[i]))) {
		*(const char **)((char *)&where + g->off) = argv[i + 1];
		if (!strcmp(g->name, "--redis"))
			where.gateway = NULL; /* the last one given wins */
		i += 2;
	}
	if (i < argc && !strcmp(argv[i], "--token")) {
		fprintf(stderr, "airlock: --token is not an option (a key in argv shows in ps): "
				"use $AIRLOCK_TOKEN or --token-file FILE\n");
		return EXIT_USAGE;
	}
	if (i >= argc) {
		cli_usage(stderr);
		return EXIT_USAGE;
	}
	argc -= i - 1;
	argv += i - 1;
	/* argv[1] is the command now. COMMAND [SUB] ... --help: its usage,
	 * and nothing opened */
	cmd = cli_command(argv[1], argc > 2 ? argv[2] : NULL, &sub);
	for (int k = 2; cmd && k < argc && strcmp(argv[k], "--"); k++)
		if (!strcmp(argv[k], "--help") || !strcmp(argv[k], "-h")) {
			cli_command_usage(stdout, cmd, sub);
			return 0;
		}
	/* one row of the verb table */
	for (size_t v = 0; v < sizeof(verbs) / sizeof(verbs[0]); v++)
		if (!strcmp(argv[1], verbs[v].name) && argc - 2 >= verbs[v].min &&
		    argc - 2 <= verbs[v].max)
			return verbs[v].fn(&where, argc - 1, argv + 1);
	if (cmd) { /* a command, with too few or too many arguments */
		fprintf(stderr, "airlock %s: wrong arguments\n", argv[1]);
		cli_command_usage(stderr, cmd, sub);
	} else {
		fprintf(stderr, "airlock: unknown command %s (airlock help lists them)\n", argv[1]);
	}
	return EXIT_USAGE;
}
