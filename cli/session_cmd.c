/* session_cmd.c - `airlock session ...` (PROTOCOL.md, "Sessions"): open a
 * session, run calls in it, move files in and out, close it.
 *
 *   airlock session open [--tier T] [--tenant T] [--memory BYTES] [--timeout MS]
 *                        [--cpu-budget MS] [--image NAME]   prints the session's id
 * (usage.c has each verb's options: the rows cli_flags_take reads)
 *   airlock session exec ID [--timeout MS] [--cpu MS] [--output-max BYTES]
 *                        (-c LINE | -- PROG ARGS...)
 *   airlock session py ID [--timeout MS] [--cpu MS] [--output-max BYTES]
 *                        [--outputs DIR] (-c CODE | FILE | -)
 *   airlock session put ID LOCAL REMOTE [--mode OCTAL]
 *   airlock session get ID REMOTE [LOCAL]               (stdout without LOCAL)
 *   airlock session ls ID [PATH]
 *   airlock session close ID
 *   airlock session info ID         its limits, usage and time left (JSON)
 *   airlock session pause ID        saved whole, its sandbox freed (docs/snapshots.md)
 *   airlock session resume ID       back now (any call resumes it too)
 *   airlock session fork ID [N]     N paused copies (JSON: their ids)
 * --tenant (each verb) must be the one the session was opened for. A call's
 * exit code is the CLI's, as for `run`; a session that has ended exits 75
 * saying why. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../common/opt.h"
#include "../proto/call.h"
#include "cli.h"

static int usage_error(const char *msg)
{
	fprintf(stderr, "airlock session: %s (see airlock session --help)\n", msg);
	return EXIT_USAGE;
}

static int cmd_open(struct al_client *c, const struct cli_sess_opts *o)
{
	struct al_job job = {.version = AL_PROTO_VERSION,
			     .tier = (char *)(o->tier ? o->tier : "trusted"),
			     .tenant = (char *)(o->tenant ? o->tenant : "default"),
			     .image = (char *)o->image,
			     .session = true,
			     .priority = AL_PRIORITY_DEFAULT};
	struct al_result res = {0};
	struct al_err err = {0};
	char id[AL_ID_MAX + 1] = "";
	bool existing = false;
	int rc;

	job.limits.memory_bytes = o->memory;
	job.limits.wall_ms = o->timeout_ms;
	job.cpu_budget_ms = o->cpu_budget_ms;
	rc = al_client_submit(c, &job, id, &existing, &err);
	free(job.id); /* made by the client (Redis) */
	if (rc || (rc = al_client_wait(c, id, 0, &res, &err))) {
		fprintf(stderr, "airlock: %s\n", err.msg);
		return err.code == AL_EINVAL ? EXIT_REJECTED : EXIT_UNAVAILABLE;
	}
	if (res.status == AL_ST_OK) {
		printf("%s\n", id);
		rc = 0;
	} else {
		fprintf(stderr, "airlock: session not opened: %s: %s\n", al_status_name(res.status),
			res.error ? res.error : "");
		rc = res.status == AL_ST_REJECTED ? EXIT_REJECTED : EXIT_SANDBOX;
	}
	al_result_free(&res);
	return rc;
}

/* Each output (a figure) into dir as output-N.png (or .bin). */
static void save_outputs(const struct al_result *r, const char *dir)
{
	for (size_t i = 0; i < r->noutputs; i++) {
		char path[4096];
		FILE *f;

		snprintf(path, sizeof(path), "%s/output-%zu.%s", dir, i + 1,
			 !strcmp(r->outputs[i].mime, "image/png") ? "png" : "bin");
		if (!(f = fopen(path, "wb")) ||
		    fwrite(r->outputs[i].data.data, 1, r->outputs[i].data.len, f) !=
			r->outputs[i].data.len)
			fprintf(stderr, "airlock: %s: %s\n", path, strerror(errno));
		else
			fprintf(stderr, "airlock: %s (%s, %zu bytes)\n", path, r->outputs[i].mime,
				r->outputs[i].data.len);
		if (f)
			fclose(f);
	}
	if (r->noutputs && !dir)
		fprintf(stderr, "airlock: %zu output(s) (figures): --outputs DIR saves them\n",
			r->noutputs);
}

int cli_session(const struct cli_where *where, int argc, char **argv)
{
	struct cli_sess_opts o = {0};
	struct al_sess_call call = {0};
	struct al_result res = {0};
	struct al_err err = {0};
	struct al_client *c;
	const struct cli_cmd *sub, *cmd = cli_command("session", argv[1], &sub);
	char who[32];
	int rc = 0, n = argc - 2;
	size_t v;
	unsigned long mode = 0644;

	if (!sub)
		return usage_error(
		    "a verb: open, exec, py, put, get, ls, close, info, pause, resume or fork");
	v = (size_t)(sub - cmd->subs);
	snprintf(who, sizeof(who), "session %s", argv[1]);
	/* argv[1] the verb, then its id and arguments, options among them */
	if ((rc = cli_flags_take(cli_session_flags, (unsigned)v, who, &o, &n, argv + 2)))
		return rc;
	n++; /* and the verb: argv[2] is its id */
	if (o.mode) {
		char *end;

		errno = 0;
		mode = strtoul(o.mode, &end, 8);
		if (errno || *end || !*o.mode || mode > 0777) {
			fprintf(stderr,
				"airlock session: --mode: expected octal bits, got \"%s\"\n",
				o.mode);
			return EXIT_USAGE;
		}
	}
	if (v > 0 && n < 2)
		return usage_error("the session's id (what open printed)");
	if (!(c = cli_connect(where, &rc)))
		return rc;
	if (v == 0) {
		rc = cmd_open(c, &o);
		al_client_close(c);
		return rc;
	}
	call.session = argv[2];
	call.tenant = (char *)(o.tenant ? o.tenant : "default");
	call.timeout_ms = o.timeout_ms;
	call.cpu_ms = o.cpu_ms;
	call.output_max = o.output_max;
	call.mode = (uint32_t)mode;
	switch (v) {
	case 1: /* exec */
		call.op = AL_SESS_EXEC;
		if (o.code && n == 2)
			call.code = (struct al_bytes){(char *)o.code, strlen(o.code)};
		else if (!o.code && n > 2)
			call.argv = argv + 3, call.argc = (size_t)(n - 2);
		else
			rc = usage_error("exec: -c LINE, or -- PROG ARGS...");
		break;
	case 2: /* py */
		call.op = AL_SESS_PYTHON;
		if (o.code && n == 2)
			call.code = (struct al_bytes){(char *)o.code, strlen(o.code)};
		else if (!o.code && n == 3)
			rc = cli_read_path(argv[3], &call.code, AL_CODE_MAX);
		else
			rc = usage_error("py: -c CODE, or a FILE (- for stdin)");
		break;
	case 3: /* put */
		call.op = AL_SESS_PUT;
		if (n != 4)
			rc = usage_error("put: LOCAL REMOTE");
		else if (!(rc = cli_read_path(argv[3], &call.data, AL_SESS_FILE_MAX)))
			call.path = argv[4];
		break;
	case 4: /* get */
		call.op = AL_SESS_GET;
		if (n != 3 && n != 4)
			rc = usage_error("get: REMOTE [LOCAL]");
		call.path = argv[3];
		break;
	case 5: /* ls */
		call.op = AL_SESS_LS;
		call.path = n >= 3 ? argv[3] : NULL;
		break;
	case 6: call.op = AL_SESS_CLOSE; break;
	case 7: call.op = AL_SESS_INFO; break; /* its limits, usage and time left, as JSON */
	case 8: call.op = AL_SESS_PAUSE; break;
	case 9: call.op = AL_SESS_RESUME; break;
	default: /* fork */
		call.op = AL_SESS_FORK;
		call.count = 1;
		if (n == 3) {
			char *end;
			unsigned long k = strtoul(argv[3], &end, 10);

			if (*end || !*argv[3] || k < 1 || k > AL_SESS_FORK_MAX)
				rc = usage_error("fork: N, 1..16 copies");
			call.count = (uint32_t)k;
		} else if (n != 2) {
			rc = usage_error("fork: ID [N]");
		}
	}
	if (rc)
		goto out_call;
	if (al_client_session_call(c, &call, 0, &res, &err)) {
		fprintf(stderr, "airlock: %s\n", err.msg);
		rc = err.code == AL_EINVAL ? EXIT_REJECTED : EXIT_UNAVAILABLE;
		goto out_call;
	}
	if (res.status == AL_ST_SESSION_ENDED) {
		fprintf(stderr, "airlock: %s\n", res.error ? res.error : "session_ended");
		rc = EXIT_LOST;
	} else if (call.op == AL_SESS_GET && n == 4 && res.status == AL_ST_OK) {
		FILE *f = fopen(argv[4], "wb");

		if (!f || fwrite(res.out.data, 1, res.out.len, f) != res.out.len) {
			fprintf(stderr, "airlock: %s: %s\n", argv[4], strerror(errno));
			rc = EXIT_NOINPUT;
		}
		if (f)
			fclose(f);
	} else if (call.op == AL_SESS_CLOSE) {
		rc = res.status == AL_ST_OK ? 0 : cli_print_result(&res, false, NULL);
	} else {
		rc = cli_print_result(&res, false, NULL);
		save_outputs(&res, o.outputs);
	}
out_call:
	if (call.op == AL_SESS_PYTHON && !o.code)
		free(call.code.data);
	free(call.data.data);
	free(call.id);
	al_result_free(&res);
	al_client_close(c);
	return rc;
}
