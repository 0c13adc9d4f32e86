/* test_vmchan.c - the microVM job channel's framing (backends/vmchan.c):
 * round trips in pieces, and every way a peer can misbehave: a frame over
 * the cap, an empty frame, the channel closed mid-frame, a reader that
 * never reads (the writer gives up in time). */
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../../backends/vmchan.h"
#include "tap.h"

static void pair(int sv[2], bool nonblock_read)
{
	socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
	if (nonblock_read)
		fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
}

static void test_roundtrip(void)
{
	struct al_chan_rd rd = { 0 };
	struct al_err err = { 0 };
	int sv[2], rc;
	const uint8_t hdr[] = { 0, 0, 0, 6, 'S', 'a' };

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
	TAP_OK(al_chan_read(&rd, sv[0], 64, &err) == 0, "length and part of the payload: not done yet");
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
	struct al_chan_rd rd = { 0 };
	struct al_err err = { 0 };
	const uint8_t huge[] = { 0x7f, 0xff, 0xff, 0xff, 'S' }, empty[] = { 0, 0, 0, 0 };
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
	struct al_err err = { 0 };
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

int main(void)
{
	test_roundtrip();
	test_bad_peers();
	test_stuck_reader();
	return tap_done();
}
