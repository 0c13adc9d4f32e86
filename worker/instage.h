/* instage.h - the inputs stage of a job (before its sandbox is made): runs
 * airlock-inputs (worker/inputs/) for the job's inputs by URL, watched on
 * the event loop, and hands back the inputs pack it made, or why not. */
#ifndef AL_WORKER_INSTAGE_H
#define AL_WORKER_INSTAGE_H

#include <event2/event.h>
#include <stdbool.h>

#include "../backends/backend.h"

struct wk_instage;

/* The stage is over: status is AL_ST_OK (pack: the inputs pack's path,
 * which the stage removes when freed), AL_ST_REJECTED (the job's inputs
 * are at fault: msg says how) or AL_ST_SANDBOX_ERROR (the host or the
 * network; cache_full: the host's input cache had no room); summary: what
 * to tell in the result ("2 (1 from the host's cache), 5208 bytes"). */
typedef void (*wk_instage_done_fn)(void *arg, int status, const char *msg, const char *pack,
				   const char *summary, bool cache_full);

/* Start fetching spec->job's inputs; NULL with err when the fetcher could
 * not start. done is called once, from the loop (never from here). */
struct wk_instage *wk_instage_start(struct event_base *base, const struct al_backend_conf *conf,
				    const struct al_run_spec *spec, wk_instage_done_fn done,
				    void *arg, struct al_err *err);
/* Stop it (the fetcher killed) and remove the pack. NULL is fine. */
void wk_instage_free(struct wk_instage *st);

/* AL_OK when the host's input cache has AL_INPUT_CACHE_ROOM_MIN bytes free
 * where it lies (or is not made yet); else AL_ESANDBOX, err naming the
 * cache and its file system's size and room. */
int wk_instage_cache_room(const struct al_backend_conf *conf, struct al_err *err);

/* Remove the packs a crashed run of this worker id left. */
void wk_instage_sweep(const struct al_backend_conf *conf);

#endif
