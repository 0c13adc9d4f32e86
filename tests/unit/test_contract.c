/* test_contract.c - the Redis contract (proto/contract.h): key names, the
 * command builder, and the layouts of the script builders (KEYS before
 * ARGV, counts per item, dead letters cut and bounded). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../proto/contract.h"
#include "../../proto/err.h"
#include "tap.h"

static const char *arg(const struct al_call *c, int i)
{
	int argc;
	const char **argv;
	const size_t *lens;

	if (al_call_argv((struct al_call *)c, &argc, &argv, &lens) || i >= argc)
		return "(none)";
	return argv[i];
}

/* Every state a script writes into a job's record is one of enum
 * al_job_state, and every state of the enum is written by some script: the
 * C side and the Lua side speak one vocabulary. */
static void check_job_states(void)
{
	static const char *const scripts[] = {
	    al_lua_submit,  al_lua_admit,  al_lua_claim,  al_lua_fetch,
	    al_lua_commit,  al_lua_reject, al_lua_retry,  al_lua_promote,
	    al_lua_reclaim, al_lua_cancel, al_lua_expire,
	};
	bool written[AL_JS_COUNT] = {0};
	int unknown = 0, found = 0;

	for (size_t i = 0; i < sizeof(scripts) / sizeof(scripts[0]); i++) {
		for (const char *p = scripts[i]; (p = strstr(p, "'state', '")); p++) {
			char name[32];
			size_t n = strcspn(p + 10, "'");
			int s;

			const char *line = p;

			while (line > scripts[i] && line[-1] != '\n')
				line--;
			if (!memmem(line, (size_t)(p - line), "'HSET'", 6))
				continue; /* a read (HMGET), not a write */
			snprintf(name, sizeof(name), "%.*s", (int)n, p + 10);
			s = al_job_state_parse(name);
			found++;
			if (s < 0) {
				unknown++;
				printf(
				    "#   a script writes state \"%s\", not in enum al_job_state\n",
				    name);
			} else
				written[s] = true;
		}
	}
	/* "submitted" is no record's state: LOOKUP answers it from the marker */
	if (strstr(al_lua_lookup, "{'submitted', "))
		written[AL_JS_SUBMITTED] = true;
	TAP_OK(found >= AL_JS_COUNT - 1, "the scripts write job states (%d places)", found);
	TAP_OK(unknown == 0, "each state a script writes is in enum al_job_state");
	for (int s = 0; s < AL_JS_COUNT; s++)
		TAP_OK(written[s], "state %s is written by a script",
		       al_job_state_name((enum al_job_state)s));
	TAP_OK(al_job_state_parse("done") == AL_JS_DONE &&
		   al_job_state_parse("gone") == AL_EINVAL &&
		   !strcmp(al_job_state_name(AL_JS_COUNT), "?"),
	       "job state names parse both ways");
}

/* The argv of c, space-joined (binary args as they are). */
static const char *joined(struct al_call *c)
{
	static char out[512];
	int argc;
	const char **argv;
	const size_t *lens;
	size_t n = 0;

	out[0] = '\0';
	if (al_call_argv(c, &argc, &argv, &lens))
		return "(none)";
	for (int i = 0; i < argc && n < sizeof(out) - 1; i++)
		n += (size_t)snprintf(out + n, sizeof(out) - n, "%s%.*s", i ? " " : "",
				      (int)lens[i], argv[i]);
	return out;
}

/* Each plain command the daemons send comes from one builder: what it
 * sends, word for word (PROTOCOL.md's key names). */
static void check_plain_commands(void)
{
	static const char *const kv[] = {"job", "j1", "state", "running"};
	struct al_call c;

#define SAYS(build, want, what)                                                                    \
	do {                                                                                       \
		build;                                                                             \
		TAP_OK(!strcmp(joined(&c), want), what ": %s", joined(&c));                        \
		al_call_free(&c);                                                                  \
	} while (0)
	SAYS(al_worker_alive_call(&c, "w1", 1500), "SET al:worker:w1 1 PX 1500",
	     "a worker's beat: its alive key with a TTL");
	SAYS(al_worker_register_call(&c, "w1", "{}"), "HSET al:workers w1 {}",
	     "its description in the registry");
	SAYS(al_worker_alive_end_call(&c, "w1"), "DEL al:worker:w1", "at exit: its alive key");
	SAYS(al_worker_unregister_call(&c, "w1"), "HDEL al:workers w1", "and its registry entry");
	SAYS(al_registry_add_call(&c, AL_KEY_HISTS, "al:hist:t:process"),
	     "SADD al:hists al:hist:t:process", "a histogram into its registry");
	SAYS(al_registry_call(&c, AL_KEY_TIERS), "SMEMBERS al:tiers", "the tiers' registry read");
	SAYS(al_hash_all_call(&c, AL_KEY_STATS), "HGETALL al:stats", "a hash read whole");
	SAYS(al_result_get_call(&c, "j1"), "GET al:res:j1", "a result read");
	SAYS(al_dlq_len_call(&c), "XLEN al:dlq", "the dead letters counted");
	SAYS(al_retries_waiting_call(&c), "ZCARD al:delayed", "the retries waiting counted");
	SAYS(al_vm_record_call(&c, "vm1", kv, 2), "HSET al:vm:vm1 job j1 state running",
	     "a service VM's lease record");
	SAYS(al_vm_index_call(&c, "vm1", "99"), "ZADD al:vm:leases 99 vm1",
	     "...and its place in the lease index");
	SAYS(al_out_entry_call(&c, "j1", 2, "out", "hi", 2),
	     "XADD al:out:j1 MAXLEN ~ " AL_OUT_MAXLEN_S " * t out a 2 d hi",
	     "a live-output entry with its bytes");
	SAYS(al_out_entry_call(&c, "j1", 1, "restart", NULL, 0),
	     "XADD al:out:j1 MAXLEN ~ " AL_OUT_MAXLEN_S " * t restart a 1",
	     "a restart entry: no bytes");
	SAYS(al_out_ttl_call(&c, "j1", 5000), "PEXPIRE al:out:j1 5000", "the output's TTL");
	SAYS(al_end_wait_call(&c, "j1", "5-1", 250),
	     "XREAD COUNT 1 BLOCK 250 STREAMS al:out:j1 5-1",
	     "a wait on a result: for anything after the output's newest entry");
#undef SAYS
}

int main(void)
{
	static const struct {
		const char *got, *want;
	} keys[] = {
	    {NULL, "al:job:abc"},	 {NULL, "al:res:abc"},
	    {NULL, "al:out:abc"},	 {NULL, "al:q:trusted:hi"},
	    {NULL, "al:q:trusted:lo"},	 {NULL, "al:tenant:acme"},
	    {NULL, "al:tenant:default"}, {NULL, "al:idem:acme/k1"},
	    {NULL, "al:worker:w1"},	 {NULL, "al:hist:trusted:process"},
	    {NULL, "al:vm:al-svc-x"},	 {NULL, "al:sub:abc"},
	    {NULL, "al:reply:n1"},
	};
	char k[13][AL_KEY_MAX], tier[65], i1[AL_KEY_MAX], i2[AL_KEY_MAX];
	const char *made[13] = {
	    al_key_job(k[0], "abc"),
	    al_key_res(k[1], "abc"),
	    al_key_out(k[2], "abc"),
	    al_key_queue(k[3], "trusted", al_band_of(9)),
	    al_key_queue(k[4], "trusted", al_band_of(0)),
	    al_key_tenant(k[5], "acme"),
	    al_key_tenant(k[6], NULL),
	    al_key_idem(k[7], "acme", "k1"),
	    al_key_worker(k[8], "w1"),
	    al_key_hist(k[9], "trusted", "process"),
	    al_key_vm(k[10], "al-svc-x"),
	    al_key_sub(k[11], "abc"),
	    al_key_reply(k[12], "n1"),
	};

	/* Tenants may hold ':' and keys anything: "a:b" + "c" and "a" + "b:c"
	 * must not name one key (a tenant never holds '/') */
	TAP_OK(strcmp(al_key_idem(i1, "a:b", "c"), al_key_idem(i2, "a", "b:c")) != 0 &&
		   strcmp(al_key_idem(i1, "a", "b/c"), al_key_idem(i2, "a:b", "c")) != 0,
	       "idempotency keys of different tenants never collide (%s, %s)", i1, i2);
	struct al_call c;
	int argc;
	const char **argv;
	const size_t *lens;
	char raw[10000];

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		TAP_OK(!strcmp(made[i], keys[i].want), "key %s (got %s)", keys[i].want, made[i]);
	TAP_OK(al_key_queue_tier("al:q:my-tier:mid", tier, sizeof(tier)) &&
		   !strcmp(tier, "my-tier"),
	       "the tier of a ready stream's name");
	TAP_OK(!al_key_queue_tier("al:job:x", tier, sizeof(tier)) &&
		   !al_key_queue_tier("al:q:nocolon", tier, sizeof(tier)),
	       "names that are no ready stream are refused");

	/* COMMIT of two results: 8 keys first, then 12 arguments. */
	al_call_init(&c, al_lua_commit);
	al_commit_add(&c, &(struct al_commit_item){.id = "a",
						   .attempt = 2,
						   .result = "R\0a",
						   .len = 3,
						   .ttl_ms = 5,
						   .stream = "al:q:t:mid",
						   .entry = "1-0",
						   .group = "workers",
						   .status = "ok"});
	al_commit_add(&c, &(struct al_commit_item){.id = "b",
						   .attempt = 1,
						   .result = "S",
						   .len = 1,
						   .ttl_ms = 5,
						   .group = "workers",
						   .status = "sandbox_error"});
	TAP_OK(al_call_argv(&c, &argc, &argv, &lens) == 0 && argc == 3 + 8 + 12,
	       "COMMIT batch: EVALSHA sha nkeys + 8 keys + 12 arguments (argc %d)", argc);
	TAP_OK(!strcmp(argv[0], "EVALSHA") && !strcmp(argv[1], al_script_sha(al_lua_commit)) &&
		   !strcmp(argv[2], "8"),
	       "COMMIT batch: EVALSHA, the script's SHA1, 8 keys");
	TAP_OK(!strcmp(argv[3], "al:job:a") && !strcmp(argv[4], "al:res:a") &&
		   !strcmp(argv[5], "al:q:t:mid") && !strcmp(argv[6], "al:out:a") &&
		   !strcmp(argv[7], "al:job:b") && !strcmp(argv[9], "") &&
		   !strcmp(argv[10], "al:out:b"),
	       "COMMIT batch: each result's 4 keys in order (no entry: no stream; its live "
	       "output last, no done list)");
	TAP_OK(!strcmp(argv[11], "2") && lens[12] == 3 && !memcmp(argv[12], "R\0a", 3) &&
		   !strcmp(argv[17], "1") && !strcmp(arg(&c, 22), "sandbox_error"),
	       "COMMIT batch: attempts, binary result bytes, statuses");
	TAP_OK(al_call_items(&c, AL_COMMIT_KEYS) == 2, "COMMIT batch: two items");
	al_call_free(&c);

	/* A client writes only its submission's marker and idempotency key:
	 * those are SUBMIT's only keys (a script's declared keys need write
	 * rights; the intake and the record are named inside). */
	al_call_init(&c, al_lua_submit);
	al_submit_add(&c, &(struct al_submit_item){.id = "j",
						   .tier = "t",
						   .tenant = "acme",
						   .job = "J",
						   .joblen = 1,
						   .now_ms = 7,
						   .idem_key = "k",
						   .idem_ttl_s = 60});
	TAP_OK(!strcmp(arg(&c, 2), "2") && !strcmp(arg(&c, 3), "al:sub:j") &&
		   !strcmp(arg(&c, 4), "al:idem:acme/k") && !strcmp(arg(&c, 5), "j") &&
		   !strcmp(arg(&c, 11), "acme"),
	       "SUBMIT: 2 keys (marker, idempotency key), then id ... tenant");
	TAP_OK(strstr(al_lua_submit, "'XADD', 'al:intake'") &&
		   strstr(al_lua_submit, "'EXISTS', KEYS[K + 1], 'al:job:' .. id"),
	       "SUBMIT names the intake and the record inside");
	al_call_free(&c);
	al_lookup_call(&c, "j");
	TAP_OK(!strcmp(arg(&c, 0), "EVALSHA_RO") && !strcmp(arg(&c, 2), "2") &&
		   !strcmp(arg(&c, 3), "al:job:j") && !strcmp(arg(&c, 4), "al:sub:j"),
	       "LOOKUP: read only (EVALSHA_RO), the record then the marker");
	al_call_free(&c);
	al_await_call(&c, "j");
	TAP_OK(!strcmp(arg(&c, 0), "EVALSHA_RO") && !strcmp(arg(&c, 2), "2") &&
		   !strcmp(arg(&c, 3), "al:res:j") && !strcmp(arg(&c, 4), "al:out:j") &&
		   c.args.n == 0,
	       "AWAIT: read only (EVALSHA_RO), the result then the live output, no argument");
	al_call_free(&c);
	al_reject_call(&c, "j", "R", 1, 9, "5-1", "rejected");
	TAP_OK(!strcmp(arg(&c, 2), "5") && !strcmp(arg(&c, 5), "al:out:j") &&
		   !strcmp(arg(&c, 6), "al:sub:j") && !strcmp(arg(&c, 7), "al:intake") &&
		   !strcmp(arg(&c, 11), "5-1") && !strcmp(arg(&c, 12), "scheduler") &&
		   !strcmp(arg(&c, 13), "rejected"),
	       "REJECT: 5 keys (output, marker, intake last), entry, group, status");
	al_call_free(&c);
	al_cancel_request_call(&c, "j", "n1");
	TAP_OK(!strcmp(arg(&c, 0), "XADD") && !strcmp(arg(&c, 1), "al:intake") &&
		   !strcmp(arg(&c, 3), "cancel") && !strcmp(arg(&c, 4), "j") &&
		   !strcmp(arg(&c, 5), "reply") && !strcmp(arg(&c, 6), "n1"),
	       "a cancel request: XADD al:intake * cancel <id> reply <nonce>");
	al_call_free(&c);
	al_reply_wait_call(&c, "n1", 1500);
	TAP_OK(!strcmp(arg(&c, 0), "BLPOP") && !strcmp(arg(&c, 1), "al:reply:n1") &&
		   !strcmp(arg(&c, 2), "1.500"),
	       "its answer: BLPOP al:reply:<nonce> <seconds, to the millisecond>");
	al_call_free(&c);

	/* Dead letters: raw cut to AL_DLQ_RAW_MAX, the full size kept, bounded. */
	memset(raw, 'x', sizeof(raw));
	al_dlq_call(&c, 50, "why", "al:intake", "1-0", NULL, raw, sizeof(raw));
	TAP_OK(al_call_argv(&c, &argc, &argv, &lens) == 0 && !strcmp(argv[0], "XADD") &&
		   !strcmp(argv[2], "MAXLEN") && !strcmp(argv[3], "50"),
	       "dead letter: XADD al:dlq MAXLEN 50");
	TAP_OK(!strcmp(argv[argc - 3], "10000") && lens[argc - 1] == AL_DLQ_RAW_MAX,
	       "dead letter: size 10000, raw cut to %d bytes", AL_DLQ_RAW_MAX);
	al_call_free(&c);

	/* A plain command, and the tenant never in a counter script's keys. */
	al_reclaim_call(&c, "j1", "al:q:t:lo", "5-0", "workers", "3");
	TAP_OK(al_call_argv(&c, &argc, &argv, &lens) == 0 && !strcmp(argv[2], "3") &&
		   !strcmp(argv[5], "al:q:t:lo") && !strcmp(argv[argc - 1], "j1"),
	       "RECLAIM: 3 keys (no tenant key: the script reads it from the record), id last");
	al_call_free(&c);
	al_retry_call(&c, &(struct al_retry_item){.id = "j",
						  .stream = "s",
						  .entry = "e",
						  .group = "workers",
						  .attempt = 1,
						  .due_ms = 9});
	TAP_OK(!strcmp(arg(&c, 2), "3"), "RETRY: 3 keys, no tenant key");
	al_call_free(&c);
	al_cancel_call(&c, "j", "r", 1, 10, "3-0", "n1");
	TAP_OK(!strcmp(arg(&c, 2), "6") && !strcmp(arg(&c, 5), "al:out:j") &&
		   !strcmp(arg(&c, 6), "al:sub:j") && !strcmp(arg(&c, 7), "al:intake") &&
		   !strcmp(arg(&c, 8), "al:reply:n1") && !strcmp(arg(&c, 12), "scheduler") &&
		   !strcmp(arg(&c, 13), "3-0") && !strcmp(arg(&c, 14), "60000"),
	       "CANCEL: 6 keys (live output, marker, intake, reply list), no tenant or stats "
	       "key; group, the request's entry, the reply's TTL");
	al_call_free(&c);
	al_expire_call(&c, "j", "r", 1, 10);
	TAP_OK(!strcmp(arg(&c, 2), "4") && !strcmp(arg(&c, 5), "al:out:j") &&
		   !strcmp(arg(&c, 6), "al:deadlines"),
	       "EXPIRE: 4 keys, its live output then the deadlines");
	al_call_free(&c);
	al_call_free(NULL);
	check_plain_commands();
	check_job_states();
	{ /* every script the header declares is loaded at connect */
		FILE *f = fopen("proto/scripts.h", "r");
		char line[256];
		int declared = 0, loaded = 0;

		while (f && fgets(line, sizeof(line), f))
			declared += !strncmp(line, "extern const char al_lua_", 25);
		if (f)
			fclose(f);
		while (al_lua_all[loaded])
			loaded++;
		TAP_OK(declared > 0 && declared == loaded,
		       "al_lua_all holds every script scripts.h declares (%d of %d): each is "
		       "loaded at connect",
		       loaded, declared);
	}
	return tap_done();
}
