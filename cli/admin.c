/* admin.c - the operator's verbs: stats, dlq and vm, each one call of the
 * client library (client/admin.h) that returns data, printed here one
 * "key value" line per row (the formats README.md shows). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../client/admin.h"
#include "../common/opt.h"
#include "cli.h"

/* The call's failure: its line, and the exit code (1: bad input). */
static int failed(const struct al_err *err)
{
	fprintf(stderr, "airlock: %s\n", err->msg);
	return err->code == AL_EINVAL ? 1 : EXIT_UNAVAILABLE;
}

static void print_stats(const struct al_stats *s)
{
	for (size_t i = 0; i < s->nqueues; i++)
		printf("queue %s queued=%lld running=%lld\n", s->queues[i].name,
		       s->queues[i].queued, s->queues[i].running);
	for (size_t i = 0; i < s->nschedulers; i++)
		printf("scheduler %s policy=%s\n", s->schedulers[i].id, s->schedulers[i].about);
	for (size_t i = 0; i < s->nworkers; i++)
		printf("worker %s %s\n", s->workers[i].id, s->workers[i].about);
	for (size_t i = 0; i < s->nmismatched; i++)
		printf("policy_mismatch worker=%s policy=%s schedulers=%s%s "
		       "note=\"reload it (SIGHUP) or restart it\"\n",
		       s->mismatched[i].id,
		       s->mismatched[i].about[0] ? s->mismatched[i].about : "unknown",
		       s->schedulers[0].about, s->nschedulers > 1 ? ",..." : "");
	if (s->dead_letters >= 0)
		printf("dead_letters %lld\n", s->dead_letters);
	for (size_t i = 0; i < s->ncounters; i++)
		printf("%s %s\n", s->counters[i].key, s->counters[i].value);
}

int cli_stats(const struct cli_where *where, int argc, char **argv)
{
	struct al_err err = {0};
	struct al_stats s;
	struct al_client *c;
	int rc = 0;

	(void)argc;
	(void)argv;
	if (!(c = cli_connect(where, &rc)))
		return rc;
	if (al_client_stats(c, &s, &err)) {
		rc = err.code == AL_EINVAL ? 1 : EXIT_UNAVAILABLE;
		fprintf(stderr, "airlock: %s\n", err.msg);
	} else {
		print_stats(&s);
		al_stats_free(&s);
	}
	al_client_close(c);
	return rc;
}

/* A dead letter on a line: its id, then key=value, each byte that is not
 * printable ASCII as \xHH; raw (the job) only as its size unless full. */
static void print_letter(const struct al_dlq_entry *e, bool full)
{
	printf("%s", e->id);
	for (size_t k = 0; k < e->nfields; k++) {
		const struct al_dlq_field *f = &e->fields[k];

		if (!strcmp(f->key, "raw") && !full) {
			printf(" raw=<%zu bytes>", f->len);
			continue;
		}
		printf(" %s=", f->key);
		for (size_t j = 0; j < f->len; j++) {
			unsigned char ch = (unsigned char)f->value[j];

			if (ch >= 0x20 && ch < 0x7f && ch != '\\')
				putchar(ch);
			else
				printf("\\x%02x", ch);
		}
	}
	putchar('\n');
}

int cli_dlq(const struct cli_where *where, int argc, char **argv)
{
	const char *op = argv[1], *id = argc == 3 ? argv[2] : NULL;
	bool list = !strcmp(op, "list") && !id, purge = !strcmp(op, "purge") && !id;
	bool show = !strcmp(op, "show") && id, retry = !strcmp(op, "retry") && id;
	struct al_err err = {0};
	struct al_client *c;
	struct al_dlq d = {0};
	int rc = 0;

	if (!list && !purge && !show && !retry) {
		fprintf(stderr, "airlock: dlq: expected list, show ID, retry ID or purge\n");
		return 1;
	}
	if (!(c = cli_connect(where, &rc)))
		return rc;
	if (list    ? al_client_dlq_list(c, &d, &err)
	    : show  ? al_client_dlq_show(c, id, &d, &err)
	    : retry ? al_client_dlq_retry(c, id, &err)
		    : al_client_dlq_purge(c, &err))
		rc = failed(&err);
	else if (retry)
		printf("re-submitted %s\n", id);
	else if (purge)
		printf("purged\n");
	for (size_t i = 0; !rc && i < d.n; i++)
		print_letter(&d.entries[i], show);
	al_dlq_free(&d);
	al_client_close(c);
	return rc;
}

static int vm_list(struct al_client *c)
{
	struct al_err err = {0};
	struct al_vms v;

	if (al_client_vm_list(c, &v, &err))
		return failed(&err);
	for (size_t i = 0; i < v.n; i++) {
		printf("%s", v.vms[i].name);
		for (size_t k = 0; k < v.vms[i].nfields; k++)
			printf(" %s=%s", v.vms[i].fields[k].key, v.vms[i].fields[k].value);
		putchar('\n');
	}
	al_vms_free(&v);
	return 0;
}

int cli_vm(const struct cli_where *where, int argc, char **argv)
{
	const char *op = argv[1], *name = argc >= 3 ? argv[2] : NULL;
	struct al_err err = {0};
	struct al_client *c;
	uint64_t ms = 0, until = 0;
	bool capped = false;
	int rc = 0;

	if (argc == 4 && !al_parse_u64(argv[3], 1, UINT64_MAX, &ms)) {
		fprintf(stderr, "airlock: vm extend: expected a number of ms, got \"%s\"\n",
			argv[3]);
		return EXIT_USAGE;
	}
	if (strcmp(op, "list") && strcmp(op, "stop") && strcmp(op, "extend")) {
		fprintf(stderr, "airlock: vm: expected list, stop NAME or extend NAME MS\n");
		return 1;
	}
	if (!(c = cli_connect(where, &rc)))
		return rc;
	if (!strcmp(op, "list"))
		rc = vm_list(c);
	else if (!strcmp(op, "stop") ? al_client_vm_stop(c, name, &err)
				     : al_client_vm_extend(c, name, ms, &until, &capped, &err))
		rc = failed(&err);
	else if (!strcmp(op, "stop"))
		printf("%s stopping\n", name);
	else
		printf("%s expires_ms=%llu%s\n", name, (unsigned long long)until,
		       capped ? " (the policy's maximum lease)" : "");
	al_client_close(c);
	return rc;
}
