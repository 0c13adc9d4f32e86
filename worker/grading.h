/* grading.h - a grading job on a backend whose sandboxes run one command
 * (AL_CAP_GRADE): its build tree (a tmpfs of the build's disk limit holding
 * the job's files, owned by the slot's job uid), then its steps one by one
 * (the build, then each test) for the runner to run as sandboxes of their
 * own, a verdict per step, and the job's result. The tree is removed with
 * the grading; a crashed worker's trees go with its sweep. */
#ifndef AL_WORKER_GRADING_H
#define AL_WORKER_GRADING_H

#include "../backends/backend.h"

struct wk_grading;

/* Make the build tree for spec's grading job under
 * <state_dir>/<worker_id>/grade. NULL with err when it cannot be made. */
struct wk_grading *wk_grading_new(const struct al_backend_ops *ops,
				  const struct al_backend_conf *conf,
				  const struct al_run_spec *spec, struct al_err *err);

/* The next step to run (owned by g, valid until the next call), or NULL
 * when the job is over (every test ran, or stop_on_failure, or the build
 * failed). */
const struct al_run_spec *wk_grading_next(struct wk_grading *g);

/* The step just run ended with run (a status a test can have: ok,
 * nonzero_exit, a limit); its verdict is kept, and what the job's result
 * needs of run is taken from it. 0 or -1 (out of memory). */
int wk_grading_step_done(struct wk_grading *g, struct al_result *run);

/* The job's result into res (see al_grade_result). 0 or -1. */
int wk_grading_result(struct wk_grading *g, struct al_result *res);

/* Remove the tree and free g. NULL is fine. */
void wk_grading_free(struct wk_grading *g);

/* Remove the build trees a crashed run of this worker id left. */
void wk_grading_sweep(const struct al_backend_conf *conf);

#endif
