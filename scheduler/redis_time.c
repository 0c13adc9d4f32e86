/* redis_time.c - the scheduler's clock: Redis's TIME, read every tick and
 * followed on the monotonic clock between reads, so that every scheduler
 * (and the scripts) judge deadlines, retries and leases by one clock; a
 * step of it is noted, and a skew from this host's is logged. */
#include <stdlib.h>

#include "../common/aconn.h"
#include "../common/clock.h"
#include "../common/log.h"
#include "sched.h"

uint64_t sc_now_ms(const struct sched *s)
{
	return s->redis_at_mono ? s->redis_ms + (al_mono_ms() - s->redis_at_mono) : al_now_ms();
}

static void on_time(redisAsyncContext *ac, void *reply, void *priv)
{
	struct sched *s = priv;
	redisReply *r = reply;
	uint64_t ms, local;

	(void)ac;
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
	    r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING)
		return;
	ms = strtoull(r->element[0]->str, NULL, 10) * 1000 +
	     strtoull(r->element[1]->str, NULL, 10) / 1000;
	local = al_now_ms();
	if (s->redis_at_mono) { /* where Redis's clock should be now, by ours */
		uint64_t want = s->redis_ms + (al_mono_ms() - s->redis_at_mono);

		if ((want > ms ? want - ms : ms - want) > 1000) {
			s->redis_step_mono = al_mono_ms();
			al_log("warn", "redis_clock_step",
			       "scheduler=%s step_ms=%lld note=\"idle times are not trusted for "
			       "two leases; workers are judged by their heartbeats\"",
			       s->id, (long long)ms - (long long)want);
		}
	}
	if ((local > ms ? local - ms : ms - local) > 5000 &&
	    (!s->skew_logged_mono || al_mono_ms() - s->skew_logged_mono > 60000)) {
		s->skew_logged_mono = al_mono_ms();
		al_log("warn", "clock_skew",
		       "scheduler=%s skew_ms=%lld note=\"this host's clock and Redis's differ; "
		       "deadlines and retries follow Redis's\"",
		       s->id, (long long)(local - ms));
	}
	s->redis_ms = ms;
	s->redis_at_mono = al_mono_ms();
}

void sc_read_time(struct sched *s)
{
	const char *argv[] = {"TIME"};

	s->last_time_mono = al_mono_ms();
	al_aconn_cmd(s->cmd, on_time, s, 1, argv, NULL);
}
