/* airlock.c - the `airlock` command-line client. */
#include <errno.h>
#include <getopt.h>
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

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: airlock [--redis URL | --gateway URL [--token-file FILE]] COMMAND ...\n"
	    "  run [options] (-c CODE | FILE | -- ARGV...)  submit, wait, print the output, exit\n"
	    "                                     with the job's exit code\n"
	    "  submit [options] (-c CODE | FILE | -- ARGV...)  print the new job's id\n"
	    "  wait ID [--json] [--timeout-wait MS]   wait for a result\n"
	    "  status ID                          state, and the result when there is one\n"
	    "  cancel ID                          cancel a queued or running job\n"
	    "  stats                              queues per tier, workers, results by status\n"
	    "  dlq list | show ENTRY | retry ENTRY | purge   dead letters\n"
	    "  vm list | stop NAME | extend NAME MS          service VMs and their leases\n"
	    "  session open [--tier T] [--memory B] [--timeout MS]   open a session (prints its "
	    "id)\n"
	    "  session py ID (-c CODE | FILE | -) [--outputs DIR]    Python in its interpreter\n"
	    "  session exec ID (-c LINE | -- ARGV...)    a command in its sandbox\n"
	    "    py, exec: --timeout MS --cpu MS (the call's; past either it stops, the\n"
	    "    session goes on) --output-max BYTES (each stream's head and tail kept)\n"
	    "  session put ID LOCAL REMOTE | get ID REMOTE [LOCAL] | ls ID | close ID | info ID\n"
	    "                                     (state lasts between calls; PROTOCOL.md)\n"
	    "  check-job FILE|-                   decode a msgpack job, print it as JSON\n"
	    "  images [--dir DIR] [--json]        the catalogue images on this host: hash, size,\n"
	    "                                     their recipes' packages and versions\n"
	    "  grade [options] DIR|FILE           a grading job (build once, many tests): a\n"
	    "                                     directory (grade.yaml, files/, tests/NAME.in\n"
	    "                                     and .out) or a .json/.yaml job; prints each\n"
	    "                                     test's verdict. --tier T --image NAME\n"
	    "                                     --compare exact|trim|tokens --stop-on-failure\n"
	    "                                     --json --submit (print the id) --print-job\n"
	    "  help                               this text\n");
	fprintf(f, "run/submit options (run: the output is printed as it comes):\n");
	cli_jobopts_usage(f);
	fprintf(
	    f, "Redis: --redis or $AIRLOCK_REDIS (default redis://127.0.0.1:6379)\n"
	       "Gateway (a tenant's way in: run, submit, wait, status, cancel): --gateway or\n"
	       "  $AIRLOCK_GATEWAY, the API key from $AIRLOCK_TOKEN or --token-file FILE (never a\n"
	       "  flag: it would show in ps)\n"
	       "Exit codes of run: the job's exit code; 128+N when killed by signal N;\n"
	       "  124 timeout, 137 memory_limit, 152 cpu_limit, 153 output_limit, 130 cancelled,\n"
	       "  65 rejected, 70 sandbox_error, 75 worker_lost or expired, 69 Redis unreachable,\n"
	       "  66 a local file is missing, 71 out of memory, 2 bad usage.\n"
	       "Exit codes of grade: 0 every test accepted, 1 one was not, 3 compile_error; the\n"
	       "  others as run's (65 also for a grading job that cannot be read).\n");
}

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
	static const struct option opts[] = {
	    {"tier", required_argument, NULL, 't'},    {"image", required_argument, NULL, 'g'},
	    {"compare", required_argument, NULL, 'C'}, {"stop-on-failure", no_argument, NULL, 's'},
	    {"json", no_argument, NULL, 'j'},	       {"submit", no_argument, NULL, 'S'},
	    {"print-job", no_argument, NULL, 'p'},     {NULL, 0, NULL, 0},
	};
	struct cli_grade_opts go = {0};
	struct al_job job;
	struct al_result res;
	struct al_err err = {0};
	struct al_client *c;
	char id[AL_ID_MAX + 1];
	bool json = false, submit_only = false, print_job = false, existing = false;
	int o, rc;

	optind = 1;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 't': go.tier = optarg; break;
		case 'g': go.image = optarg; break;
		case 'C':
			if (al_compare_parse(optarg) < 0) {
				fprintf(stderr,
					"airlock: --compare: expected exact, trim or tokens, got "
					"\"%s\"\n",
					optarg);
				return EXIT_USAGE;
			}
			go.compare = optarg;
			break;
		case 's': go.stop_on_failure = true; break;
		case 'j': json = true; break;
		case 'S': submit_only = true; break;
		case 'p': print_job = true; break;
		default: usage(stderr); return EXIT_USAGE;
		}
	}
	if (optind + 1 != argc) {
		fprintf(stderr, "airlock: grade: give one directory or .json/.yaml file\n");
		return EXIT_USAGE;
	}
	go.no_new_id = where->gateway && !print_job;
	if (cli_grade_job_load(argv[optind], &go, &job, &err)) {
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
	struct al_result res;
	struct al_err err = {0};
	struct al_client *c;
	uint64_t tmo = 0;
	bool json = false;
	const char *id = NULL;
	int rc = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!strcmp(argv[i], "--timeout-wait") && i + 1 < argc) {
			if (!al_parse_u64(argv[++i], 0, UINT64_MAX, &tmo)) {
				fprintf(stderr,
					"airlock: --timeout-wait: expected a whole number, got "
					"\"%s\"\n",
					argv[i]);
				return EXIT_USAGE;
			}
		} else
			id = argv[i];
	}
	if (!id) {
		fprintf(stderr, "airlock: wait: which job? give its ID\n");
		return EXIT_USAGE;
	}
	if (!(c = cli_connect(where, &rc)))
		return rc;
	if (al_client_wait(c, id, tmo, &res, &err)) {
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

static int verb_help(const struct cli_where *where, int argc, char **argv)
{
	(void)where;
	(void)argc;
	(void)argv;
	usage(stdout);
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
    {"help", 0, 0, verb_help},
    {"--help", 0, 0, verb_help},
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

	while (i + 1 < argc && (!strcmp(argv[i], "--redis") || !strcmp(argv[i], "--gateway") ||
				!strcmp(argv[i], "--token-file"))) {
		if (!strcmp(argv[i], "--redis")) {
			where.redis = argv[i + 1];
			where.gateway = NULL;
		} else if (!strcmp(argv[i], "--gateway")) {
			where.gateway = argv[i + 1];
		} else {
			where.token_file = argv[i + 1];
		}
		i += 2;
	}
	if (i < argc && !strcmp(argv[i], "--token")) {
		fprintf(stderr, "airlock: --token is not an option (a key in argv shows in ps): "
				"use $AIRLOCK_TOKEN or --token-file FILE\n");
		return EXIT_USAGE;
	}
	if (i >= argc) {
		usage(stderr);
		return EXIT_USAGE;
	}
	argc -= i - 1;
	argv += i - 1;
	/* argv[1] is the command now: one row of the verb table */
	for (size_t v = 0; v < sizeof(verbs) / sizeof(verbs[0]); v++)
		if (!strcmp(argv[1], verbs[v].name) && argc - 2 >= verbs[v].min &&
		    argc - 2 <= verbs[v].max)
			return verbs[v].fn(&where, argc - 1, argv + 1);
	fprintf(stderr, "airlock: unknown command or wrong arguments: %s (see airlock help)\n",
		argv[1]);
	return EXIT_USAGE;
}
