/* test_vmchan.c - the microVM job channel's framing (backends/vmchan.c):
 * round trips in pieces, and every way a peer can misbehave: a frame over
 * the cap, an empty frame, the channel closed mid-frame, a reader that
 * never reads (the writer gives up in time). */
#include <fcntl.h>
#include <sys/wait.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../../backends/backend.h"
#include "../../backends/vmchan.h"
#include "../../proto/grade.h"
#include "../../proto/result.h"
#include "tap.h"

static void pair(int sv[2], bool nonblock_read)
{
	socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
	if (nonblock_read)
		fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
}

static void test_roundtrip(void)
{
	struct al_chan_rd rd = {0};
	struct al_err err = {0};
	int sv[2], rc;
	const uint8_t hdr[] = {0, 0, 0, 6, 'S', 'a'};

	pair(sv, true);
	rc = al_chan_write(sv[1], AL_CHAN_READY, "agent", 5, " 1", 2, 1000, &err);
	TAP_OK(rc == 0, "a frame from two parts is written");
	rc = al_chan_read(&rd, sv[0], 64, &err);
	TAP_OK(rc == 1 && rd.body.len == 8 && rd.body.data[0] == AL_CHAN_READY &&
		   memcmp(rd.body.data + 1, "agent 1", 7) == 0,
	       "and read back whole: type then payload");
	al_chan_rd_reset(&rd);
	TAP_OK(al_chan_read(&rd, sv[0], 64, &err) == 0, "nothing more: the reader waits (0)");
	/* a frame arriving in pieces, split inside the length */
	if (write(sv[1], hdr, 2) != 2)
		TAP_OK(0, "write");
	TAP_OK(al_chan_read(&rd, sv[0], 64, &err) == 0, "half a length: not done yet");
	if (write(sv[1], hdr + 2, 4) != 4)
		TAP_OK(0, "write");
	TAP_OK(al_chan_read(&rd, sv[0], 64, &err) == 0,
	       "length and part of the payload: not done yet");
	if (write(sv[1], "bcde", 4) != 4)
		TAP_OK(0, "write");
	rc = al_chan_read(&rd, sv[0], 64, &err);
	TAP_OK(rc == 1 && rd.body.len == 6 && memcmp(rd.body.data, "Sabcde", 6) == 0,
	       "a frame fed in pieces is reassembled");
	al_chan_rd_reset(&rd);
	TAP_OK(al_chan_write(sv[1], AL_CHAN_HEARTBEAT, NULL, 0, NULL, 0, 1000, &err) == 0 &&
		   al_chan_read(&rd, sv[0], 64, &err) == 1 && rd.body.len == 1 &&
		   rd.body.data[0] == AL_CHAN_HEARTBEAT,
	       "a heartbeat is a frame of just its type");
	al_chan_rd_free(&rd);
	close(sv[0]);
	close(sv[1]);
}

static void test_bad_peers(void)
{
	struct al_chan_rd rd = {0};
	struct al_err err = {0};
	const uint8_t huge[] = {0x7f, 0xff, 0xff, 0xff, 'S'}, empty[] = {0, 0, 0, 0};
	int sv[2], rc;

	pair(sv, true);
	if (write(sv[1], huge, sizeof(huge)) != (ssize_t)sizeof(huge))
		TAP_OK(0, "write");
	rc = al_chan_read(&rd, sv[0], 1 << 20, &err);
	TAP_OK(rc == AL_ESANDBOX && strstr(err.msg, "over the cap") && rd.body.cap == 0,
	       "a frame announcing 2 GiB is refused before any of it is read or allocated");
	close(sv[0]);
	close(sv[1]);
	al_chan_rd_free(&rd);

	pair(sv, true);
	if (write(sv[1], empty, sizeof(empty)) != (ssize_t)sizeof(empty))
		TAP_OK(0, "write");
	rc = al_chan_read(&rd, sv[0], 64, &err);
	TAP_OK(rc == AL_ESANDBOX && strstr(err.msg, "empty frame"), "an empty frame is refused");
	close(sv[0]);
	close(sv[1]);
	al_chan_rd_free(&rd);

	pair(sv, true);
	if (write(sv[1], "\0\0\0\20Spart", 9) != 9)
		TAP_OK(0, "write");
	close(sv[1]);
	rc = al_chan_read(&rd, sv[0], 64, &err);
	TAP_OK(rc == AL_ESANDBOX && rd.eof && strstr(err.msg, "in the middle of a frame"),
	       "the peer closing mid-frame is an error that says so");
	close(sv[0]);
	al_chan_rd_free(&rd);

	pair(sv, true);
	close(sv[1]);
	rc = al_chan_read(&rd, sv[0], 64, &err);
	TAP_OK(rc == AL_ESANDBOX && rd.eof && !strstr(err.msg, "middle"),
	       "the peer closing between frames is end of file");
	close(sv[0]);
	al_chan_rd_free(&rd);
}

static void test_stuck_reader(void)
{
	static char big[4 << 20];
	struct al_err err = {0};
	struct timespec a, b;
	int sv[2], rc;

	pair(sv, false);
	fcntl(sv[1], F_SETFL, fcntl(sv[1], F_GETFL) | O_NONBLOCK);
	clock_gettime(CLOCK_MONOTONIC, &a);
	rc = al_chan_write(sv[1], AL_CHAN_JOB, big, sizeof(big), NULL, 0, 300, &err);
	clock_gettime(CLOCK_MONOTONIC, &b);
	TAP_OK(rc == AL_ESANDBOX && strstr(err.msg, "does not read") &&
		   (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 < 2000,
	       "a peer that never reads: the writer gives up after its timeout");
	close(sv[0]);
	close(sv[1]);
}

/* A frame bigger than one call's budget: the reader returns to its caller
 * (0) after AL_CHAN_READ_BUDGET bytes, though more is there, and finishes
 * on later calls. */
static void test_read_budget(void)
{
	static char big[3 << 20];
	struct al_chan_rd rd = {0};
	struct al_err err = {0};
	int sv[2], rc = 0, calls = 0;
	pid_t pid;

	pair(sv, true);
	pid = fork();
	if (pid == 0) {
		close(sv[0]);
		_exit(al_chan_write(sv[1], AL_CHAN_RESULT, big, sizeof(big), NULL, 0, 10000, &err));
	}
	close(sv[1]);
	while (rc == 0 && calls < 100000) {
		size_t before = rd.body.len;

		rc = al_chan_read(&rd, sv[0], 4 << 20, &err);
		calls++;
		if (rd.body.len - before > AL_CHAN_READ_BUDGET + 65536)
			break;
		if (rc == 0)
			usleep(1000);
	}
	TAP_OK(rc == 1 && rd.body.len == sizeof(big) + 1 && calls >= 3,
	       "a 3 MiB frame is read over %d calls, at most %u KiB each", calls,
	       AL_CHAN_READ_BUDGET >> 10);
	waitpid(pid, NULL, 0);
	close(sv[0]);
	al_chan_rd_free(&rd);
}

/* The guest's result believed only within the job: its files, once each. */
static void test_check_result(void)
{
	char *collect[] = {(char *)"a", (char *)"b"};
	struct al_job job = {.id = (char *)"j", .collect = collect, .ncollect = 2};
	struct al_run_spec spec = {.job = &job};
	struct al_out_file files[2] = {{.path = (char *)"a"}, {.path = (char *)"a"}};
	struct al_result g = {.files = files, .nfiles = 2};
	struct al_err err = {0};
	static char data[100];

	spec.limits.stdout_bytes = spec.limits.stderr_bytes = 10;
	spec.limits.disk_bytes = 1 << 20;
	TAP_OK(al_chan_check_result(&spec, 64, &g, &err) == AL_ESANDBOX &&
		   strstr(err.msg, "a file twice"),
	       "a collected path returned twice is refused");
	files[1].path = (char *)"c";
	TAP_OK(al_chan_check_result(&spec, 64, &g, &err) == AL_ESANDBOX &&
		   strstr(err.msg, "not asked for"),
	       "a path not asked for is refused");
	files[1].path = (char *)"b";
	files[1].data.data = data;
	files[1].data.len = sizeof(data);
	TAP_OK(al_chan_check_result(&spec, 64, &g, &err) == AL_OK && files[1].data.len == 64 &&
		   files[1].truncated,
	       "a file over the collect cap is cut to it and marked truncated");
	TAP_OK(al_chan_result_cap(&spec, 64) == 10 + 10 + 2 * (64 + 512) + AL_CHAN_RESULT_SLACK,
	       "the frame cap is the job's own: streams, the collect cap per file asked, slack");
}

/* A glob in collect: the guest may return what it matches (FNM_PATHNAME,
 * FNM_PERIOD), up to AL_COLLECT_FILES_MAX files, nothing else; the frame
 * cap counts the job's disk, not 64 times a file. */
static void test_check_globs(void)
{
	char *collect[] = {(char *)"out/*.png", (char *)"log.txt"};
	struct al_job job = {.id = (char *)"j", .collect = collect, .ncollect = 2};
	struct al_run_spec spec = {.job = &job};
	struct al_out_file files[AL_COLLECT_FILES_MAX + 1] = {{.path = (char *)"out/a.png"},
							      {.path = (char *)"log.txt"}};
	struct al_result g = {.files = files, .nfiles = 2};
	struct al_err err = {0};
	static char names[AL_COLLECT_FILES_MAX + 1][16];
	const char *const refused[] = {"out/sub/b.png", "out/.hidden.png", "a.png", "out/a.jpg"};

	spec.limits.stdout_bytes = spec.limits.stderr_bytes = 10;
	spec.limits.disk_bytes = 1 << 20;
	TAP_OK(al_chan_check_result(&spec, 64, &g, &err) == AL_OK,
	       "a file a glob matches and a path asked for are taken");
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		files[1].path = (char *)refused[i];
		TAP_OK(al_chan_check_result(&spec, 64, &g, &err) == AL_ESANDBOX &&
			   strstr(err.msg, "not asked for"),
		       "a glob does not match %s: refused", refused[i]);
	}
	for (int i = 0; i <= AL_COLLECT_FILES_MAX; i++) {
		snprintf(names[i], sizeof(names[i]), "out/%d.png", i);
		files[i].path = names[i];
	}
	g.nfiles = AL_COLLECT_FILES_MAX;
	TAP_OK(al_chan_check_result(&spec, 64, &g, &err) == AL_OK, "%d matched files are taken",
	       AL_COLLECT_FILES_MAX);
	g.nfiles = AL_COLLECT_FILES_MAX + 1;
	TAP_OK(al_chan_check_result(&spec, 64, &g, &err) == AL_ESANDBOX,
	       "one more is over the job's caps");
	TAP_OK(al_chan_result_cap(&spec, 1 << 30) ==
		   10 + 10 + AL_COLLECT_FILES_MAX * 512 + (1 << 20) + AL_CHAN_RESULT_SLACK,
	       "with a glob the frame cap holds the job's whole disk in files, not %d files of "
	       "the collect cap",
	       AL_COLLECT_FILES_MAX);
}

/* A rogue guest's verdicts against what it sent back: the host compares
 * each accepted or wrong_answer with the test's expect itself. */
static void test_forged_verdicts(void)
{
	struct al_test tests[1] = {{.name = (char *)"t0",
				    .has_expect = true,
				    .expect = {(char *)"42\n", 3},
				    .compare = AL_CMP_TRIM}};
	struct al_job job = {.id = (char *)"g", .tests = tests, .ntests = 1};
	struct al_run_spec spec = {.job = &job};
	struct al_test_result tr[1] = {{.name = (char *)"t0",
					.verdict = AL_V_ACCEPTED,
					.has_exit_code = true,
					.out = {(char *)"41\n", 3}}};
	struct al_result g = {.tests = tr, .ntests = 1};
	struct al_err err = {0};
	static const struct {
		const char *out;
		int verdict, exit_code, sig;
		bool truncated;
		int want;
		const char *what;
	} cases[] = {
	    {"41\n", AL_V_ACCEPTED, 0, 0, false, AL_ESANDBOX, "accepted for output \"41\""},
	    {"42\n", AL_V_ACCEPTED, 0, 0, false, AL_OK, "accepted for the expected output"},
	    {"42", AL_V_ACCEPTED, 0, 0, false, AL_OK, "accepted, trim: without the newline"},
	    {"42\n", AL_V_WRONG_ANSWER, 0, 0, false, AL_ESANDBOX,
	     "wrong_answer for the expected output"},
	    {"41\n", AL_V_WRONG_ANSWER, 0, 0, false, AL_OK, "wrong_answer for another output"},
	    {"42\n", AL_V_ACCEPTED, 1, 0, false, AL_ESANDBOX, "accepted with exit code 1"},
	    {"42\n", AL_V_ACCEPTED, 0, 9, false, AL_ESANDBOX, "accepted with a signal"},
	    {"41\n", AL_V_ACCEPTED, 0, 0, true, AL_OK,
	     "accepted with a cut output: the host cannot tell, so it is taken"},
	    {"41\n", AL_V_TIMEOUT, 0, 0, false, AL_OK, "timeout: only the guest saw the clock"},
	};

	spec.limits.stdout_bytes = spec.limits.stderr_bytes = 1 << 20;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		tr[0].out.data = (char *)cases[i].out;
		tr[0].out.len = strlen(cases[i].out);
		tr[0].verdict = (enum al_verdict)cases[i].verdict;
		tr[0].exit_code = cases[i].exit_code;
		tr[0].signal = cases[i].sig;
		tr[0].out_truncated = cases[i].truncated;
		err = (struct al_err){0};
		TAP_OK(al_chan_check_result(&spec, 64, &g, &err) == cases[i].want &&
			   (cases[i].want == AL_OK || strstr(err.msg, "contradicts")),
		       "a guest's %s: %s", cases[i].what,
		       cases[i].want == AL_OK ? "taken" : "refused as a sandbox_error");
	}
}

int main(void)
{
	test_forged_verdicts();
	test_roundtrip();
	test_bad_peers();
	test_stuck_reader();
	test_read_budget();
	test_check_result();
	test_check_globs();
	return tap_done();
}
