/* json.h - JSON views of jobs and results (for `airlock --json` and tests).
 * Byte strings appear as a JSON string when they are valid UTF-8 without NUL,
 * and as "<name>_base64" otherwise. */
#ifndef AL_JSON_H
#define AL_JSON_H

#include <jansson.h>

#include "err.h"
#include "job.h"
#include "result.h"

/* Both return a new reference (caller json_decref's it), or NULL when any
 * part could not be made (out of memory): never a document with a part left
 * out. */
json_t *al_job_to_json(const struct al_job *job);
json_t *al_result_to_json(const struct al_result *res);
/* Set key (or key_base64) on obj from bytes. Returns 0 or AL_ENOMEM. */
int al_json_set_bytes(json_t *obj, const char *key, const struct al_bytes *b);
/* Output bytes (a result's stdout, stderr): key always, as text (each byte
 * of no valid UTF-8 sequence, and NUL, as U+FFFD), and key_base64 with the
 * exact bytes when the text is not them. Returns 0 or AL_ENOMEM. */
int al_json_set_output(json_t *obj, const char *key, const struct al_bytes *b);
/* Read bytes back from key_base64, else key; missing leaves *b empty. Caller
 * frees b->data. Returns 0 or AL_EINVAL on bad base64. */
int al_json_get_bytes(const json_t *obj, const char *key, struct al_bytes *b);

/* JSON to msgpack (appended to out): objects, arrays, strings, integers,
 * booleans and null as they are; a key "NAME_base64" is NAME as bytes
 * (bin). A real number is packed as one (the decoder refuses it where a
 * uint is due). AL_OK, or AL_EINVAL (bad base64) / AL_ENOMEM with err. */
int al_json_to_msgpack(const json_t *v, struct al_buf *out, struct al_err *err);

#endif
