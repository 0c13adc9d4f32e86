/* vmchan.h - the microVM's job channel: framed messages between the worker
 * and the guest agent over a virtio-serial port (separate from the console).
 *
 * A frame is a 4-byte big-endian length, then that many bytes: one type
 * byte and the payload. Both ends bound the length before reading a byte of
 * the payload, so a peer that sends garbage or too much gets an error, never
 * an allocation of its choosing or a reader stuck on it.
 *
 *   guest -> host  'R' ready: the agent is up; payload "agent <version>"
 *   host -> guest  'J' job: u32 job length, the job (msgpack, effective
 *                  limits), u32 argc, u32 envc, then argc+envc NUL-ended
 *                  strings (argv and environment, built by the worker),
 *                  then u32 collect cap (bytes kept of each collected file)
 *   guest -> host  'H' heartbeat, no payload: every second while the job
 *                  runs, so that a hung guest is told from a long job (a
 *                  guest that sends them much faster is refused)
 *   guest -> host  'O' output: one byte, the stream (1 stdout, 2 stderr), then
 *                  the next 1..AL_OUT_CHUNK_MAX bytes the job wrote to it,
 *                  in order, never past the job's cap (live output; the
 *                  result still carries the whole capped output)
 *   guest -> host  'S' result: an encoded al_result (msgpack), at most
 *                  al_chan_result_cap bytes: the job's own caps
 *   host -> guest  'A' acknowledgement, no payload: the whole result was
 *                  read; only then does the agent power the VM off
 *   host -> guest  'E' restored, before the job or while it runs: the VM
 *                  was started from a snapshot; 8 bytes, the host's time
 *                  (ms since the epoch, big endian), 32 bytes of the
 *                  host's entropy, then 1 byte, 1 when the VM waits in
 *                  its pool (its job does not follow at once): the agent
 *                  sets the clock, mixes the entropy into its random pool
 *                  and reseeds its generator, and a warm interpreter draws
 *                  its random generators anew (and rehearses, below)
 *   host -> guest  'C' trim, while the job runs (a session, idle): the
 *                  agent drops the guest's clean page cache and compacts
 *                  its memory, so that the balloon reports the pages freed
 *                  and the host takes them back
 */
#ifndef AL_VMCHAN_H
#define AL_VMCHAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../proto/buf.h"
#include "../proto/err.h"

#define AL_CHAN_READY	     'R'
#define AL_CHAN_JOB	     'J'
#define AL_CHAN_RESULT	     'S'
#define AL_CHAN_HEARTBEAT    'H'
#define AL_CHAN_OUTPUT	     'O'
#define AL_CHAN_ACK	     'A'
#define AL_CHAN_WARM	     'W'   /* after ready, before a job: the warm interpreter is ready */
#define AL_CHAN_RESTORED     'E'   /* the VM was restored from a snapshot (time, entropy) */
#define AL_CHAN_TRIM	     'C'   /* give the host back what the guest can spare */
#define AL_CHAN_ACK_WAIT_MS  30000 /* the agent waits this long for 'A' */
#define AL_CHAN_READ_BUDGET  (1u << 20) /* bytes one al_chan_read call takes at most */
#define AL_CHAN_HEARTBEAT_MS 1000
#define AL_CHAN_PORT	     "airlock.0"       /* the virtserialport's name */
#define AL_SESSION_PORT	     "airlock.session" /* a session's server's port */
#define AL_CHAN_READY_MAX    256	       /* the ready frame's payload */
#define AL_CHAN_RESULT_SLACK (64u << 10)       /* a result's bytes beyond its streams and files */

/* An incremental frame reader: feed it a readable fd until it says done. */
struct al_chan_rd {
	uint8_t hdr[4];
	size_t hdr_have;
	uint32_t len;	    /* type byte + payload */
	struct al_buf body; /* type byte then payload */
	bool eof;	    /* the peer closed the channel */
};

/* Read what fd has, at most AL_CHAN_READ_BUDGET bytes per call (a peer
 * cannot keep the caller's event loop here). Returns 1 when a whole frame is
 * in r->body (type at body.data[0]), 0 when more is needed (EAGAIN on a
 * non-blocking fd, or the budget spent), AL_ESANDBOX on end of file, a read
 * error or a frame over max bytes (refused from its header, before a byte of
 * it is read). */
int al_chan_read(struct al_chan_rd *r, int fd, size_t max, struct al_err *err);
/* Forget the frame read so far (keeps the buffer). */
void al_chan_rd_reset(struct al_chan_rd *r);
void al_chan_rd_free(struct al_chan_rd *r);

/* Write one frame; on a non-blocking fd waits (poll) at most timeout_ms
 * (-1: forever) in all. Returns 0 or AL_ESANDBOX. */
int al_chan_write(int fd, char type, const void *p1, size_t n1, const void *p2, size_t n2,
		  int timeout_ms, struct al_err *err);

/* Write bytes that already form whole frames (same timeout rule). */
int al_chan_write_raw(int fd, const void *p, size_t n, int timeout_ms, struct al_err *err);

struct al_run_spec;
struct al_result;
struct al_job;
/* The biggest result frame a job can honestly produce: its stdout and
 * stderr caps, collect_cap bytes per file it asked to collect, some slack. */
size_t al_chan_result_cap(const struct al_run_spec *spec, uint64_t collect_cap);
/* Believe a guest's result only within the job: the files it asked for,
 * each once, at most collect_cap bytes each (longer ones are cut and marked
 * truncated), streams within their caps. AL_ESANDBOX with the reason. */
int al_chan_check_result(const struct al_run_spec *spec, uint64_t collect_cap, struct al_result *g,
			 struct al_err *err);
/* Append the whole job frame for spec to frame (benchmarks keep a copy). */
int al_chan_job_frame(const struct al_run_spec *spec, uint64_t collect_cap, struct al_buf *frame,
		      struct al_err *err);
/* Send the job frame for spec: the job with its effective limits, then
 * argv and environment built as for every backend (the script on fd 3).
 * timeout_ms as for al_chan_write. */
int al_chan_send_job(int fd, const struct al_run_spec *spec, uint64_t collect_cap, int timeout_ms,
		     struct al_err *err);

/* Big-endian u32 helpers for payloads. */
static inline void al_put_u32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline uint32_t al_get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

#endif
