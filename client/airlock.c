/* airlock.c - the `airlock` command-line client. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: airlock COMMAND ...\n"
		   "  check-job FILE|-    decode a msgpack job and print it as JSON, or say why not\n"
		   "  version             print the protocol version\n");
}

static int read_file(const char *path, struct al_buf *b)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
	char chunk[65536];
	size_t n;

	if (!f) {
		fprintf(stderr, "airlock: cannot open %s: %s\n", path, strerror(errno));
		return -1;
	}
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		if (b->len + n > AL_JOB_MAX_BYTES || al_buf_append(b, chunk, n)) {
			fprintf(stderr, "airlock: %s: larger than %u bytes\n", path, AL_JOB_MAX_BYTES);
			break;
		}
	}
	if (f != stdin)
		fclose(f);
	return b->len > AL_JOB_MAX_BYTES ? -1 : 0;
}

static int cmd_check_job(const char *path)
{
	struct al_buf b = { 0 };
	struct al_job job;
	struct al_err err = { 0 };
	json_t *j;
	int rc = 1;

	if (read_file(path, &b))
		goto out;
	if (al_job_decode(b.data, b.len, &job, &err)) {
		fprintf(stderr, "airlock: %s: invalid job: %s\n", path, err.msg);
		goto out;
	}
	j = al_job_to_json(&job);
	json_dumpf(j, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
	putchar('\n');
	json_decref(j);
	al_job_free(&job);
	rc = 0;
out:
	al_buf_free(&b);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0) {
		printf("airlock protocol %d\n", AL_PROTO_VERSION);
		return 0;
	}
	if (strcmp(argv[1], "check-job") == 0 && argc == 3)
		return cmd_check_job(argv[2]);
	if (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "airlock: unknown command or arguments: %s\n", argv[1]);
	usage(stderr);
	return 2;
}
