/* jobopts.c - run's and submit's options, from one table: each option's
 * name, its value's name and help (the usage text is made from it), and
 * what it sets: a number of the job through common/opt.h's kinds, as the
 * daemons' options are, or a setter of its own. */
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/opt.h"
#include "cli.h"

/* What a setter fills: the job, and what run does with it. */
struct jobargs {
	struct al_job *job;
	struct cli_jobargs *a;
	const char *code, *runtime;
};

struct jobopt {
	struct al_opt o;   /* name; a number's kind, place in the job and range */
	char letter;	   /* its short form (-c), or 0 */
	const char *value; /* its value's name in the usage text; NULL: a flag */
	const char *help;
	/* the others: 0, or an exit code (said why); v NULL for a flag */
	int (*set)(struct jobargs *x, const char *v);
};

static int set_str(char **field, const char *v)
{
	free(*field);
	*field = cli_strdup(v);
	return 0;
}

static int set_tier(struct jobargs *x, const char *v)
{
	return set_str(&x->job->tier, v);
}

static int set_tenant(struct jobargs *x, const char *v)
{
	return set_str(&x->job->tenant, v);
}

static int set_runtime(struct jobargs *x, const char *v)
{
	x->runtime = v;
	return 0;
}

static int set_code(struct jobargs *x, const char *v)
{
	x->code = v;
	return 0;
}

static int set_id(struct jobargs *x, const char *v)
{
	return set_str(&x->job->id, v);
}

static int set_json(struct jobargs *x, const char *v)
{
	(void)v;
	x->a->json = true;
	return 0;
}

static int set_no_stream(struct jobargs *x, const char *v)
{
	(void)v;
	x->a->no_stream = true;
	return 0;
}

static int set_key(struct jobargs *x, const char *v)
{
	return set_str(&x->job->idempotency_key, v);
}

static int set_callback(struct jobargs *x, const char *v)
{
	return set_str(&x->job->callback_url, v);
}

static int set_image(struct jobargs *x, const char *v)
{
	return set_str(&x->job->image, v);
}

/* -f LOCAL[:REMOTE]: a local file as the job's input file */
static int add_file(struct jobargs *x, const char *v)
{
	struct al_job *job = x->job;
	const char *colon = strchr(v, ':');
	char *local = colon ? cli_strndup(v, (size_t)(colon - v)) : cli_strdup(v);
	const char *remote = colon ? colon + 1 : strrchr(v, '/') ? strrchr(v, '/') + 1 : v;
	struct al_file *f = cli_need(realloc(job->files, (job->nfiles + 1) * sizeof(*f)));
	int rc;

	job->files = f;
	f += job->nfiles;
	memset(f, 0, sizeof(*f));
	rc = cli_read_path(local, &f->data, AL_FILES_TOTAL_MAX);
	free(local);
	if (rc)
		return rc;
	f->path = cli_strdup(remote);
	f->mode = 0644;
	job->nfiles++;
	return 0;
}

static void push_str(char ***v, size_t *n, const char *s)
{
	*v = cli_need(realloc(*v, (*n + 1) * sizeof(**v)));
	(*v)[(*n)++] = cli_strdup(s);
}

static int add_collect(struct jobargs *x, const char *v)
{
	push_str(&x->job->collect, &x->job->ncollect, v);
	return 0;
}

static int add_egress_allow(struct jobargs *x, const char *v)
{
	push_str(&x->job->egress_allow, &x->job->negress_allow, v);
	return 0;
}

static int set_stdin(struct jobargs *x, const char *v)
{
	free(x->job->stdin_data.data);
	x->job->stdin_data = (struct al_bytes){0};
	return cli_read_path(v, &x->job->stdin_data, AL_STDIN_MAX);
}

static int push_kv(struct al_kv **kv, size_t *n, const char *arg, const char *what)
{
	const char *eq = strchr(arg, '=');
	struct al_kv *p;

	if (!eq || eq == arg) {
		fprintf(stderr, "airlock: %s: expected NAME=VALUE, got \"%s\"\n", what, arg);
		return EXIT_USAGE;
	}
	p = cli_need(realloc(*kv, (*n + 1) * sizeof(*p)));
	*kv = p;
	p[*n].key = cli_strndup(arg, (size_t)(eq - arg));
	p[*n].value = cli_strdup(eq + 1);
	(*n)++;
	return 0;
}

static int add_env(struct jobargs *x, const char *v)
{
	return push_kv(&x->job->env, &x->job->nenv, v, "--env");
}

static int add_label(struct jobargs *x, const char *v)
{
	return push_kv(&x->job->labels, &x->job->nlabels, v, "--label");
}

static int set_network(struct jobargs *x, const char *v)
{
	if (strcmp(v, "none") && strcmp(v, "egress")) {
		fprintf(stderr, "airlock: --network: expected none or egress, got \"%s\"\n", v);
		return EXIT_USAGE;
	}
	x->job->network = v[0] == 'e' ? AL_NET_EGRESS : AL_NET_NONE;
	return 0;
}

/* A new input at the end of job's (--input, --git): url and path set. */
static struct al_input *add_input(struct al_job *job, const char *url, const char *path)
{
	struct al_input *in = cli_need(realloc(job->inputs, (job->ninputs + 1) * sizeof(*in)));

	job->inputs = in;
	in += job->ninputs++;
	memset(in, 0, sizeof(*in));
	in->url = cli_strdup(url);
	in->path = cli_strdup(path);
	return in;
}

/* --input URL,SHA256,PATH[,tar|zip|none] */
static int add_url_input(struct jobargs *x, const char *v)
{
	struct al_input *in;
	char *s = cli_strdup(v), *part[3] = {NULL, NULL, NULL}; /* unpack, path, sha */
	char *last = strrchr(s, ',');

	/* from the right: [,unpack], path, sha256; the rest is the URL */
	if (last &&
	    (!strcmp(last + 1, "tar") || !strcmp(last + 1, "zip") || !strcmp(last + 1, "none"))) {
		part[0] = last + 1;
		*last = '\0';
	}
	for (int k = 1; k < 3 && (last = strrchr(s, ',')); k++) {
		part[k] = last + 1;
		*last = '\0';
	}
	if (!part[1] || !part[2]) {
		fprintf(stderr,
			"airlock: --input: expected URL,SHA256,PATH[,tar|zip|none], got \"%s\"\n",
			v);
		free(s);
		return EXIT_USAGE;
	}
	in = add_input(x->job, s, part[1]);
	snprintf(in->sha256, sizeof(in->sha256), "%s", part[2]);
	in->unpack = !part[0] || !strcmp(part[0], "none") ? AL_UNPACK_NONE
		     : !strcmp(part[0], "tar")		  ? AL_UNPACK_TAR
							  : AL_UNPACK_ZIP;
	free(s);
	return 0;
}

/* --git URL,REF,PATH */
static int add_git_input(struct jobargs *x, const char *v)
{
	struct al_input *in;
	char *s = cli_strdup(v), *path = strrchr(s, ','), *ref;

	if (path)
		*path++ = '\0';
	if (!path || !(ref = strrchr(s, ','))) {
		fprintf(stderr, "airlock: --git: expected URL,REF,PATH, got \"%s\"\n", v);
		free(s);
		return EXIT_USAGE;
	}
	*ref++ = '\0';
	in = add_input(x->job, s, path);
	in->ref = cli_strdup(ref);
	in->unpack = AL_UNPACK_GIT;
	free(s);
	return 0;
}

#define NUM(name, kind, field, max)                                                                \
	{                                                                                          \
		name, kind, offsetof(struct al_job, field), 0, max, 0, NULL, NULL, NULL            \
	}
#define OTHER(name)                                                                                \
	{                                                                                          \
		name, AL_OPT_STR, 0, 0, 0, 0, NULL, NULL, NULL                                     \
	}

/* The table: usage lists the options in this order. */
static const struct jobopt opts[] = {
    {OTHER("tier"), 0, "T", "the tier (default trusted)", set_tier},
    {OTHER("tenant"), 0, "T", "the tenant (default default)", set_tenant},
    {OTHER("runtime"), 0, "python|sh", "the code's language (default python)", set_runtime},
    {OTHER("code"), 'c', "CODE", "the code itself (else FILE, or -- ARGV...)", set_code},
    {OTHER("image"), 0, "NAME", "a catalogue image the tier offers (default: the tier's)",
     set_image},
    {OTHER("network"), 0, "none|egress", "network egress through the tier's rules", set_network},
    {OTHER("egress-allow"), 0, "HOST:PORT", "repeatable: narrows the tier's rules",
     add_egress_allow},
    {OTHER("file"), 'f', "LOCAL[:REMOTE]", "an input file (repeatable)", add_file},
    {OTHER("collect"), 0, "PATH", "a file (or glob) to bring back (repeatable)", add_collect},
    {OTHER("input"), 0, "URL,SHA256,PATH[,tar|zip|none]",
     "repeatable: fetched by the worker through the tier's egress rules, verified, unpacked "
     "at PATH (\".\" = the top)",
     add_url_input},
    {OTHER("git"), 0, "URL,REF,PATH",
     "repeatable: a repository's branch, tag, ref or commit id, checked out by the worker at "
     "PATH with a shallow .git",
     add_git_input},
    {NUM("timeout", AL_OPT_U64, limits.wall_ms, UINT64_MAX), 0, "MS", "its wall-clock time", NULL},
    {NUM("cpu", AL_OPT_U64, limits.cpu_ms, UINT64_MAX), 0, "MS", "its CPU time", NULL},
    {NUM("memory", AL_OPT_U64, limits.memory_bytes, UINT64_MAX), 0, "BYTES", "its memory", NULL},
    {NUM("pids", AL_OPT_U64, limits.pids, UINT64_MAX), 0, "N", "its processes at once", NULL},
    {NUM("disk", AL_OPT_U64, limits.disk_bytes, UINT64_MAX), 0, "BYTES", "its /work", NULL},
    {OTHER("stdin"), 0, "FILE", "its standard input", set_stdin},
    {OTHER("env"), 0, "NAME=VALUE", "an environment variable (repeatable)", add_env},
    {NUM("priority", AL_OPT_UINT, priority, AL_PRIORITY_MAX), 0, "0-9",
     "its priority within the tenant's (default 5)", NULL},
    {NUM("deadline-ms", AL_OPT_U64, deadline_ms, UINT64_MAX), 0, "UNIX_MS",
     "expired unless started by then", NULL},
    {OTHER("idempotency-key"), 0, "K", "a second submit of K gets the first job's id", set_key},
    {OTHER("callback"), 0, "URL", "a webhook for its result", set_callback},
    {OTHER("label"), 0, "K=V", "a label (repeatable)", add_label},
    {OTHER("id"), 0, "ID", "its id (else one is made)", set_id},
    {OTHER("json"), 0, NULL, "the result as JSON", set_json},
    {OTHER("no-stream"), 0, NULL, "run: the output at the end, not as it comes", set_no_stream},
};
#define NOPTS (sizeof(opts) / sizeof(opts[0]))

/* text from column 32, wrapped at 80 (at spaces) */
static void wrapped(FILE *f, const char *text)
{
	const int width = 80 - 32;

	while (*text) {
		int n = (int)strlen(text);

		if (n > width) {
			n = width;
			while (n > 0 && text[n] != ' ')
				n--;
			if (!n)
				n = width;
		}
		fprintf(f, "%.*s\n", n, text);
		text += n;
		while (*text == ' ')
			text++;
		if (*text)
			fprintf(f, "%32s", "");
	}
}

void cli_jobopts_usage(FILE *f)
{
	for (size_t i = 0; i < NOPTS; i++) {
		const struct jobopt *o = &opts[i];
		char head[80];

		if (o->letter)
			snprintf(head, sizeof(head), "-%c, --%s%s%s", o->letter, o->o.name,
				 o->value ? " " : "", o->value ? o->value : "");
		else
			snprintf(head, sizeof(head), "--%s%s%s", o->o.name, o->value ? " " : "",
				 o->value ? o->value : "");
		if (strlen(head) > 28)
			fprintf(f, "  %s\n%32s", head, "");
		else
			fprintf(f, "  %-28s  ", head);
		wrapped(f, o->help);
	}
}

int cli_build_job(int argc, char **argv, struct al_job *job, struct cli_jobargs *a)
{
	struct option longs[NOPTS + 1];
	char shorts[2 + 2 * NOPTS + 1] = "+";
	struct jobargs x = {.job = job, .a = a, .runtime = "python"};
	size_t ns = 1;
	int c, idx, rc;

	memset(job, 0, sizeof(*job));
	*a = (struct cli_jobargs){0};
	job->version = AL_PROTO_VERSION;
	job->tier = cli_strdup("trusted");
	job->tenant = cli_strdup("default");
	job->priority = AL_PRIORITY_DEFAULT;
	for (size_t i = 0; i < NOPTS; i++) {
		longs[i] =
		    (struct option){opts[i].o.name, opts[i].value ? required_argument : no_argument,
				    NULL, (int)(256 + i)};
		if (opts[i].letter) {
			shorts[ns++] = opts[i].letter;
			shorts[ns++] = ':';
		}
	}
	longs[NOPTS] = (struct option){0};
	shorts[ns] = '\0';
	optind = 1;
	while ((c = getopt_long(argc, argv, shorts, longs, &idx)) != -1) {
		const struct jobopt *o = NULL;
		struct al_err err = {0};

		for (size_t i = 0; i < NOPTS && !o; i++)
			if (c == (int)(256 + i) || (c < 256 && c == opts[i].letter))
				o = &opts[i];
		if (!o) {
			fprintf(stderr, "airlock: %s: see `airlock help` for run's options\n",
				argv[optind - 1]);
			return EXIT_USAGE;
		}
		if (o->set) {
			if ((rc = o->set(&x, optarg)))
				return rc;
		} else if (al_opt_set(&o->o, job, optarg, &err)) {
			fprintf(stderr, "airlock: %s\n", err.msg);
			return EXIT_USAGE;
		}
	}
	if (x.code) {
		job->code.data = cli_strdup(x.code);
		job->code.len = strlen(x.code);
	} else if (optind < argc && strcmp(argv[optind - 1], "--") != 0) {
		if ((rc = cli_read_path(argv[optind++], &job->code, AL_CODE_MAX)))
			return rc;
	}
	if (job->code.data) {
		if (!strcmp(x.runtime, "python"))
			job->runtime = AL_RUNTIME_PYTHON;
		else if (!strcmp(x.runtime, "sh"))
			job->runtime = AL_RUNTIME_SH;
		else {
			fprintf(stderr, "airlock: --runtime: expected python or sh, got \"%s\"\n",
				x.runtime);
			return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		job->argc = (size_t)(argc - optind);
		job->argv = cli_need(calloc(job->argc + 1, sizeof(char *)));
		for (size_t i = 0; i < job->argc; i++)
			job->argv[i] = cli_strdup(argv[optind + (int)i]);
	}
	if (!job->code.data && !job->argc) {
		fprintf(stderr, "airlock: nothing to run: give -c CODE, a FILE, or -- ARGV...\n");
		return EXIT_USAGE;
	}
	return 0;
}
