/* bench_queue.c - queue benchmark client for tests/bench/run.sh.
 *   bench_queue URL throughput N TIER   submit N jobs pipelined, wait for all
 *                                       results; prints jobs/s
 *   bench_queue URL fill N TIER         the same submissions, no wait
 *   bench_queue URL latency N TIER      N jobs one at a time; prints p50/p99
 *                                       submit-to-result ms
 * The job is argv ["true"] (the noop backend ignores it); with
 * BENCH_ARG_BYTES=N in the environment, ["true", N bytes of 'x'] (a job
 * the size of a script sent inline). One JSON line. */
#include <hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../client/client.h"
#include "../../common/redis_url.h"
#include "../../proto/keys.h"
#include "../../proto/scripts.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void make_job(struct al_job *job, char *id, char *tier, char **argv)
{
	static char tenant[] = "bench";

	memset(job, 0, sizeof(*job));
	job->version = AL_PROTO_VERSION;
	job->id = id;
	job->tier = tier;
	job->tenant = tenant;
	job->argv = argv;
	job->argc = argv[1] ? 2 : 1;
	job->priority = AL_PRIORITY_DEFAULT;
}

int main(int argc, char **argv)
{
	struct al_err err = {0};
	char *targv[] = {(char *)"true", NULL, NULL};
	int pad = getenv("BENCH_ARG_BYTES") ? atoi(getenv("BENCH_ARG_BYTES")) : 0;
	struct al_client *c;
	int n;

	bool gw;

	if (argc != 5 || (n = atoi(argv[3])) <= 0) {
		fprintf(stderr,
			"usage: bench_queue URL throughput|fill|latency|submit N TIER\n"
			"  (URL http://...: through the gateway, the key in $AIRLOCK_TOKEN)\n");
		return 2;
	}
	if (pad > 0) {
		if (!(targv[1] = malloc((size_t)pad + 1)))
			return 1;
		memset(targv[1], 'x', (size_t)pad);
		targv[1][pad] = '\0';
	}
	gw = !strncmp(argv[1], "http", 4);
	c = gw ? al_client_connect_gateway(argv[1], getenv("AIRLOCK_TOKEN"), &err)
	       : al_client_connect(argv[1], &err);
	if (!c) {
		fprintf(stderr, "bench_queue: %s\n", err.msg);
		return 1;
	}
	if (!strcmp(argv[2], "latency")) {
		double *ms = calloc((size_t)n, sizeof(double));

		for (int i = 0; i < n; i++) {
			struct al_job job;
			struct al_result res;
			char id[AL_ID_MAX + 1], out[AL_ID_MAX + 1];
			bool existing;
			double t0 = now_s();

			snprintf(id, sizeof(id), "lat-%d-%d", (int)getpid(), i);
			make_job(&job, gw ? NULL : id, argv[4], targv); /* the gateway's ids */
			if (al_client_submit(c, &job, out, &existing, &err) ||
			    al_client_wait(c, out, 30000, &res, &err)) {
				fprintf(stderr, "bench_queue: %s\n", err.msg);
				return 1;
			}
			ms[i] = (now_s() - t0) * 1000;
			al_result_free(&res);
		}
		qsort(ms, (size_t)n, sizeof(double), cmp);
		printf("{\"n\":%d,\"p50_ms\":%.3f,\"p99_ms\":%.3f}\n", n, ms[n / 2],
		       ms[(int)(n * 0.99) < n ? (int)(n * 0.99) : n - 1]);
		free(ms);
	} else if (!strcmp(argv[2], "submit")) {
		/* One submission at a time, each answered, over one connection
		 * (kept alive through the gateway): the submission rate. */
		double t0 = now_s();

		for (int i = 0; i < n; i++) {
			struct al_job job;
			char id[AL_ID_MAX + 1], out[AL_ID_MAX + 1];
			bool existing;

			snprintf(id, sizeof(id), "sub-%d-%d", (int)getpid(), i);
			make_job(&job, gw ? NULL : id, argv[4], targv);
			if (al_client_submit(c, &job, out, &existing, &err)) {
				fprintf(stderr, "bench_queue: %s\n", err.msg);
				return 1;
			}
		}
		printf("{\"n\":%d,\"seconds\":%.3f,\"submits_per_s\":%.0f}\n", n, now_s() - t0,
		       n / (now_s() - t0));
	} else {
		/* Submissions in batches of 100 through the library (one round
		 * trip each), like BullMQ's addBulk. */
		redisContext *rc;
		double t0, t1;
		long long done = 0, base = 0;
		redisReply *r;
		struct al_redis_url u;
		enum { BATCH = 100 };
		static struct al_job jobs[BATCH];
		static char ids[BATCH][AL_ID_MAX + 1], out[BATCH][AL_ID_MAX + 1];
		static enum al_submit_code st[BATCH];

		/* the same Redis, to count the results (through its sentinels too) */
		if (al_redis_url_parse(argv[1], &u, &err) ||
		    (u.nsentinels && al_sentinel_resolve(&u, 500, NULL, &err))) {
			fprintf(stderr, "bench_queue: %s\n", err.msg);
			return 1;
		}
		rc = u.path[0] ? redisConnectUnix(u.path) : redisConnect(u.host, u.port);
		if (!rc || rc->err)
			return 1;
		r = redisCommand(rc, "HGET %s status:ok", AL_KEY_STATS);
		if (r && r->type == REDIS_REPLY_STRING)
			base = atoll(r->str);
		freeReplyObject(r);
		t0 = now_s();
		for (int i = 0; i < n; i += BATCH) {
			int m = n - i < BATCH ? n - i : BATCH;

			for (int k = 0; k < m; k++) {
				snprintf(ids[k], sizeof(ids[k]), "tp-%d-%d", (int)getpid(), i + k);
				make_job(&jobs[k], ids[k], argv[4], targv);
			}
			if (al_client_submit_many(c, jobs, (size_t)m, out, st, &err)) {
				fprintf(stderr, "bench_queue: %s\n", err.msg);
				return 1;
			}
		}
		while (strcmp(argv[2], "fill") && done < n) {
			struct timespec ts = {0, 2 * 1000 * 1000};

			nanosleep(&ts, NULL);
			r = redisCommand(rc, "HGET %s status:ok", AL_KEY_STATS);
			if (r && r->type == REDIS_REPLY_STRING)
				done = atoll(r->str) - base;
			freeReplyObject(r);
			if (now_s() - t0 > 300) {
				fprintf(stderr, "bench_queue: only %lld of %d done after 300 s\n",
					done, n);
				return 1;
			}
		}
		t1 = now_s();
		printf("{\"n\":%d,\"seconds\":%.3f,\"jobs_per_s\":%.0f}\n", n, t1 - t0,
		       n / (t1 - t0));
		redisFree(rc);
	}
	al_client_close(c);
	return 0;
}
