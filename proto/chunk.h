/* chunk.h - one entry of a job's live output stream, al:out:<id>
 * (PROTOCOL.md, "Live output"), decoded from a hiredis reply: the client
 * library and the gateway read the same way. No I/O. */
#ifndef AL_CHUNK_H
#define AL_CHUNK_H

#include <stdbool.h>
#include <stddef.h>

/* One entry of a job's live output (PROTOCOL.md, "Live output"). */
enum al_chunk_kind {
	AL_CHUNK_STDOUT = 1,
	AL_CHUNK_STDERR = 2,
	AL_CHUNK_RESTART, /* the attempt's output so far is void: the job runs again */
	AL_CHUNK_END,	  /* the last entry: the result exists */
};
struct al_chunk {
	char id[48]; /* the entry's id: resume after it */
	enum al_chunk_kind kind;
	unsigned attempt;
	const char *data; /* stdout/stderr: the bytes (valid during the call) */
	size_t len;
	char status[32]; /* end: the result's status */
};
struct redisReply;
/* One XREAD/XRANGE entry of al:out:<id> ([id, [field, value, ...]], a
 * hiredis reply) as a chunk: true when it is one; ch->id is filled whenever
 * the entry has an id (an unknown type is passed over: newer workers may
 * add some). data points into the reply. */
bool al_chunk_of_entry(const struct redisReply *e, struct al_chunk *ch);

#endif
