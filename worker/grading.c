/* grading.c - a grading job, step by step (grading.h). */
#include "grading.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../backends/judge.h"
#include "../backends/jobfs.h"

struct wk_grading {
	struct al_run_spec spec; /* the whole job's (a copy: the caller's may not outlive
				  * this call; what it points to lives as long as the job) */
	struct al_jobfs tree;
	bool tree_made;
	long step;   /* the step now running: -1 the build, 0.. the tests */
	bool failed; /* a test failed (stop_on_failure) or the build did */
	struct al_job job;
	struct al_run_spec run;
	char *argv[AL_ARGV_MAX];
	struct al_test_result build;
	bool have_build;
	struct al_result build_run; /* the build's own result: its output, for a compile_error */
	struct al_test_result *tests;
	size_t ndone;
	/* the job's checker: to run next on the test just done (check_next),
	 * or running (checking), with that test's whole output */
	bool check_next, checking;
	struct al_bytes actual;
	struct al_file check_files[3];
};

static int grade_root(const struct al_backend_conf *conf, char *out, size_t cap)
{
	int n = snprintf(out, cap, "%s/%s/grade", conf->state_dir, conf->worker_id);

	return n < 0 || (size_t)n >= cap ? -1 : 0;
}

struct wk_grading *wk_grading_new(const struct al_backend_ops *ops,
				  const struct al_backend_conf *conf,
				  const struct al_run_spec *spec, struct al_err *err)
{
	const struct al_job *job = spec->job;
	struct wk_grading *g = calloc(1, sizeof(*g));
	struct al_limits lim;
	char root[PATH_MAX], name[AL_ID_MAX + 16];
	uid_t job_uid = 0, dir_uid = 0;
	int rc;

	if (!g) {
		al_err_set(err, AL_ENOMEM, "grading: out of memory");
		return NULL;
	}
	g->spec = *spec;
	g->step = job->build ? -2 : -1; /* wk_grading_next moves to the first */
	g->tree.out_fd = g->tree.err_fd = g->tree.mnt_fd = -1;
	if (!(g->tests = calloc(job->ntests, sizeof(*g->tests)))) {
		al_err_set(err, AL_ENOMEM, "grading: out of memory");
		goto fail_grading;
	}
	if (!ops->slot_ids || grade_root(conf, root, sizeof(root))) {
		al_err_set(err, AL_ESANDBOX, "grading: backend %s cannot share a build tree",
			   ops->name);
		goto fail_grading;
	}
	ops->slot_ids(conf, spec->slot, &job_uid, &dir_uid);
	/* the tree has the build's disk limit (or the job's, without a build) */
	al_step_limits(job->build ? &job->build->limits : &spec->limits, &spec->limits, &lim);
	snprintf(name, sizeof(name), "%u-%s", spec->slot, job->id);
	if (al_mkdir_p(root, 0711)) {
		al_err_sys(err, "grading: mkdir %s", root);
		goto fail_grading;
	}
	if ((rc = al_jobfs_create(&g->tree, root, name, job, lim.disk_bytes, job_uid, job_uid,
				  false, err))) {
		al_err_wrap(err, "grading: the build tree");
		goto fail_grading;
	}
	g->tree_made = true;
	/* the tree's own stdout/stderr are never used */
	close(g->tree.out_fd);
	close(g->tree.err_fd);
	g->tree.out_fd = g->tree.err_fd = -1;
	/* a backend whose runtime reaches it as another uid (a user namespace's
	 * root) owns the directory above the tree, alone */
	if (dir_uid && (chown(g->tree.dir, dir_uid, dir_uid) || chmod(g->tree.dir, 0700))) {
		al_err_sys(err, "grading: chown %s", g->tree.dir);
		goto fail_grading;
	}
	return g;
fail_grading:
	wk_grading_free(g);
	return NULL;
}

const struct al_run_spec *wk_grading_next(struct wk_grading *g)
{
	const struct al_job *job = g->spec.job;
	struct al_limits lim;

	if (g->failed && (g->step < 0 || job->stop_on_failure)) {
		/* the build failed: no test runs; else the rest are skipped */
		for (; g->step >= 0 && g->ndone < job->ntests; g->ndone++)
			if (al_grade_skip(&job->tests[g->ndone], &g->tests[g->ndone]))
				break;
		g->step = (long)job->ntests;
		return NULL;
	}
	if (g->check_next) { /* the checker, on test g->step's output */
		g->check_next = false;
		g->checking = true;
		al_grade_checker_job(job, &g->spec.limits, g->step, &g->actual, g->argv,
				     g->check_files, &g->job, &lim);
	} else {
		if (++g->step >= (long)job->ntests)
			return NULL;
		al_grade_step_job(job, &g->spec.limits, g->step, g->argv, &g->job, &lim);
	}
	g->run = g->spec;
	g->run.job = &g->job;
	g->run.limits = lim;
	g->run.grade_tree = g->tree.home;
	g->run.grade_build = g->step < 0;
	return &g->run;
}

int wk_grading_step_done(struct wk_grading *g, struct al_result *run)
{
	const struct al_job *job = g->spec.job;

	if (g->step < 0) {
		if (al_grade_build(run, &g->build))
			return AL_ENOMEM;
		g->have_build = true;
		g->failed = g->build.verdict != AL_V_ACCEPTED;
		/* its output is the job's if it failed */
		g->build_run.out = run->out;
		g->build_run.err = run->err;
		g->build_run.out_truncated = run->out_truncated;
		g->build_run.err_truncated = run->err_truncated;
		g->build_run.has_exit_code = run->has_exit_code;
		g->build_run.exit_code = run->exit_code;
		g->build_run.signal = run->signal;
		run->out = run->err = (struct al_bytes){0};
		return 0;
	}
	if (g->checking) { /* the checker's word on the test before it */
		g->checking = false;
		free(g->actual.data);
		g->actual = (struct al_bytes){0};
		if (!g->ndone || al_grade_checked(&g->tests[g->ndone - 1], run))
			return AL_ENOMEM;
		g->failed |= al_verdict_failed(g->tests[g->ndone - 1].verdict);
		return 0;
	}
	if (g->step >= (long)job->ntests ||
	    al_grade_test(&job->tests[g->step], run, &g->tests[g->ndone]))
		return AL_ENOMEM;
	if (al_grade_wants_check(job, &g->tests[g->ndone])) {
		g->check_next = true; /* its verdict waits for the checker */
		g->actual = run->out;
		run->out = (struct al_bytes){0};
		g->ndone++;
		return 0;
	}
	g->failed |= al_verdict_failed(g->tests[g->ndone].verdict);
	g->ndone++;
	return 0;
}

int wk_grading_result(struct wk_grading *g, struct al_result *res)
{
	size_t n = g->ndone;

	g->ndone = 0; /* taken */
	return al_grade_result(res, g->have_build ? &g->build : NULL, &g->build_run, g->tests, n);
}

void wk_grading_free(struct wk_grading *g)
{
	if (!g)
		return;
	if (g->tree_made)
		al_jobfs_destroy(&g->tree);
	al_test_result_free(&g->build);
	free(g->build_run.out.data);
	free(g->build_run.err.data);
	free(g->actual.data);
	for (size_t i = 0; i < g->ndone; i++)
		al_test_result_free(&g->tests[i]);
	free(g->tests);
	free(g);
}

void wk_grading_sweep(const struct al_backend_conf *conf)
{
	char root[PATH_MAX];

	if (!grade_root(conf, root, sizeof(root))) {
		al_jobfs_sweep(root, NULL);
		rmdir(root);
	}
}
