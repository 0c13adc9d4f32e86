/* main.c - airlock-worker entry point. */
#include <errno.h>
#include <stdint.h>
#include <stddef.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "egress_ca.h"
#include "../proto/json.h"
#include <yaml.h>

#include "../common/cleanup.h"
#include "../common/redis_url.h"
#include "../common/env.h"
#include "../common/opt.h"
#include "hostlock.h"
#include "runner.h"
#include "instage.h"
#include "service.h"

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

static void run_one_done(struct wk_runner *r, struct al_result *res, void *arg)
{
	struct run_one *ro = arg;

	(void)r;
	ro->out = al_result_to_json(res);
	event_base_loopbreak(ro->base);
}

/* --run-one: run a single msgpack job file on one backend, print the result
 * as JSON. For operators checking a host, and for the hostile suite. */
static int run_one(const char *path, const struct al_backend_ops *ops,
		   const struct al_backend_conf *conf, const char *policy_path)
{
	struct al_policy pol = {0};
	const struct al_tier_policy *t = NULL;
	struct run_one ro = {0};
	struct al_run_spec spec = {0};
	struct al_err err = {0};
	struct al_buf b = {0};
	struct al_job job;
	struct wk_runner *r;
	char chunk[65536];
	size_t n;
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
	int rc = 1;

	if (!f) {
		fprintf(stderr, "airlock-worker: cannot open %s: %s\n", path, strerror(errno));
		return 1;
	}
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0 && b.len <= AL_JOB_MAX_BYTES)
		if (al_buf_append(&b, chunk, n)) {
			fprintf(stderr, "airlock-worker: %s: out of memory\n", path);
			if (f != stdin)
				fclose(f);
			al_buf_free(&b);
			return 1;
		}
	if (f != stdin)
		fclose(f);
	if (al_job_decode(b.data, b.len, &job, &err)) {
		fprintf(stderr, "airlock-worker: %s: invalid job: %s\n", path, err.msg);
		al_buf_free(&b);
		return 1;
	}
	al_buf_free(&b);
	/* With --policy, the job's tier says what it gets besides its limits:
	 * the image, the operator's variables, the binds, the CPU share. */
	if (policy_path && (al_policy_load(policy_path, &pol, &err) ||
			    wk_egress_ca_for(&pol, conf->state_dir, &err))) {
		fprintf(stderr, "airlock-worker: %s\n", err.msg);
		al_job_free(&job);
		return 1;
	}
	if (policy_path) {
		t = al_policy_tier(&pol, job.tier);
		if (!t) {
			fprintf(stderr, "airlock-worker: %s: tier \"%s\" is not in %s\n", path,
				job.tier, policy_path);
			goto out_job;
		}
		if (al_policy_admit_image(t, &job, &err)) {
			fprintf(stderr, "airlock-worker: %s: rejected: %s\n", path, err.msg);
			goto out_job;
		}
		spec.image = job.image;
		spec.guest = t->guest;
		spec.env = t->env;
		spec.nenv = t->nenv;
		spec.binds = t->binds;
		spec.nbinds = t->nbinds;
		spec.oci_runtime = t->oci_runtime;
		spec.oci_platform = t->oci_platform;
	}
	if (al_backend_init(ops, conf, &err)) {
		fprintf(stderr, "airlock-worker: backend %s unavailable: %s\n", ops->name, err.msg);
		goto out_job;
	}
	al_backend_sweep(ops, conf, NULL);
	spec.job = &job;
	fill_limits(&spec.limits, &job.limits);
	spec.cpu_millis = t ? t->cpu_millis : 1000;
	spec.network = AL_NET_NONE;
	spec.attempt = 1;
	ro.base = event_base_new();
	r = wk_runner_start(ro.base, ops, conf, &spec, run_one_done, &ro);
	if (!r) {
		fprintf(stderr, "airlock-worker: out of memory\n");
		goto out_base;
	}
	event_base_dispatch(ro.base);
	event_base_loop(ro.base, EVLOOP_NONBLOCK); /* run what the result left queued */
	json_dumpf(ro.out, stdout, JSON_SORT_KEYS | JSON_COMPACT);
	putchar('\n');
	json_decref(ro.out);
	wk_runner_free(r);
	rc = 0;
out_base:
	event_base_free(ro.base);
	if (ops->fini)
		ops->fini();
out_job:
	al_job_free(&job);
	al_policy_free(&pol);
	return rc;
}

/* Every setting: the worker's conf, and the options that become conf
 * only once read (the tier list, on|off, the refused --hide). */
struct settings {
	struct wk_worker_conf conf;
	const char *config, *tiers, *hide, *live_output, *run_one, *backend, *prefetch;
	bool version, help;
	char *tiers_copy; /* --tiers, split in place */
};

/* The one table of options (common/opt.h): flags, AIRLOCK_* and --config. */
#define S(f)  offsetof(struct settings, f)
#define STR   AL_OPT_STR
#define FLAG  AL_OPT_FLAG
#define ONEOF AL_OPT_ONEOF
static const struct al_opt opts[] = {
    {"config", STR, S(config), 0, 0, 0, NULL, "FILE", "YAML mapping of the options below"},
    {"redis", STR, S(conf.redis_url), 0, 0, 0, NULL, "URL",
     "redis://[user:pass@]host:port[/db] or unix:///path.sock\n(default redis://127.0.0.1:6379)"},
    {"policy", STR, S(conf.policy_path), 0, 0, 0, NULL, "FILE",
     "the operator's policy (default: built-in)"},
    {"tiers", STR, S(tiers), 0, 0, 0, NULL, "A,B",
     "tiers to serve (default: every tier in the policy)"},
    {"slots", AL_OPT_UINT, S(conf.slots), 1, 256, 0, NULL, "N",
     "concurrent jobs per backend (default 2)"},
    {"prefetch", STR, S(prefetch), 0, 0, 0, NULL, "auto|N",
     "jobs per backend claimed ahead of a free slot and held:\nauto (default) as many as its slots "
     "free within ~5 ms\nby their recent run times (none for long jobs, at most\n16); N that many; "
     "0 none. Held at most ~1 s"},
    {"heartbeat-ms", AL_OPT_U64, S(conf.heartbeat_ms), 50, 60000, 0, NULL, "N",
     "lease renewal period (default 1000)"},
    {"drain-grace-ms", AL_OPT_U64, S(conf.drain_grace_ms), 0, 86400000, 0, NULL, "N",
     "on SIGTERM, time running jobs get (default 30000)"},
    {"state-dir", STR, S(conf.backend.state_dir), 0, 0, 0, NULL, "DIR",
     "per-job directories (default /var/lib/airlock)"},
    {"worker-id", STR, S(conf.backend.worker_id), 0, 0, 0, NULL, "ID",
     "unique, stable name (default: the host name); not one\nof the state directory's "
     "shared entries (images,\nsnapshots, ...)"},
    {"uid-base", AL_OPT_UINT, S(conf.backend.uid_base), 0, 4000000000ull, 0, NULL, "N",
     "slot i runs as uid N+i, a warm interpreter until its job\nas N+slots, microVM n's VMM as "
     "N+256+n: give each\nworker on a host its own 768 ids (default 60000)"},
    {"hide", STR, S(hide), 0, 0, 0, NULL, NULL, NULL}, /* refused, saying why */
    {"helper-dir", STR, S(conf.backend.helper_dir), 0, 0, 0, NULL, "DIR",
     "where the helpers (airlock-sandbox-init, ...) are\n(default: beside this executable)"},
    {"images", STR, S(conf.backend.images_dir), 0, 0, 0, NULL, "DIR",
     "the image catalogue deploy/images/build.sh made\n(default " AL_IMAGES_DIR ")"},
    {"userns-base", AL_OPT_UINT, S(conf.backend.userns_base), 65536, 4000000000ull, 0, NULL, "N",
     "container slot i's root is host uid N+i*65536 (default\n200000)"},
    {"oci-runtime", STR, S(conf.backend.oci_runtime), 0, 0, 0, NULL, "R",
     "runc, crun or runsc (default: detected)"},
    {"vmm", STR, S(conf.backend.vmm), 0, 0, 0, NULL, "NAME", "microVM monitor: qemu (default)"},
    {"vmm-binary", STR, S(conf.backend.vmm_binary), 0, 0, 0, NULL, "PATH",
     "its executable (default: found on PATH)"},
    {"vm-accel", ONEOF, S(conf.backend.vm_accel), 0, 0, 0, "kvm|tcg", "A",
     "kvm or tcg (default: kvm when /dev/kvm opens)"},
    {"vm-console", STR, S(conf.backend.vm_console), 0, 0, 0, NULL, "FILE",
     "append microVM consoles here (debugging only)"},
    {"vm-hang-ms", AL_OPT_U64, S(conf.backend.vm_hang_ms), 1000, 600000, 0, NULL, "N",
     "a microVM silent this long (boot, heartbeats) is broken\n(default 20000 under TCG, 5000 with "
     "KVM)"},
    {"vm-tcg-cache-mib", AL_OPT_U64, S(conf.backend.vm_tcg_cache_mib), 8, 1024, 0, NULL, "N",
     "under TCG, QEMU's code cache per microVM (default 64):\nan idle VM holds it whole; "
     "smaller is denser, slower\n(docs/snapshots.md)"},
    {"vm-ksm", FLAG, S(conf.backend.vm_ksm), 0, 0, 0, NULL, NULL,
     "let the kernel merge identical pages of microVMs\n(KSM; off by default: a tenant "
     "can time another's\npages through it; docs/snapshots.md)"},
    {"vm-template-share", FLAG, S(conf.backend.vm_template_share), 0, 0, 0, NULL, NULL,
     "a warm pool's copies map its template's memory,\nshared until written, instead of "
     "reading it (off by\ndefault: tenants' VMs then share pages; a copy keeps\nwhat its "
     "guest frees; docs/snapshots.md)"},
    {"libvirt", STR, S(conf.backend.libvirt_uri), 0, 0, 0, NULL, "URI",
     "service VMs' libvirt (default qemu:///system)"},
    {"input-cache-bytes", AL_OPT_U64, S(conf.backend.input_cache_bytes), 0, 1ull << 50, 0, NULL,
     "N",
     "the host's cache of jobs' inputs by URL, in\nSTATE/inputs-cache, least recently used out "
     "first\n(default 8 GiB)"},
    {"input-timeout-ms", AL_OPT_U64, S(conf.backend.input_timeout_ms), 1000, 86400000, 0, NULL, "N",
     "one job's inputs by URL: the fetch's time (default 600000)"},
    {"webhook-secret", STR, S(conf.webhook_secret), 0, 0, 0, NULL, "S",
     "key for the X-Airlock-Signature header of callbacks\n(every tenant's: for one tenant, or "
     "tenants that trust\neach other)"},
    {"webhook-secrets", STR, S(conf.webhook_secrets_dir), 0, 0, 0, NULL, "DIR",
     "each tenant's callbacks signed with its own key, the\nfirst line of DIR/<tenant> (none sent "
     "without one)"},
    {"allow-noop", FLAG, S(conf.allow_noop), 0, 0, 0, NULL, NULL,
     "offer the benchmark-only noop backend"},
    {"live-output", ONEOF, S(live_output), 0, 0, 0, "on|off", "on|off",
     "stream running jobs' stdout and stderr to al:out:<id>\n(default on; the result keeps the "
     "whole output either way)"},
    {"bundle-copy", STR, S(conf.backend.bundle_copy), 0, 0, 0, NULL, "FILE",
     "benchmarks: keep each job's container config.json or VM\ndomain XML (and FILE.job, its job "
     "frame) here"},
    {"run-one", STR, S(run_one), 0, 0, 0, NULL, "FILE",
     "run one msgpack job file here and print the result as JSON"},
    {"backend", STR, S(backend), 0, 0, 0, NULL, "NAME", "backend for --run-one (default process)"},
    {"version", FLAG, S(version), 0, 0, 0, NULL, NULL, "print the protocol version and exit"},
    {"help", FLAG, S(help), 0, 0, 0, NULL, NULL, "this text, and exit"},
    {NULL, 0, 0, 0, 0, 0, NULL, NULL, NULL},
};
#undef S
#undef STR
#undef FLAG
#undef ONEOF

static void usage(FILE *f)
{
	fputs("usage: airlock-worker [options]\n"
	      "Serve jobs from Redis (default), or run one job file with --run-one.\n"
	      "Options (also AIRLOCK_<NAME> in the environment, or name: value lines in --config;\n"
	      "flags win over the environment, which wins over the file):\n",
	      f);
	al_opts_usage(f, opts);
	fputs("SIGHUP reloads the policy; SIGTERM drains (--drain-grace-ms), then stops.\n", f);
}

/* --config FILE: a YAML mapping of option names to values, each applied as
 * its flag would be (the document is kept: values point into it). */
static int load_config(struct settings *st, const char *path, yaml_document_t *doc)
{
	yaml_parser_t parser;
	yaml_node_t *root;
	cleanup_fclose FILE *f = fopen(path, "rb");
	struct al_err err = {0};

	if (!f) {
		fprintf(stderr, "airlock-worker: --config %s: %s\n", path, strerror(errno));
		return -1;
	}
	yaml_parser_initialize(&parser);
	yaml_parser_set_input_file(&parser, f);
	if (!yaml_parser_load(&parser, doc)) {
		fprintf(stderr, "airlock-worker: %s:%zu: YAML syntax error: %s\n", path,
			parser.problem_mark.line + 1, parser.problem ? parser.problem : "?");
		yaml_parser_delete(&parser);
		return -1;
	}
	yaml_parser_delete(&parser);
	root = yaml_document_get_root_node(doc);
	if (!root)
		return 0;
	if (root->type != YAML_MAPPING_NODE) {
		fprintf(stderr, "airlock-worker: %s: expected \"option: value\" lines\n", path);
		return -1;
	}
	for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
	     p++) {
		yaml_node_t *k = yaml_document_get_node(doc, p->key);
		yaml_node_t *v = yaml_document_get_node(doc, p->value);
		const struct al_opt *o = k->type == YAML_SCALAR_NODE
					     ? al_opt_find(opts, (const char *)k->data.scalar.value)
					     : NULL;

		if (!o || v->type != YAML_SCALAR_NODE || !strcmp(o->name, "config") ||
		    o->kind == AL_OPT_FLAG) {
			fprintf(
			    stderr,
			    "airlock-worker: %s:%zu: unknown option; see airlock-worker --help\n",
			    path, k->start_mark.line + 1);
			return -1;
		}
		if (al_opt_set(o, st, (const char *)v->data.scalar.value, &err)) {
			fprintf(stderr, "airlock-worker: %s:%zu: %s\n", path,
				k->start_mark.line + 1, err.msg);
			return -1;
		}
	}
	return 0;
}

/* What the options become once read: the tier list, on|off, --slots for
 * the backends too, the refused --hide. */
static int finish(struct settings *st)
{
	struct wk_worker_conf *conf = &st->conf;
	char *save = NULL;

	if (st->hide) {
		/* Jobs see nothing of the host that a tier does not bind: there
		 * is nothing left to hide, and a silent no-op would mislead. */
		fprintf(stderr,
			"airlock-worker: --hide %s: no longer an option: jobs get a root of "
			"their own and see no host path unless the tier's policy binds it "
			"(docs/backends/process.md)\n",
			st->hide);
		return -1;
	}
	conf->backend.slots = conf->slots;
	if (!st->prefetch || !strcmp(st->prefetch, "auto")) {
		conf->prefetch_auto = true;
		conf->prefetch = AL_PREFETCH_AUTO_MAX;
	} else {
		char *end;
		unsigned long n = strtoul(st->prefetch, &end, 10);

		if (!*st->prefetch || *end || n > 256 || *st->prefetch == '-') {
			fprintf(stderr,
				"airlock-worker: --prefetch: expected auto or a whole number in "
				"0..256, not \"%s\"\n",
				st->prefetch);
			return -1;
		}
		conf->prefetch = (unsigned)n;
	}
	conf->no_live_output = st->live_output && !strcmp(st->live_output, "off");
	if (!st->tiers)
		return 0;
	if (!(st->tiers_copy = strdup(st->tiers))) {
		fprintf(stderr, "airlock-worker: out of memory\n");
		return -1;
	}
	for (char *t = strtok_r(st->tiers_copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (conf->ntiers == AL_TIERS_MAX) {
			fprintf(stderr, "airlock-worker: --tiers: at most %d\n", AL_TIERS_MAX);
			return -1;
		}
		conf->tiers[conf->ntiers++] = t;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct al_err err = {0};
	struct wk_worker_conf conf = {
	    .redis_url = "redis://127.0.0.1:6379",
	    .slots = 2,
	    .heartbeat_ms = 1000,
	    .drain_grace_ms = 30000,
	    .backend =
		{
		    .worker_id = NULL,
		    .state_dir = "/var/lib/airlock",
		    .uid_base = 60000,
		    .slots = 2,
		    .collect_max_bytes = 1u << 20,
		    .nofile = 256,
		    .userns_base = 200000,
		},
	};
	struct settings st = {.conf = conf, .backend = "process"};
	const char *config = al_opt_env("config", NULL);
	yaml_document_t doc;
	bool have_doc = false;
	char idbuf[64];
	int rc;

	/* 1. the config file, 2. AIRLOCK_* variables, 3. flags */
	for (int i = 1; i + 1 < argc; i++)
		if (!strcmp(argv[i], "--config"))
			config = argv[i + 1];
	if (config) {
		if (load_config(&st, config, &doc))
			return 2;
		have_doc = true;
	}
	if (al_opts_parse(opts, &st, argc, argv, &err)) {
		fprintf(stderr, "airlock-worker: %s (see airlock-worker --help)\n", err.msg);
		return 2;
	}
	if (st.version) {
		printf("airlock-worker protocol %d\n", AL_PROTO_VERSION);
		return 0;
	}
	if (st.help) {
		usage(stdout);
		return 0;
	}
	if (finish(&st))
		return 2;
	conf = st.conf;
	if (!conf.backend.worker_id) {
		/* Stable across restarts, so a restarted worker sweeps what its
		 * crashed predecessor left; give each worker on a host its own. */
		char host[48] = "host";

		gethostname(host, sizeof(host) - 1);
		snprintf(idbuf, sizeof(idbuf), "%.40s", host);
		conf.backend.worker_id = idbuf;
	}
	signal(SIGPIPE, SIG_IGN);
	if (st.run_one) {
		const struct al_backend_ops *ops = al_backend_find(st.backend);

		if (!ops) {
			fprintf(stderr, "airlock-worker: unknown backend \"%s\"\n", st.backend);
			return 2;
		}
		if (wk_hostlock_take(AL_HOSTLOCK_DIR, conf.backend.worker_id, true,
				     conf.backend.state_dir, &err) < 0) {
			fprintf(stderr, "airlock-worker: %s\n", err.msg);
			return 2;
		}
		rc = run_one(st.run_one, ops, &conf.backend, conf.policy_path);
	} else {
		if (wk_hostlock_take(AL_HOSTLOCK_DIR, conf.backend.worker_id, false,
				     conf.backend.state_dir, &err) < 0) {
			fprintf(stderr, "airlock-worker: %s\n", err.msg);
			return 2;
		}
		wk_hostlock_sweep_dead(AL_HOSTLOCK_DIR, conf.backend.worker_id,
				       conf.backend.state_dir);
		wk_instage_sweep(&conf.backend); /* a crashed run's inputs packs */
		if ((rc = wk_worker_run(&conf, &err)) == 2)
			fprintf(stderr, "airlock-worker: %s\n", err.msg);
	}
	free(st.tiers_copy);
	if (have_doc)
		yaml_document_delete(&doc);
	return rc;
}
