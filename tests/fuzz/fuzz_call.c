/* fuzz_call.c - libFuzzer target for the session call decoder: any input must decode
 * or fail with a message, never crash, leak or read out of bounds; a decoded
 * call must re-encode and decode to the same encoding. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../proto/call.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct al_sess_call job, again;
	struct al_buf b1 = {0}, b2 = {0};
	struct al_err err = {0};
	char *id;

	id = al_job_peek_id(data, size); /* the worker peeks a bad call's id too */
	free(id);
	if (al_sess_call_decode(data, size, &job, &err) != AL_OK) {
		if (err.msg[0] == '\0')
			abort(); /* every rejection must say why */
		return 0;
	}
	if (al_sess_call_encode(&job, &b1, &err) != AL_OK)
		abort();
	if (al_sess_call_decode(b1.data, b1.len, &again, &err) != AL_OK)
		abort();
	if (al_sess_call_encode(&again, &b2, &err) != AL_OK || b1.len != b2.len ||
	    memcmp(b1.data, b2.data, b1.len) != 0)
		abort();
	al_sess_call_free(&job);
	al_sess_call_free(&again);
	al_buf_free(&b1);
	al_buf_free(&b2);
	return 0;
}
