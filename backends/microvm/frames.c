/* frames.c - the guest's result and live output, decoded and believed
 * only about the job's own outcome, within the job's caps. Called by
 * microvm.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/kvm.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../common/cleanup.h"
#include "../../common/log.h"
#include "../../common/clock.h"
#include "../../proto/keys.h"
#include "../backend.h"
#include "../cgroup.h"
#include "../judge.h"
#include "../jobfs.h"
#include "../jobspec.h"
#include "../netns.h"
#include "../newroot.h"
#include "../vmchan.h"
#include "egress_fwd.h"
#include "vmm.h"
#include "mvm.h"

/* What a guest may say of its interpreter (warm.c): "warm", or "cold (...)"
 * of at most 240 printable ASCII characters. */
static bool interpreter_word(const char *v)
{
	size_t n = strlen(v);

	if (!strcmp(v, "warm"))
		return true;
	if (n > 240 || strncmp(v, "cold (", 6) || v[n - 1] != ')')
		return false;
	for (size_t i = 0; i < n; i++)
		if (v[i] < 0x20 || v[i] > 0x7e)
			return false;
	return true;
}

/* Take the guest's result into res, believing it only about the job's own
 * outcome and only within the job's caps. */
int mvm_take_result(struct al_sandbox *sb, const char *p, size_t n, struct al_result *res,
		    struct al_err *err)
{
	struct al_result g = {0};
	struct al_err e = {0};
	int rc = AL_ESANDBOX;

	if (al_result_decode(p, n, &g, &e))
		return al_err_set(err, AL_ESANDBOX, "microvm: the guest sent an invalid result: %s",
				  e.msg);
	if (!g.id || strcmp(g.id, sb->spec.job->id)) {
		al_err_set(err, AL_ESANDBOX, "microvm: the guest answered for another job");
		goto out_guest;
	}
	switch (g.status) {
	case AL_ST_OK:
	case AL_ST_NONZERO_EXIT:
	case AL_ST_CPU_LIMIT:
	case AL_ST_MEMORY_LIMIT:
	case AL_ST_OUTPUT_LIMIT: break;
	case AL_ST_COMPILE_ERROR:
		if (sb->spec.job->build)
			break; /* a grading job's build failed */
		al_err_set(err, AL_ESANDBOX,
			   "microvm: compile_error from the guest for a job "
			   "without a build");
		goto out_guest;
	case AL_ST_REJECTED:
		rc = al_err_set(err, AL_EINVAL, "%s", g.error ? g.error : "refused by the guest");
		goto out_guest;
	case AL_ST_SANDBOX_ERROR:
		al_err_set(err, AL_ESANDBOX, "microvm guest: %s",
			   g.error ? g.error : "agent failure");
		goto out_guest;
	default:
		al_err_set(err, AL_ESANDBOX, "microvm: the guest reported status %s",
			   al_status_name(g.status));
		goto out_guest;
	}
	if (al_chan_check_result(&sb->spec, sb->conf->collect_max_bytes, &g, err))
		goto out_guest;
	res->status = g.status;
	res->has_exit_code = g.has_exit_code;
	res->exit_code = g.exit_code;
	res->signal = g.signal;
	res->out = g.out;
	res->out_truncated = g.out_truncated;
	res->err = g.err;
	res->err_truncated = g.err_truncated;
	res->files = g.files;
	res->nfiles = g.nfiles;
	res->cpu_ms = g.cpu_ms;
	res->peak_memory_bytes = g.peak_memory_bytes;
	res->max_rss_bytes = g.max_rss_bytes;
	if (g.error)
		al_result_set_error(res, "%s", g.error);
	/* of the guest's own facts only this one: "warm", or "cold (why)" in
	 * a line of plain text */
	for (size_t i = 0; i < g.ninfo; i++)
		if (!strcmp(g.info[i].key, "interpreter") && interpreter_word(g.info[i].value))
			al_result_add_info(res, "interpreter", g.info[i].value);
	res->build = g.build; /* a grading job's verdicts */
	res->tests = g.tests;
	res->ntests = g.ntests;
	g.out = g.err = (struct al_bytes){0};
	g.files = NULL;
	g.nfiles = 0;
	g.build = NULL;
	g.tests = NULL;
	g.ntests = 0;
	rc = AL_OK;
out_guest:
	al_result_free(&g);
	return rc;
}

/* An 'O' frame: the next bytes of one of the job's streams, believed only
 * within the job's cap (the agent stops there; more is a guest misbehaving). */
int mvm_take_output(struct al_sandbox *sb, const char *p, size_t n, struct al_err *err)
{
	struct mvm_sb *m = sb->priv;
	int st = n ? (unsigned char)p[0] : 0;
	uint64_t cap = st == 1 ? m->env.stdout_bytes : m->env.stderr_bytes;

	if ((st != 1 && st != 2) || n < 2 || n - 1 > AL_OUT_CHUNK_MAX)
		return al_err_set(err, AL_ESANDBOX,
				  "microvm: a malformed output frame from the guest");
	if (m->live_base[st] + m->live[st].len + (n - 1) > cap)
		return al_err_set(
		    err, AL_ESANDBOX,
		    "microvm: the guest sends more %s than the job's cap of %llu bytes",
		    st == 1 ? "stdout" : "stderr", (unsigned long long)cap);
	if (al_buf_append(&m->live[st], p + 1, n - 1))
		return al_err_set(err, AL_ESANDBOX, "microvm: out of memory for live output");
	return AL_OK;
}
