/* bench_backend.c - end-to-end latency of one backend alone: N jobs run one
 * after another through the runner (prepare, start, reap, destroy), timed
 * from start to result. Prints one JSON line with every sample in ms.
 *   bench_backend [--backend B] [--n N] [--state-dir D] [--uid-base U]
 *                 [--code PY | --argv PROGRAM] [--baselines FILE] [--dump-seccomp FILE]
 *                 [--bundle-copy FILE] [--image NAME] [--images DIR] [--env NAME=VALUE]
 *                 [--settle-ms N]
 * --baselines names a file with one command per line (arguments separated by
 * tabs, the first field a label; an argument "@fdN=PATH" opens PATH as fd N
 * in the child instead); each is spawned and timed the same way, in
 * the same rounds, interleaved with the backend's jobs (in a different
 * order each round), so that a busy machine slows every series alike.
 * --dump-seccomp writes the process backend's BPF filter (for giving
 * bubblewrap the same filter in the comparison) and exits.
 * --env gives each job that variable (PYTHONHASHSEED=0: a python job the
 * process tier's warm interpreter does not take, as python3 reads it at
 * start-up).
 * --settle-ms N waits N ms (untimed) after each of the backend's jobs, so
 * that what it starts in the background for the next one (the container
 * tier's warm container: a runtime start) slows no other series.
 * --bundle-copy (container) keeps a copy of the last job's config.json, for
 * running the bare runtime on the same bundle. */
#include <getopt.h>
#include <limits.h>
#include <spawn.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../backends/seccomp.h"
#include "../../worker/runner.h"

extern char **environ;

#define MAX_SERIES 8
#define MAX_ARGS   64

struct series {
	char *label;
	char *argv[MAX_ARGS];
	uint64_t *ms;
};

static int load_baselines(const char *path, struct series *s, int *ns, int n)
{
	char line[8192];
	FILE *f = fopen(path, "r");

	if (!f)
		return -1;
	while (*ns < MAX_SERIES - 1 && fgets(line, sizeof(line), f)) {
		struct series *x = &s[*ns];
		int argc = 0;
		char *save = NULL;

		line[strcspn(line, "\n")] = '\0';
		if (!line[0])
			continue;
		x->label = strdup(strtok_r(line, "\t", &save));
		for (char *a; argc < MAX_ARGS - 1 && (a = strtok_r(NULL, "\t", &save));)
			x->argv[argc++] = strdup(a);
		x->ms = calloc((size_t)n, sizeof(*x->ms));
		(*ns)++;
	}
	fclose(f);
	return 0;
}

/* The next permutation of a[0..n-1] in lexicographic order, wrapping to
 * the first after the last. */
static void next_order(int *a, int n)
{
	int i = n - 2, j = n - 1;

	while (i >= 0 && a[i] >= a[i + 1])
		i--;
	if (i >= 0) {
		int t;

		while (a[j] <= a[i])
			j--;
		t = a[i];
		a[i] = a[j];
		a[j] = t;
	}
	for (int l = i + 1, r = n - 1; l < r; l++, r--) {
		int t = a[l];

		a[l] = a[r];
		a[r] = t;
	}
}

static uint64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static int spawn_wait(char *const *argv)
{
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int st = -1;

	char *args[MAX_ARGS];
	int n = 0;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	for (int i = 0; argv[i]; i++) {
		int fd;
		char path[4096];

		if (sscanf(argv[i], "@fd%d=%4095s", &fd, path) == 2)
			posix_spawn_file_actions_addopen(&fa, fd, path, O_RDONLY, 0);
		else
			args[n++] = argv[i];
	}
	args[n] = NULL;
	if (posix_spawn(&pid, args[0], &fa, NULL, args, environ) == 0)
		waitpid(pid, &st, 0);
	posix_spawn_file_actions_destroy(&fa);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

struct bench {
	struct event_base *base;
	int status;
};

static void done(struct wk_runner *r, struct al_result *res, void *arg)
{
	struct bench *b = arg;

	(void)r;
	b->status = res->status;
	if (res->status != AL_ST_OK)
		fprintf(stderr, "bench: job failed: %s: %s\n", al_status_name(res->status),
			res->error ? res->error : "");
	event_base_loopbreak(b->base);
}

static int fini_fail(const struct al_backend_ops *ops)
{
	if (ops->fini)
		ops->fini();
	return 1;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"backend", required_argument, NULL, 'b'},
	    {"n", required_argument, NULL, 'n'},
	    {"state-dir", required_argument, NULL, 's'},
	    {"uid-base", required_argument, NULL, 'u'},
	    {"code", required_argument, NULL, 'c'},
	    {"dump-seccomp", required_argument, NULL, 'd'},
	    {"baselines", required_argument, NULL, 'B'},
	    {"argv", required_argument, NULL, 'A'},
	    {"bundle-copy", required_argument, NULL, 'K'},
	    {"image", required_argument, NULL, 'I'},
	    {"images", required_argument, NULL, 'G'},
	    {"env", required_argument, NULL, 'E'},
	    {"settle-ms", required_argument, NULL, 'S'},
	    {NULL, 0, NULL, 0},
	};
	struct al_backend_conf conf = {.worker_id = "bench",
				       .state_dir = "/var/tmp/airlock-bench",
				       .uid_base = 62000,
				       .slots = 1,
				       .collect_max_bytes = 1 << 20,
				       .nofile = 256,
				       .userns_base = 200000};
	const char *backend = "process", *code = "print(1)", *baselines = NULL, *argv0 = NULL;
	const char *image = NULL;
	struct al_kv env = {0};
	struct series series[MAX_SERIES] = {{0}};
	int nseries = 0;
	const struct al_backend_ops *ops;
	struct al_err err = {0};
	struct bench b = {0};
	int order[MAX_SERIES];
	int n = 50, c, settle_ms = 0;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'b': backend = optarg; break;
		case 'n': n = atoi(optarg); break;
		case 's': conf.state_dir = optarg; break;
		case 'u': conf.uid_base = (uid_t)atoi(optarg); break;
		case 'c': code = optarg; break;
		case 'B': baselines = optarg; break;
		case 'A': argv0 = optarg; break;
		case 'K': conf.bundle_copy = optarg; break;
		case 'I': image = optarg; break; /* a catalogue image's name */
		case 'G': conf.images_dir = optarg; break;
		case 'S': settle_ms = atoi(optarg); break;
		case 'E':
			env.key = optarg;
			env.value = strchr(optarg, '=');
			if (!env.value)
				return 2;
			*env.value++ = '\0';
			break;
		case 'd': {
			struct al_seccomp sc;
			FILE *f = fopen(optarg, "wb");

			if (!f || al_seccomp_build(&sc, &err) ||
			    fwrite(sc.prog.filter, sizeof(*sc.prog.filter), sc.prog.len, f) !=
				sc.prog.len) {
				fprintf(stderr, "bench: dump seccomp: %s\n", err.msg);
				return 1;
			}
			fclose(f);
			al_seccomp_free(&sc);
			return 0;
		}
		default: return 2;
		}
	}
	/* The helpers are built beside the worker, one level up. */
	{
		static char init_path[PATH_MAX];
		ssize_t k = readlink("/proc/self/exe", init_path, sizeof(init_path) - 64);
		char *slash = NULL;

		if (k > 0) {
			init_path[k] = '\0';
			slash = strrchr(init_path, '/');
		}
		if (slash) {
			strcpy(slash, "/..");
			conf.helper_dir = init_path;
		}
	}
	ops = al_backend_find(backend);
	if (!ops || al_backend_init(ops, &conf, &err)) {
		fprintf(stderr, "bench: backend %s: %s\n", backend, ops ? err.msg : "unknown");
		return 1;
	}
	if (n < 1 || (baselines && load_baselines(baselines, series, &nseries, n))) {
		fprintf(stderr, "bench: bad --n or --baselines\n");
		return 2;
	}
	series[nseries].label = (char *)backend;
	series[nseries].ms = calloc((size_t)n, sizeof(uint64_t));
	b.base = event_base_new();
	for (int k = 0; k <= nseries; k++)
		order[k] = k;
	for (int i = 0; i < n; i++) {
		char name[] = "bench";
		struct al_job job = {.version = AL_PROTO_VERSION,
				     .id = name,
				     .tenant = name,
				     .tier = name,
				     .runtime = AL_RUNTIME_PYTHON};
		struct al_run_spec spec = {
		    .job = &job, .cpu_millis = 1000, .attempt = 1, .image = image};
		struct wk_runner *r;
		uint64_t t0;

		char *jargv[2] = {(char *)argv0, NULL};

		if (env.key) {
			job.env = &env;
			job.nenv = 1;
		}
		if (argv0) { /* a plain argv job instead of python code */
			job.runtime = AL_RUNTIME_ARGV;
			job.argv = jargv;
			job.argc = 1;
		} else {
			job.code.data = (char *)code;
			job.code.len = strlen(code);
		}
		spec.limits =
		    (struct al_limits){10000, 10000, 256u << 20, 64, 1 << 20, 1 << 20, 64u << 20};
		/* Each round runs the series in the next of their orders
		 * (permutations), so that each follows every other equally
		 * often: what one leaves running (podman's cleanup, say) or an
		 * idle pause before it slows every series alike. */
		if (i > 0)
			next_order(order, nseries + 1);
		for (int j = 0; j <= nseries; j++) {
			int k = order[j];

			t0 = mono_us();
			if (k < nseries) {
				if (spawn_wait(series[k].argv)) {
					fprintf(stderr, "bench: baseline %s failed\n",
						series[k].label);
					return fini_fail(ops);
				}
				series[k].ms[i] = mono_us() - t0;
				continue;
			}
			r = wk_runner_start(b.base, ops, &conf, &spec, done, &b);
			event_base_dispatch(b.base);
			series[nseries].ms[i] = mono_us() - t0;
			/* What the result left queued (the slot's next sandbox) runs
			 * now, between jobs, as in the worker's loop. */
			event_base_loop(b.base, EVLOOP_NONBLOCK);
			/* what that started in the background (a warm container's
			 * runtime) must not slow the next series: untimed */
			if (settle_ms > 0)
				nanosleep(&(struct timespec){settle_ms / 1000,
							     (settle_ms % 1000) * 1000000L},
					  NULL);
			wk_runner_free(r);
			if (b.status != AL_ST_OK)
				return fini_fail(ops); /* the backend's mounts and cgroups go too */
		}
	}
	printf("{");
	for (int k = 0; k <= nseries; k++) {
		printf("%s\"%s\":[", k ? "," : "", series[k].label);
		for (int i = 0; i < n; i++)
			printf("%s%llu", i ? "," : "", (unsigned long long)series[k].ms[i]);
		printf("]");
	}
	printf("}\n");
	event_base_free(b.base);
	if (ops->fini)
		ops->fini();
	return 0;
}
