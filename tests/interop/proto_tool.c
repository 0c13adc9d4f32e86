/* proto_tool.c - test helper for the interop test: the C side of the wire.
 *   proto_tool decode-job      msgpack job on stdin  -> JSON on stdout
 *   proto_tool encode-result   JSON result on stdin  -> msgpack on stdout
 *   proto_tool script NAME     the text of a queue script (submit, cancel, ...)
 * On a decode error it prints "error: <message>" on stdout and exits 1. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../proto/json.h"
#include "../../proto/scripts.h"

static int read_all(FILE *f, struct al_buf *b)
{
	char chunk[65536];
	size_t n;

	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		if (al_buf_append(b, chunk, n))
			return -1;
	return ferror(f) ? -1 : 0;
}

static int decode_job(const struct al_buf *in)
{
	struct al_job job;
	struct al_err err = {0};
	json_t *j;

	if (al_job_decode(in->data, in->len, &job, &err)) {
		printf("error: %s\n", err.msg);
		return 1;
	}
	if (!(j = al_job_to_json(&job))) {
		printf("error: out of memory\n");
		al_job_free(&job);
		return 1;
	}
	json_dumpf(j, stdout, JSON_SORT_KEYS);
	putchar('\n');
	json_decref(j);
	al_job_free(&job);
	return 0;
}

static char *jstr(const json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));

	return s ? strdup(s) : NULL;
}

static uint64_t jint(const json_t *o, const char *k)
{
	return (uint64_t)json_integer_value(json_object_get(o, k));
}

static int encode_result(const struct al_buf *in)
{
	struct al_result res = {0};
	struct al_err err = {0};
	struct al_buf out = {0};
	json_error_t jerr;
	json_t *j = json_loadb(in->data, in->len, 0, &jerr), *v, *files, *info;
	const char *k;
	size_t i;
	int rc = 1;

	if (!j) {
		printf("error: bad JSON: %s\n", jerr.text);
		return 1;
	}
	res.version = (uint32_t)jint(j, "v");
	res.id = jstr(j, "id");
	res.attempt = (uint32_t)jint(j, "attempt");
	res.status =
	    (enum al_status_code)al_status_parse(json_string_value(json_object_get(j, "status")));
	v = json_object_get(j, "exit_code");
	res.has_exit_code = json_is_integer(v);
	res.exit_code = (int32_t)json_integer_value(v);
	res.signal = (int32_t)jint(j, "signal");
	al_json_get_bytes(j, "stdout", &res.out);
	al_json_get_bytes(j, "stderr", &res.err);
	res.out_truncated = json_is_true(json_object_get(j, "stdout_truncated"));
	res.err_truncated = json_is_true(json_object_get(j, "stderr_truncated"));
	files = json_object_get(j, "files");
	res.nfiles = json_array_size(files);
	res.files = calloc(res.nfiles + 1, sizeof(*res.files));
	json_array_foreach(files, i, v)
	{
		res.files[i].path = jstr(v, "path");
		al_json_get_bytes(v, "data", &res.files[i].data);
		res.files[i].truncated = json_is_true(json_object_get(v, "truncated"));
	}
	res.wall_ms = jint(j, "wall_ms");
	res.cpu_ms = jint(j, "cpu_ms");
	res.peak_memory_bytes = jint(j, "peak_memory_bytes");
	res.backend = jstr(j, "backend");
	res.worker = jstr(j, "worker");
	res.queued_ms = jint(j, "queued_ms");
	res.started_ms = jint(j, "started_ms");
	res.finished_ms = jint(j, "finished_ms");
	res.error = jstr(j, "error");
	info = json_object_get(j, "info");
	json_object_foreach(info, k, v) al_result_add_info(&res, k, json_string_value(v));
	if (al_result_encode(&res, &out, &err)) {
		printf("error: %s\n", err.msg);
		goto out;
	}
	fwrite(out.data, 1, out.len, stdout);
	rc = 0;
out:
	al_buf_free(&out);
	al_result_free(&res);
	json_decref(j);
	return rc;
}

int main(int argc, char **argv)
{
	struct al_buf in = {0};
	int rc;

	if (argc == 3 && !strcmp(argv[1], "script")) {
		static const struct {
			const char *name, *text;
		} all[] = {
		    {"submit", al_lua_submit},
		    {"admit", al_lua_admit},
		    {"claim", al_lua_claim},
		    {"fetch", al_lua_fetch},
		    {"commit", al_lua_commit},
		    {"retry", al_lua_retry},
		    {"promote", al_lua_promote},
		    {"reclaim", al_lua_reclaim},
		    {"cancel", al_lua_cancel},
		    {"expire", al_lua_expire},
		    {"trim", al_lua_trim},
		    {"await", al_lua_await},
		    {"give_back", al_lua_give_back},
		    {"lookup", al_lua_lookup},
		    {"workers", al_lua_workers},
		    {"vm_end_due", al_lua_vm_end_due},
		    {"vm_end_one", al_lua_vm_end_one},
		    {"session_call", al_lua_session_call},
		    {"reject", al_lua_reject},
		};

		for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
			if (!strcmp(all[i].name, argv[2])) {
				fputs(all[i].text, stdout);
				return 0;
			}
		fprintf(stderr, "proto_tool: no script \"%s\"\n", argv[2]);
		return 2;
	}
	if (argc != 2 || read_all(stdin, &in)) {
		fprintf(stderr, "usage: proto_tool decode-job|encode-result < input\n");
		return 2;
	}
	if (strcmp(argv[1], "decode-job") == 0)
		rc = decode_job(&in);
	else if (strcmp(argv[1], "encode-result") == 0)
		rc = encode_result(&in);
	else
		rc = 2;
	al_buf_free(&in);
	return rc;
}
