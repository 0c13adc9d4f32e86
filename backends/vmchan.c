/* vmchan.c - framed messages on the microVM's channel (see vmchan.h). */
#include "vmchan.h"

#include "backend.h"
#include "judge.h"
#include "jobspec.h"
#include "../common/log.h" /* clocks */
#include "../proto/result.h"
#include "../common/clock.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void al_chan_rd_reset(struct al_chan_rd *r)
{
	r->hdr_have = 0;
	r->len = 0;
	r->body.len = 0;
}

void al_chan_rd_free(struct al_chan_rd *r)
{
	al_buf_free(&r->body);
	memset(r, 0, sizeof(*r));
}

int al_chan_read(struct al_chan_rd *r, int fd, size_t max, struct al_err *err)
{
	for (size_t taken = 0;;) {
		ssize_t n;

		if (taken >= AL_CHAN_READ_BUDGET)
			return 0; /* the rest on the next call: fd stays readable */
		if (r->hdr_have < sizeof(r->hdr)) {
			n = read(fd, r->hdr + r->hdr_have, sizeof(r->hdr) - r->hdr_have);
		} else {
			size_t want = r->len - r->body.len;
			char chunk[65536];

			if (want == 0)
				return 1;
			n = read(fd, chunk, want < sizeof(chunk) ? want : sizeof(chunk));
			taken += n > 0 ? (size_t)n : 0;
			if (n > 0 && al_buf_append(&r->body, chunk, (size_t)n))
				return al_err_set(err, AL_ESANDBOX, "channel: out of memory");
			if (n > 0 && r->body.len == r->len)
				return 1;
			if (n > 0)
				continue;
		}
		if (n < 0 && (errno == EINTR))
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n < 0)
			return al_err_sys(err, "channel: read");
		if (n == 0 && (r->eof = true))
			return al_err_set(err, AL_ESANDBOX, "channel: closed by the peer%s",
					  r->hdr_have || r->body.len ? " in the middle of a frame"
								     : "");
		if (r->hdr_have < sizeof(r->hdr)) {
			r->hdr_have += (size_t)n;
			if (r->hdr_have < sizeof(r->hdr))
				continue;
			r->len = al_get_u32(r->hdr);
			if (r->len == 0)
				return al_err_set(err, AL_ESANDBOX, "channel: empty frame");
			if (r->len > max)
				return al_err_set(
				    err, AL_ESANDBOX,
				    "channel: frame of %u bytes is over the cap of %zu", r->len,
				    max);
		}
	}
}

static int write_all(int fd, const void *p, size_t n, uint64_t deadline, struct al_err *err)
{
	const char *c = p;

	while (n > 0) {
		ssize_t w = write(fd, c, n);

		if (w > 0) {
			c += w;
			n -= (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			struct pollfd pfd = {.fd = fd, .events = POLLOUT};
			uint64_t now = al_mono_ms();
			int left = deadline == UINT64_MAX ? -1
				   : now >= deadline	  ? 0
							  : (int)(deadline - now);

			if (left == 0 || poll(&pfd, 1, left) == 0)
				return al_err_set(
				    err, AL_ESANDBOX,
				    "channel: the peer does not read (write timed out)");
			continue;
		}
		return al_err_sys(err, "channel: write");
	}
	return AL_OK;
}

int al_chan_write_raw(int fd, const void *p, size_t n, int timeout_ms, struct al_err *err)
{
	return write_all(fd, p, n,
			 timeout_ms < 0 ? UINT64_MAX : al_mono_ms() + (uint64_t)timeout_ms, err);
}

int al_chan_write(int fd, char type, const void *p1, size_t n1, const void *p2, size_t n2,
		  int timeout_ms, struct al_err *err)
{
	uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : al_mono_ms() + (uint64_t)timeout_ms;
	uint8_t hdr[5];
	int rc;

	if (1 + n1 + n2 > UINT32_MAX)
		return al_err_set(err, AL_ESANDBOX, "channel: frame too large");
	al_put_u32(hdr, (uint32_t)(1 + n1 + n2));
	hdr[4] = (uint8_t)type;
	if ((rc = write_all(fd, hdr, sizeof(hdr), deadline, err)) ||
	    (n1 && (rc = write_all(fd, p1, n1, deadline, err))) ||
	    (n2 && (rc = write_all(fd, p2, n2, deadline, err))))
		return rc;
	return AL_OK;
}

/* What the guest keeps of each collected file: the collect cap, at most a
 * result's file cap. */
static uint64_t file_cap(uint64_t collect_cap)
{
	return collect_cap < AL_RESULT_FILE_MAX ? collect_cap : AL_RESULT_FILE_MAX;
}

int al_chan_job_frame(const struct al_run_spec *spec, uint64_t collect_cap, struct al_buf *frame,
		      struct al_err *err)
{
	struct al_job job = *spec->job;
	struct al_buf av = {0};
	uint32_t argc = 0, envc = 0;
	size_t at;
	uint8_t n[8];
	int rc = AL_OK;

	job.limits = spec->limits;
	/* length (filled in below), type, job length (below), job */
	if (al_buf_append(frame,
			  "\0\0\0\0"
			  "J"
			  "\0\0\0\0",
			  9))
		goto fail_oom;
	at = frame->len;
	if ((rc = al_job_encode(&job, frame, err)))
		goto out_argv;
	al_put_u32((uint8_t *)frame->data + 5, (uint32_t)(frame->len - at));
	if (al_argv_env(spec, "/proc/self/fd/3", &av, &argc, &envc))
		goto fail_oom;
	al_put_u32(n, argc);
	al_put_u32(n + 4, envc);
	if (al_buf_append(frame, n, sizeof(n)) || al_buf_append(frame, av.data, av.len))
		goto fail_oom;
	al_put_u32(n, (uint32_t)file_cap(collect_cap));
	if (al_buf_append(frame, n, 4))
		goto fail_oom;
	if (frame->len - 4 > UINT32_MAX) {
		rc = al_err_set(err, AL_ESANDBOX, "channel: job frame too large");
		goto out_argv;
	}
	al_put_u32((uint8_t *)frame->data, (uint32_t)(frame->len - 4));
	goto out_argv;
fail_oom:
	rc = al_err_set(err, AL_ESANDBOX, "channel: out of memory");
out_argv:
	al_buf_free(&av);
	return rc;
}

int al_chan_send_job(int fd, const struct al_run_spec *spec, uint64_t collect_cap, int timeout_ms,
		     struct al_err *err)
{
	struct al_buf frame = {0};
	int rc = al_chan_job_frame(spec, collect_cap, &frame, err);

	/* the frame is whole: write its bytes as they are */
	if (rc == AL_OK)
		rc = al_chan_write_raw(fd, frame.data, frame.len, timeout_ms, err);
	al_buf_free(&frame);
	return rc;
}

size_t al_chan_result_cap(const struct al_run_spec *spec, uint64_t collect_cap)
{
	struct al_limits l;
	uint64_t file, cap, nfiles;

	al_grade_envelope(spec->job, &spec->limits, &l);
	file = file_cap(collect_cap) < l.disk_bytes ? file_cap(collect_cap) : l.disk_bytes;
	/* the files were all on the job's disk: together no more than it */
	nfiles = al_collect_max_files(spec->job);
	cap = l.stdout_bytes + l.stderr_bytes + nfiles * 512 +
	      (nfiles * file < l.disk_bytes ? nfiles * file : l.disk_bytes) + AL_CHAN_RESULT_SLACK;
	/* a grading job: its build's and each test's kept output and detail */
	if (spec->job->ntests)
		cap +=
		    (spec->job->ntests + 1) * (2ull * AL_TEST_KEEP_MAX + AL_VERDICT_TEXT_MAX + 512);
	return cap > AL_RESULT_MAX_BYTES ? AL_RESULT_MAX_BYTES : (size_t)cap;
}

/* Whether a guest's accepted or wrong_answer can be true of what it sent
 * back: the host has the test's expect and, when the whole stdout came
 * (not cut), compares them itself; accepted also needs exit 0 and no
 * signal. Other verdicts come from limits only the guest saw. */
static bool verdict_fits(const struct al_job *job, const struct al_test *t,
			 const struct al_test_result *tr)
{
	bool clean = tr->has_exit_code && tr->exit_code == 0 && !tr->signal;
	bool same;

	if (tr->verdict == AL_V_CHECKER_ERROR)
		return job->checker && clean; /* only a checker's, after a clean exit */
	if (tr->verdict != AL_V_ACCEPTED && tr->verdict != AL_V_WRONG_ANSWER)
		return true;
	if (!clean)
		return false; /* both need a clean exit */
	if (job->checker)
		return true; /* the checker's word: it ran in the guest */
	if (!t->has_expect)
		return tr->verdict == AL_V_ACCEPTED;
	if (tr->out_truncated)
		return true; /* the host cannot see it all: the guest's word */
	same = al_test_output_matches(t, tr->out.data, tr->out.len, NULL);
	return same == (tr->verdict == AL_V_ACCEPTED);
}

int al_chan_check_result(const struct al_run_spec *spec, uint64_t collect_cap, struct al_result *g,
			 struct al_err *err)
{
	const struct al_job *job = spec->job;
	struct al_limits l;

	al_grade_envelope(job, &spec->limits, &l);
	if (g->out.len > l.stdout_bytes || g->err.len > l.stderr_bytes ||
	    g->nfiles > al_collect_max_files(job))
		return al_err_set(err, AL_ESANDBOX,
				  "microvm: the guest's result is over the job's caps");
	/* a grading job's verdicts: its tests, in its order, no other */
	if (g->ntests > job->ntests || (g->build != NULL) > (job->build != NULL) ||
	    ((g->ntests || g->build) && !job->ntests))
		return al_err_set(
		    err, AL_ESANDBOX,
		    "microvm: the guest's result has verdicts the job did not ask for");
	for (size_t i = 0; i < g->ntests; i++)
		if (strcmp(g->tests[i].name, job->tests[i].name) ||
		    g->tests[i].verdict == AL_V_COMPILE_ERROR)
			return al_err_set(err, AL_ESANDBOX,
					  "microvm: the guest's verdict #%zu is not for the job's "
					  "test \"%s\"",
					  i, job->tests[i].name);
	for (size_t i = 0; i < g->ntests; i++)
		if (!verdict_fits(job, &job->tests[i], &g->tests[i]))
			return al_err_set(err, AL_ESANDBOX,
					  "microvm: the guest's verdict for test \"%s\" (%s) "
					  "contradicts the output and exit status it returned",
					  job->tests[i].name, al_verdict_name(g->tests[i].verdict));
	for (size_t i = 0; i < g->nfiles; i++) {
		if (!g->files[i].path || !al_collect_wanted(spec->job, g->files[i].path))
			return al_err_set(err, AL_ESANDBOX,
					  "microvm: the guest returned a file not asked for");
		for (size_t j = 0; j < i; j++)
			if (!strcmp(g->files[j].path, g->files[i].path))
				return al_err_set(err, AL_ESANDBOX,
						  "microvm: the guest returned a file twice");
		if (g->files[i].data.len > file_cap(collect_cap)) {
			g->files[i].data.len = file_cap(collect_cap);
			g->files[i].truncated = true;
		}
	}
	return AL_OK;
}
