/* endstatus.h - turning how a job ended into a result status, the same way for
 * every backend that runs jobs in a cgroup. */
#ifndef AL_ENDSTATUS_H
#define AL_ENDSTATUS_H

#include <stdbool.h>

#include "../proto/job.h"
#include "../proto/result.h"
#include "cgroup.h"

/* Fill res->status, exit_code/signal, cpu_ms, peak_memory_bytes and error
 * from a wait status and the cgroup's counters. Precedence: memory (OOM
 * kill) > CPU (SIGXCPU, or killed past the CPU limit) > output (SIGXFSZ, a
 * stream over its cap, a full disk) > the exit code or signal. Output
 * streams must already be in res. */
void al_end_status(struct al_result *res, int wait_status, const struct al_cg_stats *st,
		   const struct al_limits *lim, bool disk_full);

#endif
