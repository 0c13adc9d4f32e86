/* fuzz_job.c - libFuzzer target for the job decoder: any input must decode
 * or fail with a message, never crash, leak or read out of bounds; a decoded
 * job must re-encode and decode to the same encoding. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../proto/job.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct al_job job, again;
	struct al_buf b1 = {0}, b2 = {0};
	struct al_err err = {0};
	char *id;

	id = al_job_peek_id(data, size);
	free(id);
	if (al_job_decode(data, size, &job, &err) != AL_OK) {
		if (err.msg[0] == '\0')
			abort(); /* every rejection must say why */
		return 0;
	}
	if (al_job_encode(&job, &b1, &err) != AL_OK)
		abort();
	if (al_job_decode(b1.data, b1.len, &again, &err) != AL_OK)
		abort();
	if (al_job_encode(&again, &b2, &err) != AL_OK || b1.len != b2.len ||
	    memcmp(b1.data, b2.data, b1.len) != 0)
		abort();
	al_job_free(&job);
	al_job_free(&again);
	al_buf_free(&b1);
	al_buf_free(&b2);
	return 0;
}
