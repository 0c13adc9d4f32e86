/* main.c - airlock-worker entry point. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../client/json.h"
#include "runner.h"

/* Limits a job gets when neither it nor the policy sets them. */
static const struct al_limits fallback_limits = {
	.wall_ms = 10000,
	.cpu_ms = 10000,
	.memory_bytes = 256u << 20,
	.pids = 64,
	.stdout_bytes = 1u << 20,
	.stderr_bytes = 1u << 20,
	.disk_bytes = 64u << 20,
};

static void fill_limits(struct al_limits *l, const struct al_limits *job)
{
	*l = *job;
	if (!l->wall_ms)
		l->wall_ms = fallback_limits.wall_ms;
	if (!l->cpu_ms)
		l->cpu_ms = l->wall_ms;
	if (!l->memory_bytes)
		l->memory_bytes = fallback_limits.memory_bytes;
	if (!l->pids)
		l->pids = fallback_limits.pids;
	if (!l->stdout_bytes)
		l->stdout_bytes = fallback_limits.stdout_bytes;
	if (!l->stderr_bytes)
		l->stderr_bytes = fallback_limits.stderr_bytes;
	if (!l->disk_bytes)
		l->disk_bytes = fallback_limits.disk_bytes;
}

struct run_one {
	struct event_base *base;
	json_t *out;
};

static void run_one_done(struct al_runner *r, struct al_result *res, void *arg)
{
	struct run_one *ro = arg;

	(void)r;
	ro->out = al_result_to_json(res);
	event_base_loopbreak(ro->base);
}

/* --run-one: run a single msgpack job file on one backend, print the result
 * as JSON. For operators checking a host, and for the hostile suite. */
static int run_one(const char *path, const struct al_backend_ops *ops,
		   const struct al_backend_conf *conf)
{
	struct run_one ro = { 0 };
	struct al_run_spec spec = { 0 };
	struct al_err err = { 0 };
	struct al_buf b = { 0 };
	struct al_job job;
	struct al_runner *r;
	char chunk[65536];
	size_t n;
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
	int rc = 1;

	if (!f) {
		fprintf(stderr, "airlock-worker: cannot open %s: %s\n", path, strerror(errno));
		return 1;
	}
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0 && b.len <= AL_JOB_MAX_BYTES)
		al_buf_append(&b, chunk, n);
	if (f != stdin)
		fclose(f);
	if (al_job_decode(b.data, b.len, &job, &err)) {
		fprintf(stderr, "airlock-worker: %s: invalid job: %s\n", path, err.msg);
		al_buf_free(&b);
		return 1;
	}
	al_buf_free(&b);
	if (al_backend_init(ops, conf, &err)) {
		fprintf(stderr, "airlock-worker: backend %s unavailable: %s\n", ops->name, err.msg);
		goto out;
	}
	al_backend_sweep(ops, conf, NULL);
	spec.job = &job;
	fill_limits(&spec.limits, &job.limits);
	spec.cpu_millis = 1000;
	spec.network = AL_NET_NONE;
	spec.attempt = 1;
	ro.base = event_base_new();
	r = al_runner_start(ro.base, ops, conf, &spec, run_one_done, &ro);
	if (!r) {
		fprintf(stderr, "airlock-worker: out of memory\n");
		goto out_base;
	}
	event_base_dispatch(ro.base);
	json_dumpf(ro.out, stdout, JSON_SORT_KEYS | JSON_COMPACT);
	putchar('\n');
	json_decref(ro.out);
	al_runner_free(r);
	rc = 0;
out_base:
	event_base_free(ro.base);
	if (ops->fini)
		ops->fini();
out:
	al_job_free(&job);
	return rc;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: airlock-worker [options]\n"
		"  --run-one FILE      run one msgpack job file here and print its result as JSON\n"
		"  --backend NAME      backend for --run-one (default process)\n"
		"  --state-dir DIR     per-job directories (default /var/lib/airlock)\n"
		"  --worker-id ID      names this worker's cgroups and directories\n"
		"  --uid-base N        slot i runs as uid N+i (default 60000)\n"
		"  --slots N           concurrent jobs (default 2)\n"
		"  --hide PATH         also hide this host path from jobs (repeatable, 32 at most)\n"
		"  --version\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "run-one", required_argument, NULL, 'r' },
		{ "backend", required_argument, NULL, 'b' },
		{ "state-dir", required_argument, NULL, 's' },
		{ "worker-id", required_argument, NULL, 'w' },
		{ "uid-base", required_argument, NULL, 'u' },
		{ "slots", required_argument, NULL, 'n' },
		{ "hide", required_argument, NULL, 'H' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct al_backend_conf conf = {
		.worker_id = NULL,
		.state_dir = "/var/lib/airlock",
		.uid_base = 60000,
		.slots = 2,
		.collect_max_bytes = 1u << 20,
		.nofile = 256,
	};
	const char *run_path = NULL, *backend = "process";
	const char *hide[33] = { NULL };
	size_t nhide = 0;
	char idbuf[64];
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		char *end;

		switch (c) {
		case 'r': run_path = optarg; break;
		case 'b': backend = optarg; break;
		case 's': conf.state_dir = optarg; break;
		case 'w': conf.worker_id = optarg; break;
		case 'u':
		case 'n': {
			unsigned long v = strtoul(optarg, &end, 10);

			if (*end || !*optarg || (c == 'n' && v == 0) || v > 4000000000ul) {
				fprintf(stderr, "airlock-worker: --%s: expected a positive integer, got \"%s\"\n",
					c == 'u' ? "uid-base" : "slots", optarg);
				return 2;
			}
			if (c == 'u')
				conf.uid_base = (uid_t)v;
			else
				conf.slots = (unsigned)v;
			break;
		}
		case 'H':
			if (nhide + 1 >= sizeof(hide) / sizeof(hide[0])) {
				fprintf(stderr, "airlock-worker: too many --hide paths\n");
				return 2;
			}
			hide[nhide++] = optarg;
			break;
		case 'V': printf("airlock-worker protocol %d\n", AL_PROTO_VERSION); return 0;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!conf.worker_id) {
		char host[48] = "host";

		gethostname(host, sizeof(host) - 1);
		snprintf(idbuf, sizeof(idbuf), "%.40s-%d", host, (int)getpid());
		conf.worker_id = idbuf;
	}
	conf.hide_paths = hide;
	signal(SIGPIPE, SIG_IGN);
	if (run_path) {
		const struct al_backend_ops *ops = al_backend_find(backend);

		if (!ops) {
			fprintf(stderr, "airlock-worker: unknown backend \"%s\"\n", backend);
			return 2;
		}
		return run_one(run_path, ops, &conf);
	}
	usage(stderr);
	return 2;
}
