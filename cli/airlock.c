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

/* The CLI's own allocations: a short-lived command has nothing to unwind
 * to, so running out of memory ends it with one line and EX_OSERR. */
static void *need(void *p)
{
	if (!p) {
		fprintf(stderr, "airlock: out of memory\n");
		exit(EXIT_OSERR);
	}
	return p;
}

static char *xstrdup(const char *s)
{
	return need(strdup(s));
}

static char *xstrndup(const char *s, size_t n)
{
	return need(strndup(s, n));
}

/* A new input at the end of job's (--input, --git): url and path set. */
static struct al_input *add_input(struct al_job *job, const char *url, const char *path)
{
	struct al_input *in = need(realloc(job->inputs, (job->ninputs + 1) * sizeof(*in)));

	job->inputs = in;
	in += job->ninputs++;
	memset(in, 0, sizeof(*in));
	in->url = xstrdup(url);
	in->path = xstrdup(path);
	return in;
}

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
	    "  session put ID LOCAL REMOTE | get ID REMOTE [LOCAL] | ls ID | close ID\n"
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
	    "run/submit options:\n"
	    "  --tier T (default trusted)  --tenant T  --runtime python|sh (default python)\n"
	    "  --image NAME (a catalogue image the tier offers; default: the tier's)\n"
	    "  --network none|egress  --egress-allow HOST:PORT (repeatable: narrows the tier's "
	    "rules)\n"
	    "  -f LOCAL:REMOTE (input file, repeatable)  --collect PATH (repeatable)\n"
	    "  --input URL,SHA256,PATH[,tar|zip|none] (repeatable: fetched by the worker\n"
	    "    through the tier's egress rules, verified, unpacked at PATH; \".\" = the top)\n"
	    "  --git URL,REF,PATH (repeatable: a repository's branch, tag, ref or commit id,\n"
	    "    checked out by the worker at PATH with a shallow .git)\n"
	    "  --timeout MS  --cpu MS  --memory BYTES  --pids N  --disk BYTES\n"
	    "  --stdin FILE  --env NAME=VALUE  --priority 0-9  --deadline-ms UNIX_MS\n"
	    "  --idempotency-key K  --callback URL  --label K=V  --id ID  --json\n"
	    "  run: the output is printed as it comes (live output); --no-stream: at the end\n"
	    "Redis: --redis or $AIRLOCK_REDIS (default redis://127.0.0.1:6379)\n"
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

int cli_read_path(const char *path, struct al_bytes *out, size_t cap)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
	struct al_buf b = {0};
	char chunk[65536];
	size_t n;

	if (!f) {
		fprintf(stderr, "airlock: cannot read %s: %s\n", path, strerror(errno));
		return EXIT_NOINPUT;
	}
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		if (b.len + n > cap) {
			fprintf(stderr, "airlock: %s: larger than %zu bytes\n", path, cap);
			if (f != stdin)
				fclose(f);
			al_buf_free(&b);
			return EXIT_USAGE;
		}
		if (al_buf_append(&b, chunk, n))
			need(NULL);
	}
	if (f != stdin)
		fclose(f);
	if (!b.data)
		if (al_buf_append(&b, "", 0))
			need(NULL);
	out->data = b.data;
	out->len = b.len;
	return 0;
}

static int u64_arg(const char *name, const char *v, uint64_t *out)
{
	if (!al_parse_u64(v, 0, UINT64_MAX, out)) {
		fprintf(stderr, "airlock: %s: expected a whole number, got \"%s\"\n", name, v);
		return -1;
	}
	return 0;
}

static int push_kv(struct al_kv **kv, size_t *n, const char *arg, const char *what)
{
	const char *eq = strchr(arg, '=');
	struct al_kv *p;

	if (!eq || eq == arg) {
		fprintf(stderr, "airlock: %s: expected NAME=VALUE, got \"%s\"\n", what, arg);
		return -1;
	}
	p = need(realloc(*kv, (*n + 1) * sizeof(*p)));
	*kv = p;
	p[*n].key = xstrndup(arg, (size_t)(eq - arg));
	p[*n].value = xstrdup(eq + 1);
	(*n)++;
	return 0;
}

/* run --no-stream: print the output at the end, from the result */
static bool no_stream;

/* Build a job from run/submit arguments; returns 0 or an exit code. */
static int build_job(int argc, char **argv, struct al_job *job, bool *json)
{
	static const struct option opts[] = {
	    {"tier", required_argument, NULL, 't'},
	    {"tenant", required_argument, NULL, 'T'},
	    {"runtime", required_argument, NULL, 'R'},
	    {"file", required_argument, NULL, 'f'},
	    {"collect", required_argument, NULL, 'o'},
	    {"timeout", required_argument, NULL, 'w'},
	    {"cpu", required_argument, NULL, 'u'},
	    {"memory", required_argument, NULL, 'm'},
	    {"pids", required_argument, NULL, 'p'},
	    {"disk", required_argument, NULL, 'd'},
	    {"stdin", required_argument, NULL, 'i'},
	    {"env", required_argument, NULL, 'e'},
	    {"priority", required_argument, NULL, 'P'},
	    {"deadline-ms", required_argument, NULL, 'D'},
	    {"idempotency-key", required_argument, NULL, 'k'},
	    {"callback", required_argument, NULL, 'b'},
	    {"image", required_argument, NULL, 'g'},
	    {"network", required_argument, NULL, 'N'},
	    {"egress-allow", required_argument, NULL, 'E'},
	    {"input", required_argument, NULL, 'F'},
	    {"git", required_argument, NULL, 'G'},
	    {"label", required_argument, NULL, 'l'},
	    {"id", required_argument, NULL, 'I'},
	    {"json", no_argument, NULL, 'j'},
	    {"no-stream", no_argument, NULL, 'S'},
	    {"code", required_argument, NULL, 'c'},
	    {NULL, 0, NULL, 0},
	};
	const char *code = NULL, *runtime = "python";
	uint64_t u;
	int c, rc;

	memset(job, 0, sizeof(*job));
	job->version = AL_PROTO_VERSION;
	job->tier = xstrdup("trusted");
	job->tenant = xstrdup("default");
	job->priority = AL_PRIORITY_DEFAULT;
	optind = 1;
	while ((c = getopt_long(argc, argv, "+c:f:", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			free(job->tier);
			job->tier = xstrdup(optarg);
			break;
		case 'T':
			free(job->tenant);
			job->tenant = xstrdup(optarg);
			break;
		case 'R': runtime = optarg; break;
		case 'c': code = optarg; break;
		case 'I': job->id = xstrdup(optarg); break;
		case 'j': *json = true; break;
		case 'S': no_stream = true; break;
		case 'f': {
			const char *colon = strchr(optarg, ':');
			struct al_file *f;
			char *local =
			    colon ? xstrndup(optarg, (size_t)(colon - optarg)) : xstrdup(optarg);
			const char *remote = colon		    ? colon + 1
					     : strrchr(optarg, '/') ? strrchr(optarg, '/') + 1
								    : optarg;

			f = need(realloc(job->files, (job->nfiles + 1) * sizeof(*f)));
			job->files = f;
			memset(&f[job->nfiles], 0, sizeof(*f));
			if ((rc = cli_read_path(local, &f[job->nfiles].data, AL_FILES_TOTAL_MAX))) {
				free(local);
				return rc;
			}
			free(local);
			f[job->nfiles].path = xstrdup(remote);
			f[job->nfiles].mode = 0644;
			job->nfiles++;
			break;
		}
		case 'o': {
			char **v = need(realloc(job->collect, (job->ncollect + 1) * sizeof(*v)));

			job->collect = v;
			v[job->ncollect++] = xstrdup(optarg);
			break;
		}
		case 'w':
		case 'u':
		case 'm':
		case 'p':
		case 'd':
		case 'P':
		case 'D':
			if (u64_arg(argv[optind - 1], optarg, &u))
				return EXIT_USAGE;
			if (c == 'w')
				job->limits.wall_ms = u;
			else if (c == 'u')
				job->limits.cpu_ms = u;
			else if (c == 'm')
				job->limits.memory_bytes = u;
			else if (c == 'p')
				job->limits.pids = u;
			else if (c == 'd')
				job->limits.disk_bytes = u;
			else if (c == 'P')
				job->priority = (uint32_t)u;
			else
				job->deadline_ms = u;
			break;
		case 'i':
			if ((rc = cli_read_path(optarg, &job->stdin_data, AL_STDIN_MAX)))
				return rc;
			break;
		case 'e':
			if (push_kv(&job->env, &job->nenv, optarg, "--env"))
				return EXIT_USAGE;
			break;
		case 'l':
			if (push_kv(&job->labels, &job->nlabels, optarg, "--label"))
				return EXIT_USAGE;
			break;
		case 'k': job->idempotency_key = xstrdup(optarg); break;
		case 'b': job->callback_url = xstrdup(optarg); break;
		case 'g': job->image = xstrdup(optarg); break;
		case 'N':
			if (strcmp(optarg, "none") && strcmp(optarg, "egress")) {
				fprintf(stderr,
					"airlock: --network: expected none or egress, got \"%s\"\n",
					optarg);
				return EXIT_USAGE;
			}
			job->network = optarg[0] == 'e' ? AL_NET_EGRESS : AL_NET_NONE;
			break;
		case 'F': {
			struct al_input *in;
			char *s = xstrdup(optarg),
			     *part[3] = {NULL, NULL, NULL}; /* unpack, path, sha */
			char *last = strrchr(s, ',');

			/* from the right: [,unpack], path, sha256; the rest is the URL */
			if (last && (!strcmp(last + 1, "tar") || !strcmp(last + 1, "zip") ||
				     !strcmp(last + 1, "none"))) {
				part[0] = last + 1;
				*last = '\0';
			}
			for (int k = 1; k < 3 && (last = strrchr(s, ',')); k++) {
				part[k] = last + 1;
				*last = '\0';
			}
			if (!part[1] || !part[2]) {
				fprintf(
				    stderr,
				    "airlock: --input: expected URL,SHA256,PATH[,tar|zip|none], "
				    "got \"%s\"\n",
				    optarg);
				free(s);
				return EXIT_USAGE;
			}
			in = add_input(job, s, part[1]);
			snprintf(in->sha256, sizeof(in->sha256), "%s", part[2]);
			in->unpack = !part[0] || !strcmp(part[0], "none") ? AL_UNPACK_NONE
				     : !strcmp(part[0], "tar")		  ? AL_UNPACK_TAR
									  : AL_UNPACK_ZIP;
			free(s);
			break;
		}
		case 'G': {
			struct al_input *in;
			char *s = xstrdup(optarg), *path = strrchr(s, ','), *ref;

			if (path)
				*path++ = '\0';
			if (!path || !(ref = strrchr(s, ','))) {
				fprintf(stderr,
					"airlock: --git: expected URL,REF,PATH, got \"%s\"\n",
					optarg);
				free(s);
				return EXIT_USAGE;
			}
			*ref++ = '\0';
			in = add_input(job, s, path);
			in->ref = xstrdup(ref);
			in->unpack = AL_UNPACK_GIT;
			free(s);
			break;
		}
		case 'E': {
			char **v =
			    need(realloc(job->egress_allow, (job->negress_allow + 1) * sizeof(*v)));

			job->egress_allow = v;
			v[job->negress_allow++] = xstrdup(optarg);
			break;
		}
		default: usage(stderr); return EXIT_USAGE;
		}
	}
	if (code) {
		job->code.data = xstrdup(code);
		job->code.len = strlen(code);
	} else if (optind < argc && strcmp(argv[optind - 1], "--") != 0) {
		if ((rc = cli_read_path(argv[optind++], &job->code, AL_CODE_MAX)))
			return rc;
	}
	if (job->code.data) {
		if (!strcmp(runtime, "python"))
			job->runtime = AL_RUNTIME_PYTHON;
		else if (!strcmp(runtime, "sh"))
			job->runtime = AL_RUNTIME_SH;
		else {
			fprintf(stderr, "airlock: --runtime: expected python or sh, got \"%s\"\n",
				runtime);
			return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		job->argc = (size_t)(argc - optind);
		job->argv = need(calloc(job->argc + 1, sizeof(char *)));
		for (size_t i = 0; i < job->argc; i++)
			job->argv[i] = xstrdup(argv[optind + (int)i]);
	}
	if (!job->code.data && !job->argc) {
		fprintf(stderr, "airlock: nothing to run: give -c CODE, a FILE, or -- ARGV...\n");
		return EXIT_USAGE;
	}
	return 0;
}

static int exit_code_for(const struct al_result *r)
{
	switch (r->status) {
	case AL_ST_OK:
	case AL_ST_NONZERO_EXIT:
		if (r->has_exit_code)
			return r->exit_code;
		return r->signal ? 128 + r->signal : 1;
	case AL_ST_TIMEOUT: return EXIT_TIMEOUT;
	case AL_ST_MEMORY_LIMIT: return EXIT_MEMORY;
	case AL_ST_CPU_LIMIT: return EXIT_CPU;
	case AL_ST_OUTPUT_LIMIT: return EXIT_OUTPUT;
	case AL_ST_CANCELLED: return EXIT_CANCELLED;
	case AL_ST_REJECTED: return EXIT_REJECTED;
	case AL_ST_SANDBOX_ERROR: return EXIT_SANDBOX;
	case AL_ST_WORKER_LOST:
	case AL_ST_EXPIRED: return EXIT_LOST;
	case AL_ST_COMPILE_ERROR: return EXIT_COMPILE;
	case AL_ST_SESSION_ENDED: return EXIT_LOST; /* open another session */
	case AL_ST_COUNT: break;
	}
	return 1;
}

/* Write a job's bytes to f. On a terminal no control character goes out as
 * it is (escape sequences could move the cursor, clear the screen or hide
 * the verdict below): each is shown as \xHH, except newline and tab. Into a
 * pipe or file the bytes go unchanged. Returns the last byte written. */
static int emit(FILE *f, const char *data, size_t len)
{
	if (!isatty(fileno(f))) {
		fwrite(data ? data : "", 1, len, f);
		return len ? (unsigned char)data[len - 1] : '\n';
	}
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)data[i];

		if ((ch < 0x20 && ch != '\n' && ch != '\t') || ch == 0x7f)
			fprintf(f, "\\x%02x", ch);
		else
			fputc(ch, f);
	}
	return len ? (unsigned char)data[len - 1] : '\n';
}

/* What run printed of the live output: bytes of stdout [1] and stderr [2],
 * and the last byte of each (the verdict's line starts a line of its own). */
struct shown {
	uint64_t n[3];
	int last[3];
	unsigned attempt;
};

static int on_chunk(const struct al_chunk *ch, void *arg)
{
	struct shown *sh = arg;

	/* a fenced-out worker's late output: an older attempt than one seen */
	if (ch->attempt && ch->attempt < sh->attempt && ch->kind != AL_CHUNK_END)
		return 0;
	if (ch->kind == AL_CHUNK_RESTART ||
	    (ch->attempt > sh->attempt && sh->attempt && ch->kind != AL_CHUNK_END)) {
		/* an attempt ended without its result: the job runs again */
		fflush(stdout);
		fprintf(stderr, "%sairlock: the job runs again; its output starts over\n",
			sh->last[2] == '\n' ? "" : "\n");
		sh->n[1] = sh->n[2] = 0;
		sh->last[1] = sh->last[2] = '\n';
	}
	if (ch->attempt && ch->kind != AL_CHUNK_END)
		sh->attempt = ch->attempt;
	if (ch->kind == AL_CHUNK_STDOUT || ch->kind == AL_CHUNK_STDERR) {
		FILE *f = ch->kind == AL_CHUNK_STDOUT ? stdout : stderr;

		sh->last[ch->kind] = emit(f, ch->data, ch->len);
		sh->n[ch->kind] += ch->len;
		fflush(f);
	}
	return 0;
}

/* The result; with sh, only what the live output did not show already. */
int cli_print_result(const struct al_result *r, bool json, const struct shown *sh)
{
	if (json) {
		json_t *j = al_result_to_json(r);

		if (!j) {
			fprintf(stderr, "airlock: out of memory making the result's JSON\n");
			return 1;
		}
		json_dumpf(j, stdout, JSON_SORT_KEYS | JSON_INDENT(2));
		putchar('\n');
		json_decref(j);
	} else {
		size_t so = sh && sh->n[1] <= r->out.len ? (size_t)sh->n[1] : 0;
		size_t se = sh && sh->n[2] <= r->err.len ? (size_t)sh->n[2] : 0;
		int last_out = so == r->out.len && sh
				   ? sh->last[1]
				   : emit(stdout, r->out.data + so, r->out.len - so);
		int last_err = se == r->err.len && sh
				   ? sh->last[2]
				   : emit(stderr, r->err.data + se, r->err.len - se);
		bool verdict = r->status != AL_ST_OK && r->status != AL_ST_NONZERO_EXIT;

		fflush(stdout);
		/* the CLI's own line starts a line of its own */
		if ((verdict || r->out_truncated || r->err_truncated) &&
		    (last_err != '\n' ||
		     (last_out != '\n' && isatty(fileno(stdout)) && isatty(fileno(stderr)))))
			fputc('\n', stderr);
		if (verdict) {
			fprintf(stderr, "airlock: job %s: %s: ", r->id, al_status_name(r->status));
			emit(stderr, r->error ? r->error : "", r->error ? strlen(r->error) : 0);
			fputc('\n', stderr);
		} else if (r->out_truncated || r->err_truncated) {
			fprintf(stderr, "airlock: job %s: output was truncated\n", r->id);
		}
		for (size_t i = 0; i < r->nfiles; i++) {
			const struct al_out_file *f = &r->files[i];
			struct cli_junit j;
			size_t pl = strlen(f->path);

			if (pl < 4 || strcmp(f->path + pl - 4, ".xml") ||
			    !cli_junit_counts(f->data.data, f->data.len, &j))
				continue;
			/* a collected JUnit report: its counts on a line */
			fprintf(stderr, "tests: %llu passed, %llu failed, %llu skipped (",
				(unsigned long long)j.passed, (unsigned long long)j.failed,
				(unsigned long long)j.skipped);
			for (const char *c = f->path; *c; c++)
				fputc(*c >= 0x20 && *c < 0x7f ? *c : '?', stderr);
			fputs(")\n", stderr);
		}
		if (r->negress) {
			size_t ok = 0;

			for (size_t i = 0; i < r->negress; i++)
				ok += r->egress[i].allowed;
			fprintf(stderr, "egress: %zu allowed, %zu denied (--json lists them)\n", ok,
				r->negress - ok);
		}
	}
	return exit_code_for(r);
}

/* --gateway URL and where its key comes from (else direct Redis) */
static const char *gateway_url, *token_file;

/* The API key: $AIRLOCK_TOKEN, else the first line of --token-file. */
static char *gateway_token(struct al_err *err)
{
	char line[1024];
	FILE *f;

	if (getenv("AIRLOCK_TOKEN") && *getenv("AIRLOCK_TOKEN"))
		return xstrdup(getenv("AIRLOCK_TOKEN"));
	if (!token_file) {
		al_err_set(err, AL_EINVAL,
			   "--gateway needs an API key: $AIRLOCK_TOKEN or --token-file");
		return NULL;
	}
	if (!(f = fopen(token_file, "re"))) {
		al_err_sys(err, "--token-file %s", token_file);
		return NULL;
	}
	if (!fgets(line, sizeof(line), f))
		line[0] = '\0';
	fclose(f);
	line[strcspn(line, "\r\n")] = '\0';
	if (!line[0]) {
		al_err_set(err, AL_EINVAL, "--token-file %s is empty", token_file);
		return NULL;
	}
	return xstrdup(line);
}

struct al_client *cli_connect(const char *url, int *rc)
{
	struct al_err err = {0};
	struct al_client *c = NULL;

	if (gateway_url) {
		char *token = gateway_token(&err);

		if (token) {
			c = al_client_connect_gateway(gateway_url, token, &err);
			memset(token, 0, strlen(token));
			free(token);
		}
	} else {
		c = al_client_connect(url, &err);
	}

	if (!c) {
		fprintf(stderr, "airlock: %s\n", err.msg);
		*rc = err.code == AL_EINVAL ? EXIT_USAGE : EXIT_UNAVAILABLE;
	}
	return c;
}

/* Connect and submit job (its id into id); NULL with *rc set when either fails. */
static struct al_client *connect_and_submit(const char *url, struct al_job *job,
					    char id[AL_ID_MAX + 1], bool *existing, int *rc)
{
	struct al_err err = {0};
	struct al_client *c = cli_connect(url, rc);

	if (c && al_client_submit(c, job, id, existing, &err)) {
		fprintf(stderr, "airlock: %s\n", err.msg);
		*rc = err.code == AL_EINVAL ? EXIT_REJECTED : EXIT_UNAVAILABLE;
		al_client_close(c);
		c = NULL;
	}
	return c;
}

static int cmd_run(const char *url, int argc, char **argv, bool wait)
{
	struct al_job job;
	struct al_result res;
	struct al_err err = {0};
	struct al_client *c;
	char id[AL_ID_MAX + 1];
	bool json = false, existing = false, streamed = false;
	struct shown sh = {.last = {'\n', '\n', '\n'}};
	int rc = build_job(argc, argv, &job, &json);

	if (rc || !(c = connect_and_submit(url, &job, id, &existing, &rc)))
		goto out_job;
	if (!wait) {
		printf("%s\n", id);
		if (existing)
			fprintf(stderr,
				"airlock: idempotency key already used: this is the earlier job\n");
		goto out_client;
	}
	if (!json && !no_stream) {
		/* the output as it comes; what the stream missed comes from the result */
		if (al_client_stream(c, id, NULL, 0, on_chunk, &sh, &err))
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
	rc = cli_print_result(&res, json, streamed ? &sh : NULL);
	al_result_free(&res);
out_client:
	al_client_close(c);
out_job:
	al_job_free(&job);
	return rc;
}

/* airlock grade [options] DIR|FILE: a grading job, its verdict table. */
static int cmd_grade(const char *url, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"tier", required_argument, NULL, 't'},    {"image", required_argument, NULL, 'g'},
	    {"compare", required_argument, NULL, 'C'}, {"stop-on-failure", no_argument, NULL, 's'},
	    {"json", no_argument, NULL, 'j'},	       {"submit", no_argument, NULL, 'S'},
	    {"print-job", no_argument, NULL, 'p'},     {NULL, 0, NULL, 0},
	};
	struct al_grade_opts go = {0};
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
	go.no_new_id = gateway_url && !print_job;
	if (al_grade_job_load(argv[optind], &go, &job, &err)) {
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
	if (!(c = connect_and_submit(url, &job, id, &existing, &rc)))
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
		al_grade_print(stdout, &res);
		rc = exit_code_for(&res);
	}
	al_result_free(&res);
out_client:
	al_client_close(c);
out_job:
	al_job_free(&job);
	return rc;
}

static int cmd_wait(const char *url, int argc, char **argv)
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
			if (u64_arg("--timeout-wait", argv[++i], &tmo))
				return EXIT_USAGE;
		} else
			id = argv[i];
	}
	if (!id) {
		fprintf(stderr, "airlock: wait: which job? give its ID\n");
		return EXIT_USAGE;
	}
	if (!(c = cli_connect(url, &rc)))
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

static int cmd_status(const char *url, const char *id)
{
	struct al_result res;
	struct al_err err = {0};
	struct al_client *c;
	enum al_job_state state;
	int rc = 0;

	if (!(c = cli_connect(url, &rc)))
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

static int cmd_cancel(const char *url, const char *id)
{
	struct al_err err = {0};
	struct al_client *c;
	int rc = 0;

	if (!(c = cli_connect(url, &rc)))
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

static int verb_version(const char *url, int argc, char **argv)
{
	(void)url;
	(void)argc;
	(void)argv;
	printf("airlock protocol %d\n", AL_PROTO_VERSION);
	return 0;
}

static int verb_help(const char *url, int argc, char **argv)
{
	(void)url;
	(void)argc;
	(void)argv;
	usage(stdout);
	return 0;
}

static int verb_run(const char *url, int argc, char **argv)
{
	return cmd_run(url, argc, argv, !strcmp(argv[0], "run"));
}

static int verb_status(const char *url, int argc, char **argv)
{
	(void)argc;
	return cmd_status(url, argv[1]);
}

static int verb_cancel(const char *url, int argc, char **argv)
{
	(void)argc;
	return cmd_cancel(url, argv[1]);
}

static int verb_check_job(const char *url, int argc, char **argv)
{
	(void)url;
	(void)argc;
	return cmd_check_job(argv[1]);
}

/* The operators' verbs: one library call that prints, its error. */
static int verb_stats(const char *url, int argc, char **argv)
{
	struct al_err err = {0};
	struct al_client *c;
	int rc = 0;

	(void)argc;
	(void)argv;
	if (!(c = cli_connect(url, &rc)))
		return rc;
	if (al_client_stats(c, stdout, &err)) {
		fprintf(stderr, "airlock: %s\n", err.msg);
		rc = EXIT_UNAVAILABLE;
	}
	al_client_close(c);
	return rc;
}

static int verb_dlq(const char *url, int argc, char **argv)
{
	struct al_err err = {0};
	struct al_client *c;
	int rc = 0;

	if (!(c = cli_connect(url, &rc)))
		return rc;
	if (al_client_dlq(c, argv[1], argc == 3 ? argv[2] : NULL, stdout, &err)) {
		fprintf(stderr, "airlock: %s\n", err.msg);
		rc = err.code == AL_EINVAL ? 1 : EXIT_UNAVAILABLE;
	}
	al_client_close(c);
	return rc;
}

static int verb_vm(const char *url, int argc, char **argv)
{
	struct al_err err = {0};
	struct al_client *c;
	uint64_t ms = 0;
	int rc = 0;

	if (argc == 4 && !al_parse_u64(argv[3], 1, UINT64_MAX, &ms)) {
		fprintf(stderr, "airlock: vm extend: expected a number of ms, got \"%s\"\n",
			argv[3]);
		return EXIT_USAGE;
	}
	if (!(c = cli_connect(url, &rc)))
		return rc;
	if (al_client_vm(c, argv[1], argc >= 3 ? argv[2] : NULL, ms, stdout, &err)) {
		fprintf(stderr, "airlock: %s\n", err.msg);
		rc = err.code == AL_EINVAL ? 1 : EXIT_UNAVAILABLE;
	}
	al_client_close(c);
	return rc;
}

/* The verbs: name, how many arguments after it (min..max), the handler
 * (given the verb's own argc/argv: argv[0] is the verb). */
static const struct verb {
	const char *name;
	int min, max;
	int (*fn)(const char *url, int argc, char **argv);
} verbs[] = {
    {"run", 0, 1 << 20, verb_run},
    {"submit", 0, 1 << 20, verb_run},
    {"wait", 0, 1 << 20, cmd_wait},
    {"grade", 0, 1 << 20, cmd_grade},
    {"status", 1, 1, verb_status},
    {"cancel", 1, 1, verb_cancel},
    {"check-job", 1, 1, verb_check_job},
    {"stats", 0, 0, verb_stats},
    {"dlq", 1, 2, verb_dlq},
    {"vm", 1, 3, verb_vm},
    {"session", 1, 1 << 20, cli_session},
    {"images", 0, 3, cli_images},
    {"version", 0, 0, verb_version},
    {"--version", 0, 0, verb_version},
    {"help", 0, 0, verb_help},
    {"--help", 0, 0, verb_help},
};

int main(int argc, char **argv)
{
	const char *url =
	    getenv("AIRLOCK_REDIS") ? getenv("AIRLOCK_REDIS") : "redis://127.0.0.1:6379";
	int i = 1;

	gateway_url = getenv("AIRLOCK_GATEWAY") && *getenv("AIRLOCK_GATEWAY")
			  ? getenv("AIRLOCK_GATEWAY")
			  : NULL;
	while (i + 1 < argc && (!strcmp(argv[i], "--redis") || !strcmp(argv[i], "--gateway") ||
				!strcmp(argv[i], "--token-file"))) {
		if (!strcmp(argv[i], "--redis")) {
			url = argv[i + 1];
			gateway_url = NULL;
		} else if (!strcmp(argv[i], "--gateway")) {
			gateway_url = argv[i + 1];
		} else {
			token_file = argv[i + 1];
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
			return verbs[v].fn(url, argc - 1, argv + 1);
	fprintf(stderr, "airlock: unknown command or wrong arguments: %s (see airlock help)\n",
		argv[1]);
	return EXIT_USAGE;
}
