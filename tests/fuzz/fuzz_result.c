/* fuzz_result.c - libFuzzer target for the result decoder (clients decode
 * results from Redis, which a hostile writer could fill). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../proto/result.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct al_result res, again;
	struct al_buf b1 = {0}, b2 = {0};
	struct al_err err = {0};

	if (al_result_decode(data, size, &res, &err) != AL_OK) {
		if (err.msg[0] == '\0')
			abort();
		return 0;
	}
	if (al_result_encode(&res, &b1, &err) != AL_OK)
		abort();
	if (al_result_decode(b1.data, b1.len, &again, &err) != AL_OK)
		abort();
	if (al_result_encode(&again, &b2, &err) != AL_OK || b1.len != b2.len ||
	    memcmp(b1.data, b2.data, b1.len) != 0)
		abort();
	al_result_free(&res);
	al_result_free(&again);
	al_buf_free(&b1);
	al_buf_free(&b2);
	return 0;
}
