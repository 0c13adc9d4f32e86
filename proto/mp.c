/* mp.c - bounded msgpack reading and writing helpers (see mp.h). */
#include "mp.h"

#include <stdlib.h>
#include <string.h>

static uint64_t be(const uint8_t *p, size_t n)
{
	uint64_t v = 0;

	for (size_t i = 0; i < n; i++)
		v = (v << 8) | p[i];
	return v;
}

/* Walk one msgpack value tree without building it. Returns AL_OK when
 * buf[0..len) holds exactly one object whose every length and container count
 * fits in the bytes that follow it. */
static int mp_scan(const uint8_t *p, size_t len, struct al_err *err)
{
	uint64_t pending[AL_MP_MAX_DEPTH + 1];
	int depth = 0;
	size_t pos = 0;

	pending[0] = 1;
	while (depth >= 0) {
		uint64_t payload = 0, count = 0;
		size_t hdr = 1, lenbytes = 0;
		bool is_container = false;
		uint8_t b;

		if (pending[depth] == 0) {
			depth--;
			continue;
		}
		pending[depth]--;
		if (pos >= len)
			return al_err_set(err, AL_EINVAL, "msgpack: truncated at byte %zu", pos);
		b = p[pos];
		if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
			/* fixint, nil, bool: header only */
		} else if (b >= 0x80 && b <= 0x8f) {
			is_container = true;
			count = 2u * (b & 0x0f);
		} else if (b >= 0x90 && b <= 0x9f) {
			is_container = true;
			count = b & 0x0f;
		} else if (b >= 0xa0 && b <= 0xbf) {
			payload = b & 0x1f;
		} else {
			switch (b) {
			case 0xc4:
			case 0xd9: lenbytes = 1; break; /* bin8, str8 */
			case 0xc5:
			case 0xda: lenbytes = 2; break; /* bin16, str16 */
			case 0xc6:
			case 0xdb: lenbytes = 4; break; /* bin32, str32 */
			case 0xc7:
				lenbytes = 1;
				payload = 1;
				break; /* ext8 (+type) */
			case 0xc8:
				lenbytes = 2;
				payload = 1;
				break;
			case 0xc9:
				lenbytes = 4;
				payload = 1;
				break;
			case 0xca: payload = 4; break; /* float32 */
			case 0xcb: payload = 8; break; /* float64 */
			case 0xcc:
			case 0xd0: payload = 1; break;
			case 0xcd:
			case 0xd1: payload = 2; break;
			case 0xce:
			case 0xd2: payload = 4; break;
			case 0xcf:
			case 0xd3: payload = 8; break;
			case 0xd4: payload = 2; break; /* fixext 1..16 (+type) */
			case 0xd5: payload = 3; break;
			case 0xd6: payload = 5; break;
			case 0xd7: payload = 9; break;
			case 0xd8: payload = 17; break;
			case 0xdc:
				is_container = true;
				lenbytes = 2;
				break;
			case 0xdd:
				is_container = true;
				lenbytes = 4;
				break;
			case 0xde:
				is_container = true;
				lenbytes = 2;
				break;
			case 0xdf:
				is_container = true;
				lenbytes = 4;
				break;
			default: /* 0xc1 is never used */
				return al_err_set(err, AL_EINVAL,
						  "msgpack: invalid byte 0x%02x at byte %zu", b,
						  pos);
			}
			if (lenbytes) {
				uint64_t n;

				if (len - pos - 1 < lenbytes)
					return al_err_set(err, AL_EINVAL,
							  "msgpack: truncated at byte %zu", pos);
				n = be(p + pos + 1, lenbytes);
				hdr += lenbytes;
				if (is_container)
					count = (b == 0xde || b == 0xdf) ? 2 * n : n;
				else
					payload += n;
			}
		}
		if (len - pos < hdr || len - pos - hdr < payload)
			return al_err_set(err, AL_EINVAL,
					  "msgpack: truncated: value at byte %zu claims %llu "
					  "bytes, only %zu left",
					  pos, (unsigned long long)payload, len - pos - hdr);
		pos += hdr + payload;
		if (is_container && count > 0) {
			/* Every element takes at least one byte. */
			if (count > len - pos)
				return al_err_set(err, AL_EINVAL,
						  "msgpack: container at byte %zu claims %llu "
						  "elements, only %zu bytes left",
						  pos - hdr, (unsigned long long)count, len - pos);
			if (depth + 1 > AL_MP_MAX_DEPTH)
				return al_err_set(err, AL_EINVAL,
						  "msgpack: nested deeper than %d levels",
						  AL_MP_MAX_DEPTH);
			pending[++depth] = count;
		}
	}
	if (pos != len)
		return al_err_set(err, AL_EINVAL, "msgpack: %zu trailing bytes after the value",
				  len - pos);
	return AL_OK;
}

int al_mp_parse(const void *buf, size_t len, msgpack_unpacked *up, const msgpack_object **out,
		struct al_err *err)
{
	size_t off = 0;
	int rc;

	if (len == 0)
		return al_err_set(err, AL_EINVAL, "msgpack: empty input");
	rc = mp_scan(buf, len, err);
	if (rc)
		return rc;
	switch (msgpack_unpack_next(up, buf, len, &off)) {
	case MSGPACK_UNPACK_SUCCESS: break;
	case MSGPACK_UNPACK_NOMEM_ERROR:
		return al_err_set(err, AL_ENOMEM, "msgpack: out of memory");
	default: return al_err_set(err, AL_EINVAL, "msgpack: malformed input");
	}
	*out = &up->data;
	return AL_OK;
}

bool al_utf8_valid(const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0;

	while (i < n) {
		unsigned char c = s[i];
		uint32_t cp;
		size_t k;

		if (c == 0)
			return false;
		if (c < 0x80) {
			i++;
			continue;
		} else if (c >= 0xc2 && c <= 0xdf) {
			k = 1;
			cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			k = 2;
			cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			k = 3;
			cp = c & 0x07;
		} else {
			return false;
		}
		if (n - i - 1 < k)
			return false;
		for (size_t j = 1; j <= k; j++) {
			if ((s[i + j] & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (s[i + j] & 0x3f);
		}
		/* overlong forms, surrogates, beyond U+10FFFF */
		if ((k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) || cp > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += k + 1;
	}
	return true;
}

const char *al_mp_type_name(msgpack_object_type t)
{
	switch (t) {
	case MSGPACK_OBJECT_NIL: return "nil";
	case MSGPACK_OBJECT_BOOLEAN: return "boolean";
	case MSGPACK_OBJECT_POSITIVE_INTEGER: return "integer";
	case MSGPACK_OBJECT_NEGATIVE_INTEGER: return "negative integer";
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64: return "float";
	case MSGPACK_OBJECT_STR: return "string";
	case MSGPACK_OBJECT_BIN: return "binary";
	case MSGPACK_OBJECT_ARRAY: return "array";
	case MSGPACK_OBJECT_MAP: return "map";
	case MSGPACK_OBJECT_EXT: return "ext";
	}
	return "unknown";
}

int al_mp_want(const msgpack_object *o, msgpack_object_type t, const char *what, struct al_err *err)
{
	if (o->type == t)
		return AL_OK;
	return al_err_set(err, AL_EINVAL, "%s: wrong type: expected %s, got %s", what,
			  al_mp_type_name(t), al_mp_type_name(o->type));
}

bool al_mp_key_is(const msgpack_object *k, const char *name)
{
	size_t n = strlen(name);

	return k->type == MSGPACK_OBJECT_STR && k->via.str.size == n &&
	       memcmp(k->via.str.ptr, name, n) == 0;
}

static char *dup_n(const char *p, size_t n)
{
	char *s = malloc(n + 1);

	if (!s)
		return NULL;
	if (n)
		memcpy(s, p, n);
	s[n] = '\0';
	return s;
}

int al_mp_get_text(const msgpack_object *o, const char *what, size_t max, char **out,
		   struct al_err *err)
{
	int rc = al_mp_want(o, MSGPACK_OBJECT_STR, what, err);

	if (rc)
		return rc;
	if (o->via.str.size > max)
		return al_err_set(err, AL_EINVAL, "%s: too long: %u bytes, at most %zu", what,
				  o->via.str.size, max);
	if (!al_utf8_valid(o->via.str.ptr, o->via.str.size))
		return al_err_set(err, AL_EINVAL, "%s: not valid UTF-8 text (or contains NUL)",
				  what);
	*out = dup_n(o->via.str.ptr, o->via.str.size);
	if (!*out)
		return al_err_set(err, AL_ENOMEM, "%s: out of memory", what);
	return AL_OK;
}

int al_mp_get_bytes(const msgpack_object *o, const char *what, size_t max, struct al_bytes *out,
		    struct al_err *err)
{
	const char *p;
	uint32_t n;

	if (o->type == MSGPACK_OBJECT_STR) {
		p = o->via.str.ptr;
		n = o->via.str.size;
	} else if (o->type == MSGPACK_OBJECT_BIN) {
		p = o->via.bin.ptr;
		n = o->via.bin.size;
	} else {
		return al_err_set(err, AL_EINVAL,
				  "%s: wrong type: expected binary or string, got %s", what,
				  al_mp_type_name(o->type));
	}
	if (n > max)
		return al_err_set(err, AL_EINVAL, "%s: too long: %u bytes, at most %zu", what, n,
				  max);
	out->data = dup_n(p, n);
	if (!out->data)
		return al_err_set(err, AL_ENOMEM, "%s: out of memory", what);
	out->len = n;
	return AL_OK;
}

int al_mp_get_uint(const msgpack_object *o, const char *what, uint64_t min, uint64_t max,
		   uint64_t *out, struct al_err *err)
{
	if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
		return al_err_set(err, AL_EINVAL, "%s: must be >= %llu, got %lld", what,
				  (unsigned long long)min, (long long)o->via.i64);
	if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return al_err_set(err, AL_EINVAL, "%s: wrong type: expected integer, got %s", what,
				  al_mp_type_name(o->type));
	if (o->via.u64 < min || o->via.u64 > max)
		return al_err_set(err, AL_EINVAL, "%s: out of range: got %llu, expected %llu..%llu",
				  what, (unsigned long long)o->via.u64, (unsigned long long)min,
				  (unsigned long long)max);
	*out = o->via.u64;
	return AL_OK;
}

int al_mp_get_int(const msgpack_object *o, const char *what, int64_t min, int64_t max, int64_t *out,
		  struct al_err *err)
{
	int64_t v;

	if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
		if (o->via.u64 > (uint64_t)INT64_MAX)
			return al_err_set(err, AL_EINVAL, "%s: out of range: %llu", what,
					  (unsigned long long)o->via.u64);
		v = (int64_t)o->via.u64;
	} else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
		v = o->via.i64;
	} else {
		return al_err_set(err, AL_EINVAL, "%s: wrong type: expected integer, got %s", what,
				  al_mp_type_name(o->type));
	}
	if (v < min || v > max)
		return al_err_set(err, AL_EINVAL, "%s: out of range: got %lld, expected %lld..%lld",
				  what, (long long)v, (long long)min, (long long)max);
	*out = v;
	return AL_OK;
}

int al_mp_get_bool(const msgpack_object *o, const char *what, bool *out, struct al_err *err)
{
	int rc = al_mp_want(o, MSGPACK_OBJECT_BOOLEAN, what, err);

	if (!rc)
		*out = o->via.boolean;
	return rc;
}

static int buf_write(void *data, const char *p, size_t n)
{
	return al_buf_append(data, p, n);
}

void al_mp_packer_init(msgpack_packer *pk, struct al_buf *out)
{
	msgpack_packer_init(pk, out, buf_write);
}

int al_mp_pack_strn(msgpack_packer *pk, const char *s, size_t n)
{
	return msgpack_pack_str_with_body(pk, s, n);
}

int al_mp_pack_str(msgpack_packer *pk, const char *s)
{
	return al_mp_pack_strn(pk, s, strlen(s));
}

int al_mp_pack_bin(msgpack_packer *pk, const void *p, size_t n)
{
	return msgpack_pack_bin_with_body(pk, p, n);
}

int al_mp_pack_kv_str(msgpack_packer *pk, const char *k, const char *v)
{
	return al_mp_pack_str(pk, k) || al_mp_pack_str(pk, v);
}

int al_mp_pack_kv_uint(msgpack_packer *pk, const char *k, uint64_t v)
{
	return al_mp_pack_str(pk, k) || msgpack_pack_uint64(pk, v);
}

int al_mp_pack_kv_bin(msgpack_packer *pk, const char *k, const void *p, size_t n)
{
	return al_mp_pack_str(pk, k) || al_mp_pack_bin(pk, p, n);
}

int al_mp_pack_kvs(msgpack_packer *pk, const struct al_kv *kv, size_t n)
{
	if (msgpack_pack_map(pk, n))
		return AL_ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (al_mp_pack_kv_str(pk, kv[i].key, kv[i].value))
			return AL_ENOMEM;
	return 0;
}

int al_mp_map_without(const void *buf, size_t len, const char *const *drop, struct al_buf *out,
		      struct al_err *err)
{
	msgpack_unpacked up;
	const msgpack_object *o;
	msgpack_packer pk;
	uint32_t keep = 0;
	int rc;

	msgpack_unpacked_init(&up);
	if ((rc = al_mp_parse(buf, len, &up, &o, err)))
		goto out_unpacked;
	if (o->type != MSGPACK_OBJECT_MAP) {
		rc = al_err_set(err, AL_EINVAL, "expected a map");
		goto out_unpacked;
	}
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1 && msgpack_pack_map(&pk, keep)) {
			rc = al_err_set(err, AL_ENOMEM, "out of memory");
			goto out_unpacked;
		}
		for (uint32_t i = 0; i < o->via.map.size; i++) {
			const msgpack_object_kv *kv = &o->via.map.ptr[i];
			bool dropped = false;

			for (size_t d = 0; drop[d] && !dropped; d++)
				dropped = al_mp_key_is(&kv->key, drop[d]);
			if (dropped)
				continue;
			if (pass == 0)
				keep++;
			else if (msgpack_pack_object(&pk, kv->key) ||
				 msgpack_pack_object(&pk, kv->val)) {
				rc = al_err_set(err, AL_ENOMEM, "out of memory");
				goto out_unpacked;
			}
		}
		if (pass == 0)
			al_mp_packer_init(&pk, out);
	}
out_unpacked:
	msgpack_unpacked_destroy(&up);
	return rc;
}
