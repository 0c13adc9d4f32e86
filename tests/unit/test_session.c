/* test_session.c - the session call's codec (proto/call.h) and the job's
 * "session" field: every call that decodes comes back the same through
 * encode; every malformed one is refused naming its field; a session's job
 * has no command; a result's outputs round-trip. */
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/policy.h"
#include "../../proto/contract.h"
#include "../../proto/mp.h"
#include "../../proto/result.h"
#include "../../proto/call.h"
#include "policy_file.h"
#include "tap.h"

/* A call map of the pairs given (key, then a value: "s:text", "b:bytes",
 * "u:123", "a:x,y" an array of text), packed into out. */
static void pack(struct al_buf *out, const char *const *kv)
{
	msgpack_packer pk;
	size_t n = 0;

	while (kv[n])
		n += 2;
	al_buf_reset(out);
	al_mp_packer_init(&pk, out);
	msgpack_pack_map(&pk, n / 2);
	for (size_t i = 0; i < n; i += 2) {
		const char *v = kv[i + 1] + 2;

		al_mp_pack_str(&pk, kv[i]);
		switch (kv[i + 1][0]) {
		case 's': al_mp_pack_str(&pk, v); break;
		case 'b':
			msgpack_pack_bin(&pk, strlen(v));
			msgpack_pack_bin_body(&pk, v, strlen(v));
			break;
		case 'u': msgpack_pack_uint64(&pk, strtoull(v, NULL, 10)); break;
		case 't': msgpack_pack_true(&pk); break;
		default: {
			size_t items = *v ? 1 : 0;

			for (const char *p = v; *p; p++)
				items += *p == ',';
			msgpack_pack_array(&pk, items);
			for (const char *p = v; items; items--) {
				const char *e = strchr(p, ',');

				al_mp_pack_strn(&pk, p, e ? (size_t)(e - p) : strlen(p));
				p = e ? e + 1 : p + strlen(p);
			}
		}
		}
	}
}

int main(void)
{
	static const struct {
		const char *kv[20];
		const char *want; /* NULL: decodes */
	} cases[] = {
	    {{"v", "u:1", "id", "s:c1", "session", "s:s1", "op", "s:python", "code", "b:x = 1",
	      NULL},
	     NULL},
	    {{"v", "u:1", "id", "s:c1", "session", "s:s1", "op", "s:exec", "argv", "a:/bin/echo,hi",
	      "timeout_ms", "u:500", NULL},
	     NULL},
	    {{"v", "u:1", "id", "s:c1", "session", "s:s1", "op", "s:python", "code", "b:1",
	      "cpu_ms", "u:1000", "output_max", "u:4096", NULL},
	     NULL},
	    {{"v", "u:1", "id", "s:c1", "session", "s:s1", "op", "s:python", "code", "b:1",
	      "cpu_ms", "u:0", NULL},
	     "cpu_ms:"},
	    {{"v", "u:1", "id", "s:c1", "session", "s:s1", "op", "s:python", "code", "b:1",
	      "output_max", "u:100", NULL},
	     "output_max:"},
	    {{"v", "u:1", "id", "s:c1", "session", "s:s1", "op", "s:put", "path", "s:a/b", "data",
	      "b:xy", "mode", "u:384", NULL},
	     NULL},
	    {{"v", "u:1", "id", "s:c1", "session", "s:s1", "op", "s:ls", NULL}, NULL},
	    {{"v", "u:1", "id", "s:c1", "session", "s:s1", "op", "s:close", NULL}, NULL},
	    {{"v", "u:1", "id", "s:c1", "session", "s:s1", "op", "s:cancel", "target", "s:c0",
	      NULL},
	     NULL},
	    {{"v", "u:1", "id", "s:c1", "session", "s:s1", "op", "s:cancel", NULL},
	     "cancel: needs target"},
	    {{"v", "u:1", "id", "s:c1", "session", "s:s1", "op", "s:cancel", "target", "s:a b",
	      NULL},
	     "cancel: needs target"},
	    {{"v", "u:1", "id", "s:c1", "session", "s:s1", "op", "s:extend", "life_ms", "u:60000",
	      NULL},
	     NULL},
	    {{"v", "u:1", "id", "s:c1", "session", "s:s1", "op", "s:extend", NULL},
	     "extend: needs idle_ms, life_ms or both"},
	    {{"v", "u:1", "id", "s:c1", "session", "s:s1", "op", "s:pause", NULL}, NULL},
	    {{"v", "u:1", "id", "s:c1", "session", "s:s1", "op", "s:resume", NULL}, NULL},
	    {{"v", "u:1", "id", "s:c1", "session", "s:s1", "op", "s:fork", "count", "u:3", NULL},
	     NULL},
	    {{"v", "u:1", "id", "s:c1", "session", "s:s1", "op", "s:fork", NULL},
	     "fork: count: expected 1..16"},
	    {{"v", "u:1", "id", "s:c1", "session", "s:s1", "op", "s:fork", "count", "u:17", NULL},
	     "count:"},
	    {{"v", "u:1", "id", "s:c1", "session", "s:s1", "op", "s:frob", NULL}, "op: unknown"},
	    {{"v", "u:1", "id", "s:c1", "session", "s:s1", NULL}, "op: missing"},
	    {{"id", "s:c1", "session", "s:s1", "op", "s:ls", NULL}, "v: missing"},
	    {{"v", "u:2", "id", "s:c1", "session", "s:s1", "op", "s:ls", NULL}, "v:"},
	    {{"v", "u:1", "id", "s:c 1", "session", "s:s1", "op", "s:ls", NULL}, "id:"},
	    {{"v", "u:1", "id", "s:c1", "op", "s:ls", NULL}, "session:"},
	    {{"v", "u:1", "id", "s:c1", "session", "s:s1", "op", "s:exec", NULL},
	     "exec: needs argv"},
	    {{"v", "u:1", "id", "s:c1", "session", "s:s1", "op", "s:exec", "code", "b:ls", "argv",
	      "a:ls", NULL},
	     "argv or code, not both"},
	    {{"v", "u:1", "id", "s:c1", "session", "s:s1", "op", "s:python", NULL},
	     "python: needs code"},
	    {{"v", "u:1", "id", "s:c1", "session", "s:s1", "op", "s:put", "data", "b:x", NULL},
	     "put: needs path"},
	    {{"v", "u:1", "id", "s:c1", "session", "s:s1", "op", "s:get", "path", "s:../etc", NULL},
	     "\"..\" in path"},
	    {{"v", "u:1", "id", "s:c1", "session", "s:s1", "op", "s:get", "path", "s:/etc/passwd",
	      NULL},
	     "absolute path"},
	    {{"v", "u:1", "id", "s:c1", "session", "s:s1", "op", "s:put", "path", "s:a", "mode",
	      "u:4095", NULL},
	     "mode:"},
	    {{"v", "u:1", "id", "s:c1", "session", "s:s1", "op", "s:ls", "colour", "s:red", NULL},
	     "unknown field \"colour\""},
	    {{"v", "u:1", "id", "s:c1", "session", "s:s1", "op", "s:ls", "op", "s:ls", NULL},
	     "duplicate field"},
	};
	struct al_buf b = {0}, again = {0};
	struct al_err err;
	struct al_sess_call call, back;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc;

		memset(&err, 0, sizeof(err));
		pack(&b, cases[i].kv);
		rc = al_sess_call_decode(b.data, b.len, &call, &err);
		if (!cases[i].want) {
			bool same = false;

			if (!rc && !al_sess_call_encode(&call, &again, &err) &&
			    !al_sess_call_decode(again.data, again.len, &back, &err)) {
				same = back.op == call.op && back.code.len == call.code.len &&
				       back.argc == call.argc && back.mode == call.mode &&
				       back.timeout_ms == call.timeout_ms &&
				       back.cpu_ms == call.cpu_ms &&
				       back.output_max == call.output_max &&
				       (!call.target || !strcmp(back.target, call.target)) &&
				       back.life_ms == call.life_ms &&
				       back.idle_ms == call.idle_ms &&
				       !strcmp(back.tenant, "default");
				al_sess_call_free(&back);
			}
			TAP_OK(same, "call %zu (%s) decodes, and encodes back the same: %s", i,
			       al_sess_op_name(call.op), err.msg);
			al_sess_call_free(&call);
			al_buf_reset(&again);
		} else {
			TAP_OK(rc == AL_EINVAL && strstr(err.msg, cases[i].want),
			       "call %zu refused naming the problem (%s): %s", i, cases[i].want,
			       err.msg);
		}
	}
	TAP_OK(al_sess_call_decode("\xc1", 1, &call, &err) == AL_EINVAL && err.msg[0],
	       "not msgpack: refused, saying why: %s", err.msg);

	/* a malformed call's session and id, to tell it why on its own keys */
	{
		static const struct {
			const char *kv[12];
			bool named;
		} peeks[] = {
		    {{"v", "u:1", "id", "s:c1", "session", "s:s1", "op", "s:frob", NULL}, true},
		    {{"id", "s:c1", "op", "s:frob", NULL}, false},
		    {{"session", "s:s1", "op", "s:frob", NULL}, false},
		    {{"id", "s:c 1", "session", "s:s1", NULL}, false},
		    {{"id", "s:c1", "session", "s:s/1", NULL}, false},
		    {{"id", "b:c1", "session", "s:s1", NULL}, false},
		};
		char sid[AL_ID_MAX + 1], id[AL_ID_MAX + 1], name[AL_CALL_KEY_MAX];

		for (size_t i = 0; i < sizeof(peeks) / sizeof(peeks[0]); i++) {
			bool named;

			pack(&b, peeks[i].kv);
			named = al_sess_call_peek(b.data, b.len, sid, id);
			TAP_OK(named == peeks[i].named &&
				   (!named || (!strcmp(sid, "s1") && !strcmp(id, "c1"))),
			       "peek %zu: %s", i,
			       named ? "session and id found" : "nothing to answer on");
		}
		TAP_OK(!al_sess_call_peek("\xc1", 1, sid, id) && !sid[0] && !id[0],
		       "peek: not msgpack names nothing");
		TAP_OK(!strcmp(al_call_key_name(name, "s1", "c1"), "s1/c1") &&
			   strlen(al_call_key_name(
			       name,
			       "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
			       "aaaaaaaaaaaa",
			       "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
			       "bbbbbbbbbbbb")) == 2 * AL_ID_MAX + 1,
		       "a call's answer is named <session>/<call>, two ids of 64 whole");
	}

	/* the job's "session" field: no command of its own */
	{
		struct al_job job = {.version = AL_PROTO_VERSION,
				     .id = (char *)"j1",
				     .tenant = (char *)"default",
				     .tier = (char *)"t",
				     .session = true};
		struct al_job dec;

		memset(&err, 0, sizeof(err));
		al_buf_reset(&b);
		TAP_OK(!al_job_encode(&job, &b, &err) &&
			   !al_job_decode(b.data, b.len, &dec, &err) && dec.session,
		       "a session's job (no command) encodes and decodes: %s", err.msg);
		al_job_free(&dec);
		job.argv = (char *[]){(char *)"ls"};
		job.argc = 1;
		memset(&err, 0, sizeof(err));
		TAP_OK(al_job_validate(&job, &err) == AL_EINVAL && strstr(err.msg, "session:"),
		       "a session's job with argv is refused by the codec: %s", err.msg);
		job.argv = NULL;
		job.argc = 0;
		job.cpu_budget_ms = 90000;
		memset(&err, 0, sizeof(err));
		al_buf_reset(&b);
		TAP_OK(!al_job_encode(&job, &b, &err) &&
			   !al_job_decode(b.data, b.len, &dec, &err) && dec.cpu_budget_ms == 90000,
		       "a session's job asking for a CPU budget encodes and decodes: %s", err.msg);
		al_job_free(&dec);
		job.cpu_budget_ms = AL_LIMIT_WALL_MS_MAX + 1;
		memset(&err, 0, sizeof(err));
		TAP_OK(al_job_validate(&job, &err) == AL_EINVAL &&
			   strstr(err.msg, "cpu_budget_ms: expected 1.."),
		       "a CPU budget past a week is refused: %s", err.msg);
		job.session = false;
		job.cpu_budget_ms = 1000;
		job.argv = (char *[]){(char *)"ls"};
		job.argc = 1;
		memset(&err, 0, sizeof(err));
		TAP_OK(al_job_validate(&job, &err) == AL_EINVAL &&
			   strstr(err.msg, "cpu_budget_ms: only in a session's job"),
		       "a CPU budget on a job that opens no session is refused: %s", err.msg);
		pack(&b, (const char *[]){"v", "u:1", "id", "s:j1", "tenant", "s:default", "tier",
					  "s:t", "session", "t:", "cpu_budget_ms", "u:0", NULL});
		memset(&err, 0, sizeof(err));
		TAP_OK(al_job_decode(b.data, b.len, &dec, &err) == AL_EINVAL &&
			   strstr(err.msg, "cpu_budget_ms"),
		       "a CPU budget of 0 is refused on the wire: %s", err.msg);
	}

	/* admission of a session's job: what it may not ask for */
	{
		static const struct {
			const char *what, *want;
		} bad[] = {
		    {"tier", "does not open sessions"}, {"network", "does not allow egress"},
		    {"code", "has no command"},		{"callback", "not for a session"},
		    {"vm", "does not keep sessions"},
		};
		struct al_policy pol = {0};

		memset(&err, 0, sizeof(err));
		TAP_OK(!load_policy_text(
			   "tiers:\n  s: {backend: process, sessions: {}, egress: "
			   "{allow: [\"a.example:443\"]}, callback_hosts: [a.example]}\n"
			   "  plain: {backend: process}\n  svc: {backend: vm, sessions: "
			   "{}}\n  closed: {backend: process, sessions: {}}\n  big: {backend: "
			   "process, sessions: {memory_bytes: 1073741824}, max: "
			   "{memory_bytes: 536870912}}\n",
			   &pol, &err),
		       "a policy with a session tier loads: %s", err.msg);
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			struct al_job job = {.version = AL_PROTO_VERSION,
					     .id = (char *)"j1",
					     .tenant = (char *)"default",
					     .tier = (char *)"s",
					     .session = true};

			if (!strcmp(bad[i].what, "tier"))
				job.tier = (char *)"plain";
			else if (!strcmp(bad[i].what, "network")) /* a tier without egress rules */
				job.network = AL_NET_EGRESS, job.tier = (char *)"closed";
			else if (!strcmp(bad[i].what, "code"))
				job.runtime = AL_RUNTIME_PYTHON,
				job.code = (struct al_bytes){(char *)"1", 1};
			else if (!strcmp(bad[i].what, "callback"))
				job.callback_url = (char *)"https://a.example/x";
			else
				job.tier = (char *)"svc";
			memset(&err, 0, sizeof(err));
			TAP_OK(al_policy_admit(&pol, &job, 0, &err) == AL_EINVAL &&
				   strstr(err.msg, bad[i].want),
			       "a session's job with a %s it may not have is refused: %s",
			       bad[i].what, err.msg);
			free(job.image);
		}
		{
			struct al_job job = {.version = AL_PROTO_VERSION,
					     .id = (char *)"j1",
					     .tenant = (char *)"default",
					     .tier = (char *)"s",
					     .session = true,
					     .max_attempts = 5};

			memset(&err, 0, sizeof(err));
			job.network = AL_NET_EGRESS; /* its tier's rules allow it, as a job's */
			TAP_OK(!al_policy_admit(&pol, &job, 0, &err) && job.max_attempts == 1,
			       "a session's job is admitted, with one attempt (its state cannot "
			       "move): %s",
			       err.msg);
			free(job.image);
			job = (struct al_job){.version = AL_PROTO_VERSION,
					      .id = (char *)"j2",
					      .tenant = (char *)"default",
					      .tier = (char *)"big",
					      .session = true};
			memset(&err, 0, sizeof(err));
			TAP_OK(!al_policy_admit(&pol, &job, 0, &err) &&
				   job.limits.memory_bytes == 536870912,
			       "sessions: memory_bytes is a session's memory when its job gives "
			       "none, within the tier's max (512 MiB here): %llu %s",
			       (unsigned long long)job.limits.memory_bytes, err.msg);
			free(job.image);
		}
		al_policy_free(&pol);
	}

	/* what a look at a session's record says (clients and gateway alike) */
	TAP_OK(!al_session_end_seen("open", NULL) &&
		   !strcmp(al_session_end_seen("ended", "idle"), "idle") &&
		   !strcmp(al_session_end_seen("ended", NULL), "ended") &&
		   !al_session_end_seen(NULL, NULL),
	       "a session's record: open, or ended with its reason (no clock of the reader's)");

	/* a result's outputs */
	{
		struct al_result res = {.version = AL_PROTO_VERSION,
					.id = (char *)"c1",
					.status = AL_ST_OK,
					.has_exit_code = true},
				 dec = {0};
		bool ok;

		memset(&err, 0, sizeof(err));
		al_result_add_output(&res, "image/png", "\x89PNG", 4);
		al_buf_reset(&b);
		ok = !al_result_encode(&res, &b, &err) &&
		     !al_result_decode(b.data, b.len, &dec, &err);
		TAP_OK(ok && dec.noutputs == 1 && !strcmp(dec.outputs[0].mime, "image/png") &&
			   dec.outputs[0].data.len == 4 &&
			   !memcmp(dec.outputs[0].data.data, "\x89PNG", 4),
		       "a result's outputs round-trip: %s", err.msg);
		for (size_t i = 0; i < res.noutputs; i++) {
			free(res.outputs[i].mime);
			free(res.outputs[i].data.data);
		}
		free(res.outputs);
		al_result_free(&dec);
		TAP_OK(!strcmp(al_status_name(AL_ST_SESSION_ENDED), "session_ended") &&
			   al_status_parse("session_ended") == AL_ST_SESSION_ENDED,
		       "the status session_ended has its name");
	}
	al_buf_free(&b);
	al_buf_free(&again);
	return tap_done();
}
