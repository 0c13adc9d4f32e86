/* slots.c - the slot table: each backend's slots (jobs running) and places
 * (prefetched jobs held), what they hold and how they change hands:
 * queries, a released slot, a held job, a held job given back to its
 * queue. Starting held jobs in freed slots is jobs.c's, asked through the
 * loop pass (worker.h). */
#include <stdlib.h>
#include <string.h>

#include "../common/clock.h"
#include "worker.h"

/* Slots and places of a backend. */
unsigned wk_nplaces(const struct worker *w)
{
	return w->conf->slots + w->conf->prefetch;
}

bool wk_is_place(const struct slot *s)
{
	return (unsigned)s->index >= s->w->conf->slots;
}

/* Slots running (or about to run) a job; first..last-1 of each backend. */
static unsigned count_busy(struct worker *w, unsigned first, unsigned last)
{
	unsigned n = 0;

	for (int b = 0; b < w->nbackends; b++)
		for (unsigned i = first; i < last; i++)
			n += w->backends[b].slots[i].busy;
	return n;
}

unsigned wk_busy_slots(struct worker *w)
{
	return count_busy(w, 0, w->conf->slots);
}

unsigned wk_held_jobs(struct worker *w)
{
	return count_busy(w, w->conf->slots, wk_nplaces(w));
}

/* Nothing left to run, hold or send. */
bool wk_idle(struct worker *w)
{
	return !w->commits && !w->inflight && count_busy(w, 0, wk_nplaces(w)) == 0;
}

bool wk_serves(const struct worker *w, const char *tier)
{
	bool served = w->conf->ntiers == 0;

	for (unsigned k = 0; k < w->conf->ntiers; k++)
		served |= !strcmp(w->conf->tiers[k], tier);
	return served;
}

struct backend_state *wk_backend_for(struct worker *w, const char *name)
{
	for (int b = 0; b < w->nbackends; b++)
		if (!strcmp(w->backends[b].ops->name, name))
			return &w->backends[b];
	return NULL;
}

void wk_slot_release(struct slot *s)
{
	struct worker *w = s->w;

	if (s->runner)
		wk_runner_free(s->runner);
	s->runner = NULL;
	if (s->have_job)
		al_job_free(&s->job);
	s->have_job = false;
	s->busy = false;
	s->waiting = false;
	s->released = false;
	if (!wk_is_place(s)) {
		s->be->hold_off = false;
		s->be->dispatch_wanted = true;
	}
	wk_pass_want(w, WK_PASS_DISPATCH | WK_PASS_EXIT | WK_PASS_FETCH);
}

/* Put the job of place p back in its queue for any worker, same attempt. */
void wk_give_back(struct worker *w, struct slot *p)
{
	wk_retry_later(w, p, 0, false);
	wk_slot_release(p);
}

/* A job's band, from its stream's name (al:q:<tier>:<band>): 0 high, 1 mid,
 * 2 low. */
static int band_of(const char *stream)
{
	const char *b = strrchr(stream, ':');

	for (int i = 0; b && i < AL_BANDS; i++)
		if (!strcmp(b + 1, al_band_name(i)))
			return i;
	return AL_BANDS;
}

/* Place p got its job: hold it until a slot frees (at once if one is free). */
void wk_hold(struct worker *w, struct slot *p)
{
	if (w->draining || wk_health_paused(p->be)) { /* paused: unspent, for others */
		wk_give_back(w, p);
		return;
	}
	p->waiting = true;
	p->held_ms = al_now_ms();
	p->seq = ++w->held_seq;
	p->band = band_of(p->stream);
	p->be->dispatch_wanted = true; /* at once if a slot is free */
	wk_pass_want(w, WK_PASS_DISPATCH);
}
