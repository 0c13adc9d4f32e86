/* admit.c - admission: a job against its tier and tenant in the policy,
 * its defaults filled (see policy.h). */
#include "policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../proto/caps.h"
#include "../proto/grade.h"
#include "callback.h"
#include "egress.h"

#include <arpa/inet.h>

int al_policy_admit_image(const struct al_tier_policy *t, struct al_job *job, struct al_err *err)
{
	char names[AL_IMAGES_MAX * (AL_ID_MAX + 2) + 1] = "";

	if (!job->image) {
		if (t->image && !(job->image = strdup(t->image)))
			return al_err_set(err, AL_ENOMEM, "image: out of memory");
		return AL_OK;
	}
	if (al_tier_image_index(t, job->image) >= 0)
		return AL_OK;
	if (!t->nimages)
		return al_err_set(err, AL_EINVAL,
				  "image: tier %s offers no catalogue image; leave image out",
				  t->name);
	for (size_t i = 0; i < t->nimages; i++)
		snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s",
			 i ? ", " : "", t->images[i]);
	return al_err_set(err, AL_EINVAL, "image: \"%s\" is not allowed on tier %s (allowed: %s)",
			  job->image, t->name, names);
}

/* A grading job's steps: each limit within the tier's maxima (the job's
 * own limits, the steps' defaults, were checked), each test's files within
 * its disk limit; a backend that runs them; no network. */
/* Inputs by URL: the worker fetches them through the tier's egress rules
 * (the job's narrower ones when it gives any), so the tier needs egress
 * and each URL's host and port must be one they let out. */
static int admit_inputs(const struct al_tier_policy *t, const struct al_job *job,
			struct al_err *err)
{
	struct al_egress_rule narrowed[AL_EGRESS_RULES_MAX];
	const struct al_egress_rule *rules = t->egress_rules;
	size_t n = t->negress_rules;

	if (!t->egress)
		return al_err_set(err, AL_EINVAL,
				  "inputs: tier %s has no egress rules, and inputs by URL come "
				  "through them (give the bytes as files instead)",
				  t->name);
	if (!(al_caps_of(t->backend) & AL_CAP_FILES))
		return al_err_set(err, AL_EINVAL,
				  "inputs: tier %s runs on the %s backend, which takes no input "
				  "files",
				  t->name, t->backend);
	if (job->negress_allow) {
		n = 0;
		for (size_t i = 0; i < job->negress_allow && n < AL_EGRESS_RULES_MAX; i++)
			if (!al_egress_rule_parse(job->egress_allow[i], &narrowed[n], NULL))
				n++;
		rules = narrowed;
	}
	for (size_t i = 0; i < job->ninputs; i++) {
		char host[256], what[48];
		unsigned port;
		int https, rc;
		struct sockaddr_storage ss = {0};
		struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
		struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;

		snprintf(what, sizeof(what), "inputs[%zu].url", i);
		if ((rc = al_input_url_parse(what, job->inputs[i].url, host, sizeof(host), &port,
					     &https, err)))
			return rc;
		if (inet_pton(AF_INET, host, &v4->sin_addr) == 1)
			ss.ss_family = AF_INET;
		else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1)
			ss.ss_family = AF_INET6;
		if (ss.ss_family ? al_egress_match_range(rules, n, (struct sockaddr *)&ss, port) < 0
				 : al_egress_match_name(rules, n, host, port) < 0)
			return al_err_set(
			    err, AL_EINVAL, "%s: %s:%u is not in tier %s's egress rules%s", what,
			    host, port, t->name,
			    job->negress_allow ? " (as the job's egress_allow narrows them)" : "");
	}
	return AL_OK;
}

static char **dup_words(char *const *w, size_t n)
{
	char **out = calloc(n + 1, sizeof(char *));

	for (size_t i = 0; out && i < n; i++)
		if (!(out[i] = strdup(w[i]))) {
			while (i--)
				free(out[i]);
			free(out);
			return NULL;
		}
	return out;
}

/* A grading job's language: its build (unless the job has one), its run
 * command (unless the job has one) and its image (unless the job names
 * one, when the tier offers it). */
static int admit_language(const struct al_policy *pol, const struct al_tier_policy *t,
			  struct al_job *job, struct al_err *err)
{
	const struct al_language *l = al_policy_language(pol, job->language);
	char names[512];

	if (!l) {
		al_policy_language_names(pol, names, sizeof(names));
		return al_err_set(err, AL_EINVAL, "language: unknown \"%s\" (known: %s)",
				  job->language, names);
	}
	if (!job->build && l->build) {
		struct al_limits *bl;

		if (!(job->build = calloc(1, sizeof(*job->build))) ||
		    !(job->build->argv = dup_words(l->build, l->nbuild)))
			return al_err_set(err, AL_ENOMEM, "language: out of memory");
		job->build->argc = l->nbuild;
		/* the language's build limits, not the tests': each at most the
		 * tier's maximum */
		bl = &job->build->limits;
		bl->wall_ms = l->build_wall_ms < t->max.wall_ms ? l->build_wall_ms : t->max.wall_ms;
		bl->cpu_ms = l->build_wall_ms < t->max.cpu_ms ? l->build_wall_ms : t->max.cpu_ms;
		bl->memory_bytes = l->build_memory_bytes < t->max.memory_bytes
				       ? l->build_memory_bytes
				       : t->max.memory_bytes;
	}
	if (job->runtime == AL_RUNTIME_ARGV && !job->argc) {
		if (!(job->argv = dup_words(l->run, l->nrun)))
			return al_err_set(err, AL_ENOMEM, "language: out of memory");
		job->argc = l->nrun;
	}
	if (!job->image && l->image && al_tier_image_index(t, l->image) >= 0 &&
	    !(job->image = strdup(l->image)))
		return al_err_set(err, AL_ENOMEM, "language: out of memory");
	return AL_OK;
}

static int admit_grading(const struct al_tier_policy *t, struct al_job *job, bool cpu_given,
			 struct al_err *err)
{
	if (!(al_caps_of(t->backend) & (AL_CAP_GRADE | AL_CAP_GRADE_INSIDE)))
		return al_err_set(err, AL_EINVAL,
				  "tests: tier %s runs on the %s backend, which does not run "
				  "grading jobs",
				  t->name, t->backend);
	if (job->network != AL_NET_NONE)
		return al_err_set(err, AL_EINVAL, "network: a grading job runs without network");
	for (long i = job->build ? -1 : 0; i < (long)job->ntests; i++) {
		struct al_limits *own = i < 0 ? &job->build->limits : &job->tests[i].limits;
		struct al_limits l;
		uint64_t files = 0;
		char what[32];

		/* as for the job: a step's CPU time follows its own wall-clock
		 * limit unless the job or the tier's defaults name one */
		if (own->wall_ms && !own->cpu_ms && !cpu_given && !t->defaults.cpu_ms)
			own->cpu_ms = own->wall_ms < t->max.cpu_ms ? own->wall_ms : t->max.cpu_ms;
		al_step_limits(own, &job->limits, &l);
		if (i < 0)
			snprintf(what, sizeof(what), "build");
		else
			snprintf(what, sizeof(what), "tests[%ld]", i);
#define STEP_LIMIT(f)                                                                              \
	if (l.f > t->max.f)                                                                        \
		return al_err_set(err, AL_EINVAL,                                                  \
				  "%s.limits." #f ": %llu is above tier %s's "                     \
				  "maximum of %llu",                                               \
				  what, (unsigned long long)l.f, t->name,                          \
				  (unsigned long long)t->max.f);
		STEP_LIMIT(wall_ms)
		STEP_LIMIT(cpu_ms)
		STEP_LIMIT(memory_bytes)
		STEP_LIMIT(pids)
		STEP_LIMIT(stdout_bytes)
		STEP_LIMIT(stderr_bytes)
		STEP_LIMIT(disk_bytes)
#undef STEP_LIMIT
		/* a test's files go in its own tmpfs; the job's in the build
		 * tree, of the build's disk limit */
		for (size_t k = 0; i >= 0 && k < job->tests[i].nfiles; k++)
			files += job->tests[i].files[k].data.len;
		for (size_t k = 0; i < 0 && k < job->nfiles; k++)
			files += job->files[k].data.len;
		if (files > l.disk_bytes)
			return al_err_set(err, AL_EINVAL,
					  "%s.files: %llu bytes do not fit its disk limit of %llu "
					  "bytes",
					  what, (unsigned long long)files,
					  (unsigned long long)l.disk_bytes);
	}
	return AL_OK;
}

int al_policy_admit(const struct al_policy *pol, struct al_job *job, uint64_t now_ms,
		    struct al_err *err)
{
	const struct al_tier_policy *t = al_policy_tier(pol, job->tier);
	const struct al_tenant_policy *ten = al_policy_tenant(pol, job->tenant);
	struct al_limits *l = &job->limits;
	uint64_t files = 0;
	bool cpu_given = l->cpu_ms != 0;

	if (!t)
		return al_err_set(err, AL_EINVAL, "tier: unknown tier \"%s\"", job->tier);
	/* a session's interpreter keeps what its calls made: its tier may give
	 * sessions more memory than its one-shot jobs by default */
	if (job->session && !l->memory_bytes && t->sessions.memory_bytes)
		l->memory_bytes = t->sessions.memory_bytes < t->max.memory_bytes
				      ? t->sessions.memory_bytes
				      : t->max.memory_bytes;
#define LIMIT(f)                                                                                   \
	do {                                                                                       \
		if (l->f > t->max.f)                                                               \
			return al_err_set(                                                         \
			    err, AL_EINVAL,                                                        \
			    "limits." #f ": %llu is above tier %s's maximum of %llu",              \
			    (unsigned long long)l->f, t->name, (unsigned long long)t->max.f);      \
		if (!l->f)                                                                         \
			l->f = t->defaults.f;                                                      \
	} while (0)
	LIMIT(wall_ms);
	LIMIT(memory_bytes);
	LIMIT(pids);
	LIMIT(stdout_bytes);
	LIMIT(stderr_bytes);
	LIMIT(disk_bytes);
	if (!t->defaults.cpu_ms && !l->cpu_ms)
		l->cpu_ms = l->wall_ms < t->max.cpu_ms ? l->wall_ms : t->max.cpu_ms;
	LIMIT(cpu_ms);
#undef LIMIT
	for (size_t i = 0; i < job->nfiles; i++)
		files += job->files[i].data.len;
	if (files > l->disk_bytes)
		return al_err_set(
		    err, AL_EINVAL,
		    "files: %llu bytes of input files do not fit the disk limit of %llu bytes",
		    (unsigned long long)files, (unsigned long long)l->disk_bytes);
	if (job->language) {
		int rc = admit_language(pol, t, job, err);

		if (rc)
			return rc;
	}
	if (job->ntests) {
		int rc = admit_grading(t, job, cpu_given, err);

		if (rc)
			return rc;
	}
	if (job->session) {
		if (job->runtime != AL_RUNTIME_ARGV || job->code.data)
			return al_err_set(
			    err, AL_EINVAL,
			    "session: a session's job has no command (runtime, code): "
			    "its calls come later");
		if (!t->sessions.on)
			return al_err_set(err, AL_EINVAL,
					  "session: tier %s does not open sessions (its policy has "
					  "no sessions: {...})",
					  t->name);
		if (!(al_caps_of(t->backend) & AL_CAP_SESSION))
			return al_err_set(err, AL_EINVAL,
					  "session: tier %s runs on the %s backend, which does not "
					  "keep sessions",
					  t->name, t->backend);
		if (job->callback_url)
			return al_err_set(err, AL_EINVAL, "callback_url: not for a session");
		job->max_attempts = 1; /* a session's state cannot move: never again */
	}
	if (job->network == AL_NET_EGRESS && !t->egress)
		return al_err_set(err, AL_EINVAL,
				  "network: tier %s does not allow egress (its policy has no "
				  "egress rules)",
				  t->name);
	for (size_t i = 0; i < job->negress_allow; i++) {
		struct al_egress_rule r;
		bool within = false;
		int rc = al_egress_rule_parse(job->egress_allow[i], &r, err);

		if (rc)
			return al_err_wrap(err, "egress_allow[%zu]", i);
		for (size_t k = 0; k < t->negress_rules && !within; k++)
			within = al_egress_rule_within(&r, &t->egress_rules[k]);
		if (!within)
			return al_err_set(
			    err, AL_EINVAL,
			    "egress_allow[%zu]: \"%.80s\" is not within tier %s's egress "
			    "rules: a job may narrow them, never widen",
			    i, job->egress_allow[i], t->name);
	}
	if (job->ninputs) {
		int rc = admit_inputs(t, job, err);

		if (rc)
			return rc;
	}
	if ((job->nfiles || job->ncollect) && !(al_caps_of(t->backend) & AL_CAP_FILES))
		return al_err_set(err, AL_EINVAL,
				  "files: tier %s runs on the %s backend, which takes no input or "
				  "collected files",
				  t->name, t->backend);
	if (job->callback_url) {
		int rc = al_callback_url_ok(t->callback_hosts, t->ncallback_hosts,
					    job->callback_url, t->name, err);

		if (rc)
			return rc;
	}
	if (job->deadline_ms && job->deadline_ms <= now_ms)
		return al_err_set(err, AL_EINVAL, "deadline_ms: %llu is already past (now %llu)",
				  (unsigned long long)job->deadline_ms, (unsigned long long)now_ms);
	if (job->priority > ten->max_priority)
		return al_err_set(err, AL_EINVAL, "priority: %u is above tenant %s's maximum of %u",
				  job->priority, job->tenant, ten->max_priority);
	if (!job->max_attempts || job->max_attempts > t->max_attempts)
		job->max_attempts = t->max_attempts;
	return al_policy_admit_image(t, job, err);
}
