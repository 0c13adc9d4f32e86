/* print.c - a result as the CLI prints it: the job's output (escaped on a
 * terminal), the live output as it comes, the verdict, a collected JUnit
 * report's counts, the egress summary, and the exit code for it. Calls
 * nothing of the CLI's other files but junit.c. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../proto/chunk.h"
#include "../proto/json.h"
#include "cli.h"
#include "junit.h"

int cli_exit_code_for(const struct al_result *r)
{
	switch (r->status) {
	case AL_ST_OK:
	case AL_ST_NONZERO_EXIT:
		if (r->has_exit_code)
			return r->exit_code;
		return r->signal ? 128 + r->signal : 1;
	case AL_ST_TIMEOUT: return EXIT_TIMEOUT;
	case AL_ST_MEMORY_LIMIT: return EXIT_MEMORY;
	case AL_ST_CPU_LIMIT: return EXIT_CPU;
	case AL_ST_OUTPUT_LIMIT: return EXIT_OUTPUT;
	case AL_ST_CANCELLED: return EXIT_CANCELLED;
	case AL_ST_REJECTED: return EXIT_REJECTED;
	case AL_ST_SANDBOX_ERROR: return EXIT_SANDBOX;
	case AL_ST_WORKER_LOST:
	case AL_ST_EXPIRED: return EXIT_LOST;
	case AL_ST_COMPILE_ERROR: return EXIT_COMPILE;
	case AL_ST_SESSION_ENDED: return EXIT_LOST; /* open another session */
	case AL_ST_COUNT: break;
	}
	return 1;
}

/* Write a job's bytes to f. On a terminal no control character goes out as
 * it is (escape sequences could move the cursor, clear the screen or hide
 * the verdict below): each is shown as \xHH, except newline and tab. Into a
 * pipe or file the bytes go unchanged. Returns the last byte written. */
static int emit(FILE *f, const char *data, size_t len)
{
	if (!isatty(fileno(f))) {
		fwrite(data ? data : "", 1, len, f);
		return len ? (unsigned char)data[len - 1] : '\n';
	}
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)data[i];

		if ((ch < 0x20 && ch != '\n' && ch != '\t') || ch == 0x7f)
			fprintf(f, "\\x%02x", ch);
		else
			fputc(ch, f);
	}
	return len ? (unsigned char)data[len - 1] : '\n';
}

int cli_on_chunk(const struct al_chunk *ch, void *arg)
{
	struct shown *sh = arg;

	/* a fenced-out worker's late output: an older attempt than one seen */
	if (ch->attempt && ch->attempt < sh->attempt && ch->kind != AL_CHUNK_END)
		return 0;
	if (ch->kind == AL_CHUNK_RESTART ||
	    (ch->attempt > sh->attempt && sh->attempt && ch->kind != AL_CHUNK_END)) {
		/* an attempt ended without its result: the job runs again */
		fflush(stdout);
		fprintf(stderr, "%sairlock: the job runs again; its output starts over\n",
			sh->last[2] == '\n' ? "" : "\n");
		sh->n[1] = sh->n[2] = 0;
		sh->last[1] = sh->last[2] = '\n';
	}
	if (ch->attempt && ch->kind != AL_CHUNK_END)
		sh->attempt = ch->attempt;
	if (ch->kind == AL_CHUNK_STDOUT || ch->kind == AL_CHUNK_STDERR) {
		FILE *f = ch->kind == AL_CHUNK_STDOUT ? stdout : stderr;

		sh->last[ch->kind] = emit(f, ch->data, ch->len);
		sh->n[ch->kind] += ch->len;
		fflush(f);
	}
	return 0;
}

/* The result; with sh, only what the live output did not show already. */
int cli_print_result(const struct al_result *r, bool json, const struct shown *sh)
{
	if (json) {
		json_t *j = al_result_to_json(r);

		if (!j) {
			fprintf(stderr, "airlock: out of memory making the result's JSON\n");
			return 1;
		}
		json_dumpf(j, stdout, JSON_SORT_KEYS | JSON_INDENT(2));
		putchar('\n');
		json_decref(j);
	} else {
		size_t so = sh && sh->n[1] <= r->out.len ? (size_t)sh->n[1] : 0;
		size_t se = sh && sh->n[2] <= r->err.len ? (size_t)sh->n[2] : 0;
		int last_out = so == r->out.len && sh
				   ? sh->last[1]
				   : emit(stdout, r->out.data + so, r->out.len - so);
		int last_err = se == r->err.len && sh
				   ? sh->last[2]
				   : emit(stderr, r->err.data + se, r->err.len - se);
		bool verdict = r->status != AL_ST_OK && r->status != AL_ST_NONZERO_EXIT;

		fflush(stdout);
		/* the CLI's own line starts a line of its own */
		if ((verdict || r->out_truncated || r->err_truncated) &&
		    (last_err != '\n' ||
		     (last_out != '\n' && isatty(fileno(stdout)) && isatty(fileno(stderr)))))
			fputc('\n', stderr);
		if (verdict) {
			fprintf(stderr, "airlock: job %s: %s: ", r->id, al_status_name(r->status));
			emit(stderr, r->error ? r->error : "", r->error ? strlen(r->error) : 0);
			fputc('\n', stderr);
		} else if (r->out_truncated || r->err_truncated) {
			fprintf(stderr, "airlock: job %s: output was truncated\n", r->id);
		}
		for (size_t i = 0; i < r->nfiles; i++) {
			const struct al_out_file *f = &r->files[i];
			struct cli_junit j;
			size_t pl = strlen(f->path);

			if (pl < 4 || strcmp(f->path + pl - 4, ".xml") ||
			    !cli_junit_counts(f->data.data, f->data.len, &j))
				continue;
			/* a collected JUnit report: its counts on a line */
			fprintf(stderr, "tests: %llu passed, %llu failed, %llu skipped (",
				(unsigned long long)j.passed, (unsigned long long)j.failed,
				(unsigned long long)j.skipped);
			for (const char *c = f->path; *c; c++)
				fputc(*c >= 0x20 && *c < 0x7f ? *c : '?', stderr);
			fputs(")\n", stderr);
		}
		if (r->negress) {
			size_t ok = 0;

			for (size_t i = 0; i < r->negress; i++)
				ok += r->egress[i].allowed;
			fprintf(stderr, "egress: %zu allowed, %zu denied (--json lists them)\n", ok,
				r->negress - ok);
		}
	}
	return cli_exit_code_for(r);
}
