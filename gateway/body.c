/* body.c - a job from an HTTP body (gw.h): JSON or msgpack in, the
 * protocol's msgpack out, with the gateway's id and the key's tenant. The
 * protocol's own decoder then checks it, so the fields, caps and error
 * messages are the protocol's (PROTOCOL.md). */
#include <jansson.h>
#include <msgpack.h>
#include <string.h>

#include "../proto/json.h"
#include "../proto/mp.h"
#include "gw.h"

/* A tenant in the body may only repeat the key's. */
static int check_tenant(const char *got, size_t n, const char *tenant, struct al_err *err)
{
	if (n != strlen(tenant) || memcmp(got, tenant, n))
		return al_err_set(err, AL_EINVAL,
				  "tenant: set by your API key (tenant %s); leave it out", tenant);
	return AL_OK;
}

int gw_job_from_body(const char *body, size_t len, bool msgpack, const char *id, const char *tenant,
		     struct al_buf *out, struct al_job *job, struct al_err *err)
{
	msgpack_packer pk;
	struct al_buf raw = {0};
	msgpack_unpacked up;
	const msgpack_object *o;
	int rc;

	memset(job, 0, sizeof(*job));
	al_buf_reset(out);
	if (!msgpack) {
		json_error_t je;
		json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);

		if (!j)
			return al_err_set(err, AL_EINVAL,
					  "body: invalid JSON: %s (line %d, column %d)", je.text,
					  je.line, je.column);
		if (!json_is_object(j)) {
			json_decref(j);
			return al_err_set(err, AL_EINVAL, "body: expected a JSON object (the job)");
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
		goto out;
	if (o->type != MSGPACK_OBJECT_MAP) {
		rc = al_err_set(err, AL_EINVAL, "body: expected a map (the job)");
		goto out;
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
					goto out;
				}
				if ((rc = check_tenant(kv->val.via.str.ptr, kv->val.via.str.size,
						       tenant, err)))
					goto out;
			} else if (al_mp_key_is(&kv->key, "id")) {
				rc = al_err_set(err, AL_EINVAL,
						"id: chosen by the gateway; leave it out");
				goto out;
			} else {
				has_v |= al_mp_key_is(&kv->key, "v");
				keep++;
			}
		}
		/* the path says the version (/v1/): "v" may be left out */
		if (msgpack_pack_map(&pk, keep + 2 + !has_v) || al_mp_pack_kv_str(&pk, "id", id) ||
		    al_mp_pack_kv_str(&pk, "tenant", tenant) ||
		    (!has_v && al_mp_pack_kv_uint(&pk, "v", 1))) {
			rc = al_err_set(err, AL_ENOMEM, "out of memory");
			goto out;
		}
		for (uint32_t i = 0; i < o->via.map.size; i++) {
			const msgpack_object_kv *kv = &o->via.map.ptr[i];

			if (al_mp_key_is(&kv->key, "tenant"))
				continue;
			if (msgpack_pack_object(&pk, kv->key) ||
			    msgpack_pack_object(&pk, kv->val)) {
				rc = al_err_set(err, AL_ENOMEM, "out of memory");
				goto out;
			}
		}
	}
	/* the protocol's checks, and its messages */
	rc = al_job_decode(out->data, out->len, job, err);
out:
	msgpack_unpacked_destroy(&up);
	al_buf_free(&raw);
	return rc;
}
