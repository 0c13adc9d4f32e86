/* mp.h - bounded msgpack reading and writing helpers on top of msgpack-c.
 * Reading is two steps: al_mp_parse first walks the raw bytes and refuses any
 * container whose declared count cannot fit in what is left (msgpack-c would
 * otherwise allocate for the declared count before reading it), then lets
 * msgpack-c build the object tree. The al_mp_get_* readers name the field in
 * every error. */
#ifndef AL_MP_H
#define AL_MP_H

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "err.h"
#include "job.h"

#define AL_MP_MAX_DEPTH 16 /* nesting of arrays and maps */

/* Parse exactly one msgpack object from buf[0..len). On success *out points
 * into up's zone (caller calls msgpack_unpacked_destroy(up) in all cases after
 * msgpack_unpacked_init). */
int al_mp_parse(const void *buf, size_t len, msgpack_unpacked *up, const msgpack_object **out,
		struct al_err *err);

/* True when s[0..n) is well-formed UTF-8 with no NUL byte. */
bool al_utf8_valid(const char *s, size_t n);

/* Readers. `what` names the field in errors ("limits.wall_ms"). Strings come
 * back malloc'd and NUL-terminated; the caller owns them. */
int al_mp_get_text(const msgpack_object *o, const char *what, size_t max, char **out,
		   struct al_err *err);
int al_mp_get_bytes(const msgpack_object *o, const char *what, size_t max, struct al_bytes *out,
		    struct al_err *err);
int al_mp_get_uint(const msgpack_object *o, const char *what, uint64_t min, uint64_t max,
		   uint64_t *out, struct al_err *err);
int al_mp_get_int(const msgpack_object *o, const char *what, int64_t min, int64_t max, int64_t *out,
		  struct al_err *err);
int al_mp_get_bool(const msgpack_object *o, const char *what, bool *out, struct al_err *err);
/* Check the type of a container; returns AL_EINVAL naming `what` otherwise. */
int al_mp_want(const msgpack_object *o, msgpack_object_type t, const char *what,
	       struct al_err *err);
/* Name of a msgpack type for errors ("string", "map", ...). */
const char *al_mp_type_name(msgpack_object_type t);
/* Compare a str key with a C string. */
bool al_mp_key_is(const msgpack_object *k, const char *name);

/* Writers over a msgpack_packer whose data goes to an al_buf. */
void al_mp_packer_init(msgpack_packer *pk, struct al_buf *out);
int al_mp_pack_str(msgpack_packer *pk, const char *s);
int al_mp_pack_strn(msgpack_packer *pk, const char *s, size_t n);
int al_mp_pack_bin(msgpack_packer *pk, const void *p, size_t n);
int al_mp_pack_kv_str(msgpack_packer *pk, const char *k, const char *v);
int al_mp_pack_kv_uint(msgpack_packer *pk, const char *k, uint64_t v);
int al_mp_pack_kv_bin(msgpack_packer *pk, const char *k, const void *p, size_t n);
/* Pack an array of key/value string pairs as a map. */
int al_mp_pack_kvs(msgpack_packer *pk, const struct al_kv *kv, size_t n);

/* The msgpack map in buf[0..len) again into out, without the keys named in
 * drop (NULL-terminated). AL_EINVAL when buf is not one map. */
int al_mp_map_without(const void *buf, size_t len, const char *const *drop, struct al_buf *out,
		      struct al_err *err);

#endif
