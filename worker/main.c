/* main.c - airlock-worker entry point. */
#include <errno.h>
#include <stdint.h>
#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../proto/json.h"
#include <yaml.h>

#include "../common/redis_url.h"
#include "../common/env.h"
#include "../common/opt.h"
#include "hostlock.h"
#include "runner.h"
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
		   const struct al_backend_conf *conf, const char *policy_path)
{
	struct al_policy pol = {0};
	const struct al_tier_policy *t = NULL;
	struct run_one ro = {0};
	struct al_run_spec spec = {0};
	struct al_err err = {0};
	struct al_buf b = {0};
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
	if (policy_path && al_policy_load(policy_path, &pol, &err)) {
		fprintf(stderr, "airlock-worker: %s\n", err.msg);
		al_job_free(&job);
		return 1;
	}
	if (policy_path) {
		t = al_policy_tier(&pol, job.tier);
		if (!t) {
			fprintf(stderr, "airlock-worker: %s: tier \"%s\" is not in %s\n", path,
				job.tier, policy_path);
			goto out;
		}
		if (al_policy_admit_image(t, &job, &err)) {
			fprintf(stderr, "airlock-worker: %s: rejected: %s\n", path, err.msg);
			goto out;
		}
		spec.image = job.image;
		spec.guest = t->guest;
		spec.env = t->env;
		spec.nenv = t->nenv;
		spec.binds = t->binds;
		spec.nbinds = t->nbinds;
	}
	if (al_backend_init(ops, conf, &err)) {
		fprintf(stderr, "airlock-worker: backend %s unavailable: %s\n", ops->name, err.msg);
		goto out;
	}
	al_backend_sweep(ops, conf, NULL);
	spec.job = &job;
	fill_limits(&spec.limits, &job.limits);
	spec.cpu_millis = t ? t->cpu_millis : 1000;
	spec.network = AL_NET_NONE;
	spec.attempt = 1;
	ro.base = event_base_new();
	r = al_runner_start(ro.base, ops, conf, &spec, run_one_done, &ro);
	if (!r) {
		fprintf(stderr, "airlock-worker: out of memory\n");
		goto out_base;
	}
	event_base_dispatch(ro.base);
	event_base_loop(ro.base, EVLOOP_NONBLOCK); /* run what the result left queued */
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
	al_policy_free(&pol);
	return rc;
}

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: airlock-worker [options]\n"
	    "Serve jobs from Redis (default), or run one job file with --run-one.\n"
	    "Options (also AIRLOCK_<NAME> in the environment, or name: value lines in --config;\n"
	    "flags win over the environment, which wins over the file):\n"
	    "  --config FILE        YAML mapping of the options below\n"
	    "  --redis URL          redis://[user:pass@]host:port[/db] or unix:///path.sock\n"
	    "                       (default redis://127.0.0.1:6379)\n"
	    "  --policy FILE        the operator's policy (default: built-in)\n"
	    "  --tiers A,B          tiers to serve (default: every tier in the policy)\n"
	    "  --slots N            concurrent jobs per backend (default 2)\n"
	    "  --prefetch N         jobs per backend claimed ahead of a free slot, for short\n"
	    "                       jobs: held at most ~1 s, then given back (default 0)\n"
	    "  --heartbeat-ms N     lease renewal period (default 1000)\n"
	    "  --drain-grace-ms N   on SIGTERM, time running jobs get (default 30000)\n"
	    "  --state-dir DIR      per-job directories (default /var/lib/airlock)\n"
	    "  --worker-id ID       unique, stable name (default: the host name)\n"
	    "  --uid-base N         slot i runs as uid N+i, microVM n's VMM as N+256+n: give\n"
	    "                       each worker on a host its own 768 ids (default 60000)\n"
	    "  --helper-dir DIR     where the helpers (airlock-sandbox-init, ...) are\n"
	    "                       (default: beside this executable)\n"
	    "  --images DIR         the image catalogue deploy/images/build.sh made\n"
	    "                       (default " AL_IMAGES_DIR ")\n"
	    "  --userns-base N      container slot i's root is host uid N+i*65536 (default "
	    "200000)\n"
	    "  --oci-runtime R      runc, crun or runsc (default: detected)\n"
	    "  --vmm NAME           microVM monitor: qemu (default)\n"
	    "  --vmm-binary PATH    its executable (default: found on PATH)\n"
	    "  --vm-accel A         kvm or tcg (default: kvm when /dev/kvm opens)\n"
	    "  --vm-console FILE    append microVM consoles here (debugging only)\n"
	    "  --libvirt URI        service VMs' libvirt (default qemu:///system)\n"
	    "  --vm-hang-ms N       a microVM silent this long (boot, heartbeats) is broken\n"
	    "                       (default 20000 under TCG, 5000 with KVM)\n"
	    "  --webhook-secret S   key for the X-Airlock-Signature header of callbacks\n"
	    "                       (every tenant's: for one tenant, or tenants that trust\n"
	    "                       each other)\n"
	    "  --webhook-secrets DIR  each tenant's callbacks signed with its own key, the\n"
	    "                       first line of DIR/<tenant> (none sent without one)\n"
	    "  --allow-noop         offer the benchmark-only noop backend\n"
	    "  --live-output on|off stream running jobs' stdout and stderr to al:out:<id>\n"
	    "                       (default on; the result keeps the whole output either way)\n"
	    "  --bundle-copy FILE   benchmarks: keep each job's container config.json or VM\n"
	    "                       domain XML (and FILE.job, its job frame) here\n"
	    "  --run-one FILE       run one msgpack job file here and print the result as JSON\n"
	    "  --backend NAME       backend for --run-one (default process)\n"
	    "  --version\n");
}

static const struct option opts[] = {
    {"config", required_argument, NULL, 'C'},
    {"redis", required_argument, NULL, 'R'},
    {"policy", required_argument, NULL, 'P'},
    {"tiers", required_argument, NULL, 'T'},
    {"slots", required_argument, NULL, 'n'},
    {"prefetch", required_argument, NULL, 'p'},
    {"heartbeat-ms", required_argument, NULL, 'h'},
    {"drain-grace-ms", required_argument, NULL, 'g'},
    {"state-dir", required_argument, NULL, 's'},
    {"worker-id", required_argument, NULL, 'w'},
    {"uid-base", required_argument, NULL, 'u'},
    {"hide", required_argument, NULL, 'H'},
    {"helper-dir", required_argument, NULL, 'i'},
    {"images", required_argument, NULL, 'I'},
    {"userns-base", required_argument, NULL, 'U'},
    {"oci-runtime", required_argument, NULL, 'O'},
    {"vmm", required_argument, NULL, 'M'},
    {"vmm-binary", required_argument, NULL, 'Q'},
    {"vm-accel", required_argument, NULL, 'A'},
    {"vm-console", required_argument, NULL, 'K'},
    {"vm-hang-ms", required_argument, NULL, 'G'},
    {"libvirt", required_argument, NULL, 'L'},
    {"webhook-secret", required_argument, NULL, 'S'},
    {"webhook-secrets", required_argument, NULL, 'W'},
    {"allow-noop", no_argument, NULL, 'N'},
    {"live-output", required_argument, NULL, 'o'},
    {"bundle-copy", required_argument, NULL, 'Y'},
    {"run-one", required_argument, NULL, 'r'},
    {"backend", required_argument, NULL, 'b'},
    {"version", no_argument, NULL, 'V'},
    {"help", no_argument, NULL, 'z'},
    {NULL, 0, NULL, 0},
};

struct opts_state {
	struct al_worker_conf *conf;
	const char *run_path, *backend;
	char *tiers_copy;
};

static int parse_u64(const char *name, const char *v, uint64_t min, uint64_t max, uint64_t *out)
{
	if (!al_parse_u64(v, min, max, out)) {
		fprintf(stderr,
			"airlock-worker: --%s: expected a whole number in %llu..%llu, got \"%s\"\n",
			name, (unsigned long long)min, (unsigned long long)max, v);
		return -1;
	}
	return 0;
}

/* Apply one option (from a flag, the environment or the config file).
 * Strings are kept by pointer: callers pass storage that lives on. */
static int apply(struct opts_state *st, int c, const char *name, const char *v)
{
	struct al_worker_conf *conf = st->conf;
	uint64_t u;

	switch (c) {
	case 'R': conf->redis_url = v; break;
	case 'P': conf->policy_path = v; break;
	case 'T': {
		char *save = NULL;

		free(st->tiers_copy);
		if (!(st->tiers_copy = strdup(v))) {
			fprintf(stderr, "airlock-worker: out of memory\n");
			return -1;
		}
		conf->ntiers = 0;
		for (char *t = strtok_r(st->tiers_copy, ",", &save); t;
		     t = strtok_r(NULL, ",", &save)) {
			if (conf->ntiers == AL_TIERS_MAX) {
				fprintf(stderr, "airlock-worker: --tiers: at most %d\n",
					AL_TIERS_MAX);
				return -1;
			}
			conf->tiers[conf->ntiers++] = t;
		}
		break;
	}
	case 'n':
		if (parse_u64(name, v, 1, 256, &u))
			return -1;
		conf->slots = conf->backend.slots = (unsigned)u;
		break;
	case 'p':
		if (parse_u64(name, v, 0, 256, &u))
			return -1;
		conf->prefetch = (unsigned)u;
		break;
	case 'h':
		if (parse_u64(name, v, 50, 60000, &conf->heartbeat_ms))
			return -1;
		break;
	case 'g':
		if (parse_u64(name, v, 0, 86400000, &conf->drain_grace_ms))
			return -1;
		break;
	case 's': conf->backend.state_dir = v; break;
	case 'w': conf->backend.worker_id = v; break;
	case 'u':
		if (parse_u64(name, v, 0, 4000000000ull, &u))
			return -1;
		conf->backend.uid_base = (uid_t)u;
		break;
	case 'H':
		/* Jobs see nothing of the host that a tier does not bind: there
		 * is nothing left to hide, and a silent no-op would mislead. */
		fprintf(stderr,
			"airlock-worker: --hide %s: no longer an option: jobs get a root of "
			"their own and see no host path unless the tier's policy binds it "
			"(docs/backends/process.md)\n",
			v);
		return -1;
	case 'S': conf->webhook_secret = v; break;
	case 'W': conf->webhook_secrets_dir = v; break;
	case 'i': conf->backend.helper_dir = v; break;
	case 'I': conf->backend.images_dir = v; break;
	case 'U':
		if (parse_u64(name, v, 65536, 4000000000ull, &u))
			return -1;
		conf->backend.userns_base = (uint32_t)u;
		break;
	case 'O': conf->backend.oci_runtime = v; break;
	case 'M': conf->backend.vmm = v; break;
	case 'Q': conf->backend.vmm_binary = v; break;
	case 'A':
		if (strcmp(v, "kvm") && strcmp(v, "tcg")) {
			fprintf(stderr, "airlock-worker: --%s: expected kvm or tcg, not \"%s\"\n",
				name, v);
			return -1;
		}
		conf->backend.vm_accel = v;
		break;
	case 'K': conf->backend.vm_console = v; break;
	case 'L': conf->backend.libvirt_uri = v; break;
	case 'Y': conf->backend.bundle_copy = v; break;
	case 'G':
		if (parse_u64(name, v, 1000, 600000, &conf->backend.vm_hang_ms))
			return -1;
		break;
	case 'N': conf->allow_noop = !v || strcmp(v, "false"); break;
	case 'o':
		if (strcmp(v, "on") && strcmp(v, "off")) {
			fprintf(stderr, "airlock-worker: --%s: expected on or off, not \"%s\"\n",
				name, v);
			return -1;
		}
		conf->no_live_output = !strcmp(v, "off");
		break;
	case 'r': st->run_path = v; break;
	case 'b': st->backend = v; break;
	default: return -1;
	}
	return 0;
}

static const struct option *opt_by_name(const char *name)
{
	for (const struct option *o = opts; o->name; o++)
		if (!strcmp(o->name, name))
			return o;
	return NULL;
}

/* --config FILE: a YAML mapping of option names to values. */
static int load_config(struct opts_state *st, const char *path, yaml_document_t *doc)
{
	yaml_parser_t parser;
	yaml_node_t *root;
	FILE *f = fopen(path, "rb");

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
		fclose(f);
		return -1;
	}
	yaml_parser_delete(&parser);
	fclose(f);
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
		const struct option *o;

		if (k->type != YAML_SCALAR_NODE || v->type != YAML_SCALAR_NODE ||
		    !(o = opt_by_name((const char *)k->data.scalar.value)) || o->val == 'C') {
			fprintf(
			    stderr,
			    "airlock-worker: %s:%zu: unknown option; see airlock-worker --help\n",
			    path, k->start_mark.line + 1);
			return -1;
		}
		if (apply(st, o->val, o->name, (const char *)v->data.scalar.value))
			return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct al_err err = {0};
	struct al_worker_conf conf = {
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
	struct opts_state st = {.conf = &conf, .backend = "process"};
	yaml_document_t doc;
	bool have_doc = false;
	char idbuf[64];
	int c, rc;

	/* 1. the config file, 2. AIRLOCK_* variables, 3. flags */
	for (int i = 1; i + 1 < argc; i++) {
		if (!strcmp(argv[i], "--config")) {
			if (load_config(&st, argv[i + 1], &doc))
				return 2;
			have_doc = true;
		}
	}
	for (const struct option *o = opts; o->name; o++) {
		const char *v;

		if (o->val == 'C' || o->val == 'V' || o->val == 'z' ||
		    !(v = al_opt_env(o->name, NULL)))
			continue;
		if (apply(&st, o->val, o->name, v))
			return 2;
	}
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'C')
			continue;
		if (c == 'V') {
			printf("airlock-worker protocol %d\n", AL_PROTO_VERSION);
			return 0;
		}
		if (c == 'z') {
			usage(stdout);
			return 0;
		}
		if (c == '?') { /* getopt said what was wrong */
			fprintf(stderr, "airlock-worker: see --help\n");
			return 2;
		}
		for (const struct option *o = opts; o->name; o++)
			if (o->val == c && apply(&st, c, o->name, optarg))
				return 2;
	}
	if (optind < argc) {
		fprintf(stderr, "airlock-worker: unexpected argument \"%s\"\n", argv[optind]);
		return 2;
	}
	if (!conf.backend.worker_id) {
		/* Stable across restarts, so a restarted worker sweeps what its
		 * crashed predecessor left; give each worker on a host its own. */
		char host[48] = "host";

		gethostname(host, sizeof(host) - 1);
		snprintf(idbuf, sizeof(idbuf), "%.40s", host);
		conf.backend.worker_id = idbuf;
	}
	signal(SIGPIPE, SIG_IGN);
	if (st.run_path) {
		const struct al_backend_ops *ops = al_backend_find(st.backend);

		if (!ops) {
			fprintf(stderr, "airlock-worker: unknown backend \"%s\"\n", st.backend);
			return 2;
		}
		if (al_hostlock_take(AL_HOSTLOCK_DIR, conf.backend.worker_id, true,
				     conf.backend.state_dir, &err) < 0) {
			fprintf(stderr, "airlock-worker: %s\n", err.msg);
			return 2;
		}
		rc = run_one(st.run_path, ops, &conf.backend, conf.policy_path);
	} else {
		if (al_hostlock_take(AL_HOSTLOCK_DIR, conf.backend.worker_id, false,
				     conf.backend.state_dir, &err) < 0) {
			fprintf(stderr, "airlock-worker: %s\n", err.msg);
			return 2;
		}
		al_hostlock_sweep_dead(AL_HOSTLOCK_DIR, conf.backend.worker_id,
				       conf.backend.state_dir);
		if ((rc = al_worker_run(&conf, &err)) == 2)
			fprintf(stderr, "airlock-worker: %s\n", err.msg);
	}
	free(st.tiers_copy);
	if (have_doc)
		yaml_document_delete(&doc);
	return rc;
}
