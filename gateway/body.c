/* body.c - a job or a session's call from an HTTP body (gw.h): JSON or
 * msgpack in, the protocol's msgpack out, with the gateway's id and the
 * key's tenant. The
 * protocol's own decoder then checks it, so the fields, caps and error
 * messages are the protocol's (PROTOCOL.md). */
#include <jansson.h>
#include <msgpack.h>
#include <string.h>

#include "../common/clock.h"
#include "../proto/json.h"
#include "../proto/mp.h"
#include "../proto/call.h"
#include "gw.h"

/* A tenant in the body may only repeat the key's. */
static int check_tenant(const char *got, size_t n, const char *tenant, struct al_err *err)
{
	if (n != strlen(tenant) || memcmp(got, tenant, n))
		return al_err_set(err, AL_EINVAL,
				  "tenant: set by your API key (tenant %s); leave it out", tenant);
	return AL_OK;
}

/* The body as the protocol's msgpack map into out, with id, the key's
 * tenant, and what the path says: extra text fields (key, value, ...,
 * NULL; a session's call: its session and op), or "session": true (a
 * job that opens one). */
static int to_msgpack(const char *body, size_t len, bool msgpack, const char *id, char *own_id,
		      const char *tenant, const char *const *extra, bool opens, struct al_buf *out,
		      struct al_err *err)
{
	size_t nextra = 0;

	msgpack_packer pk;
	struct al_buf raw = {0};
	msgpack_unpacked up;
	const msgpack_object *o;
	int rc;

	al_buf_reset(out);
	while (extra && extra[nextra])
		nextra += 2;
	if (!msgpack) {
		json_error_t je;
		json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);

		if (!j)
			return al_err_set(err, AL_EINVAL,
					  "body: invalid JSON: %s (line %d, column %d)", je.text,
					  je.line, je.column);
		if (!json_is_object(j)) {
			json_decref(j);
			return al_err_set(err, AL_EINVAL, "body: expected a JSON object");
		}
		rc = al_json_to_msgpack(j, &raw, err);
		json_decref(j);
		if (rc) {
			al_buf_free(&raw);
			return rc;
		}
		body = raw.data;
		len = raw.len;
	}
	/* Either way now msgpack (JSON converted as it is): no id, a tenant
	 * only the key's; copied with the gateway's id and the key's tenant. */
	msgpack_unpacked_init(&up);
	if ((rc = al_mp_parse(body, len, &up, &o, err)))
		goto out_unpacked;
	if (o->type != MSGPACK_OBJECT_MAP) {
		rc = al_err_set(err, AL_EINVAL, "body: expected a map");
		goto out_unpacked;
	}
	al_mp_packer_init(&pk, out);
	{
		uint32_t keep = 0;
		bool has_v = false;

		for (uint32_t i = 0; i < o->via.map.size; i++) {
			const msgpack_object_kv *kv = &o->via.map.ptr[i];

			if (al_mp_key_is(&kv->key, "tenant")) {
				if (kv->val.type != MSGPACK_OBJECT_STR) {
					rc = al_err_set(err, AL_EINVAL, "tenant: expected text");
					goto out_unpacked;
				}
				if ((rc = check_tenant(kv->val.via.str.ptr, kv->val.via.str.size,
						       tenant, err)))
					goto out_unpacked;
			} else if (own_id && al_mp_key_is(&kv->key, "id")) {
				/* a call's id, the caller's: its answer can be fetched by it */
				if (kv->val.type != MSGPACK_OBJECT_STR ||
				    kv->val.via.str.size > AL_ID_MAX) {
					rc = al_err_set(err, AL_EINVAL,
							"id: expected 1..64 of [A-Za-z0-9._:-]");
					goto out_unpacked;
				}
				snprintf(own_id, AL_ID_MAX + 1, "%.*s", (int)kv->val.via.str.size,
					 kv->val.via.str.ptr);
				if (!al_job_id_ok(own_id, kv->val.via.str.size)) {
					rc = al_err_set(err, AL_EINVAL,
							"id: expected 1..64 of [A-Za-z0-9._:-]");
					goto out_unpacked;
				}
			} else if (al_mp_key_is(&kv->key, "id")) {
				rc = al_err_set(err, AL_EINVAL,
						"id: chosen by the gateway; leave it out");
				goto out_unpacked;
			} else if (al_mp_key_is(&kv->key, "submitted_ms")) {
				rc = al_err_set(
				    err, AL_EINVAL,
				    "submitted_ms: the gateway's clock sets it; leave it "
				    "out");
				goto out_unpacked;
			} else if ((opens && al_mp_key_is(&kv->key, "session")) ||
				   (extra && al_mp_key_is(&kv->key, extra[0])) ||
				   (nextra > 2 && al_mp_key_is(&kv->key, extra[2]))) {
				rc = al_err_set(err, AL_EINVAL,
						"%.*s: given by the path; leave it out",
						(int)kv->key.via.str.size, kv->key.via.str.ptr);
				goto out_unpacked;
			} else {
				has_v |= al_mp_key_is(&kv->key, "v");
				keep++;
			}
		}
		/* the path says the version (/v1/): "v" may be left out */
		/* submitted_ms: the result's queued_ms (the queue's wait) counts from it */
		if (msgpack_pack_map(&pk, keep + 3 + !has_v + (uint32_t)(nextra / 2) + opens) ||
		    al_mp_pack_kv_str(&pk, "id", own_id && *own_id ? own_id : id) ||
		    al_mp_pack_kv_str(&pk, "tenant", tenant) ||
		    al_mp_pack_kv_uint(&pk, "submitted_ms", al_now_ms()) ||
		    (opens && (al_mp_pack_str(&pk, "session") || msgpack_pack_true(&pk))) ||
		    (!has_v && al_mp_pack_kv_uint(&pk, "v", 1))) {
			rc = al_err_set(err, AL_ENOMEM, "out of memory");
			goto out_unpacked;
		}
		for (size_t i = 0; i < nextra; i += 2)
			if (al_mp_pack_kv_str(&pk, extra[i], extra[i + 1])) {
				rc = al_err_set(err, AL_ENOMEM, "out of memory");
				goto out_unpacked;
			}
		for (uint32_t i = 0; i < o->via.map.size; i++) {
			const msgpack_object_kv *kv = &o->via.map.ptr[i];

			if (al_mp_key_is(&kv->key, "tenant") || al_mp_key_is(&kv->key, "id"))
				continue;
			if (msgpack_pack_object(&pk, kv->key) ||
			    msgpack_pack_object(&pk, kv->val)) {
				rc = al_err_set(err, AL_ENOMEM, "out of memory");
				goto out_unpacked;
			}
		}
	}
out_unpacked:
	msgpack_unpacked_destroy(&up);
	al_buf_free(&raw);
	return rc;
}

int gw_job_from_body(const char *body, size_t len, bool msgpack, const char *id, const char *tenant,
		     bool opens_session, struct al_buf *out, struct al_job *job, struct al_err *err)
{
	int rc = to_msgpack(body, len, msgpack, id, NULL, tenant, NULL, opens_session, out, err);

	memset(job, 0, sizeof(*job));
	/* the protocol's checks, and its messages */
	return rc ? rc : al_job_decode(out->data, out->len, job, err);
}

int gw_call_from_body(const char *body, size_t len, bool msgpack, char id[AL_ID_MAX + 1],
		      const char *session, const char *op, const char *tenant, struct al_buf *out,
		      struct al_sess_call *call, struct al_err *err)
{
	const char *extra[] = {"session", session, op ? "op" : NULL, op, NULL};
	char own[AL_ID_MAX + 1] = "";
	int rc = to_msgpack(body, len, msgpack, id, own, tenant, extra, false, out, err);

	if (!rc && own[0])
		memcpy(id, own, sizeof(own)); /* the caller's */

	memset(call, 0, sizeof(*call));
	return rc ? rc : al_sess_call_decode(out->data, out->len, call, err);
}
