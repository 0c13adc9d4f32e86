/* endstatus.c - how a job ended, as a result status (see endstatus.h). */
#include "endstatus.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>

void al_end_status(struct al_result *res, int ws, const struct al_cg_stats *st,
		   const struct al_limits *lim, bool disk_full)
{
	int sig = WIFSIGNALED(ws) ? WTERMSIG(ws) : 0;

	res->cpu_ms = st->cpu_ns / 1000000;
	res->peak_memory_bytes = st->peak_memory_bytes;
	res->signal = sig;
	res->has_exit_code = WIFEXITED(ws);
	res->exit_code = WIFEXITED(ws) ? WEXITSTATUS(ws) : 0;

	/* An OOM kill counted in the cgroup, or a SIGKILL with the memory
	 * limit reached (a runtime's cgroup may count the kill below ours). */
	if (st->oom_kills > 0 || (sig == SIGKILL && st->memory_hit)) {
		res->status = AL_ST_MEMORY_LIMIT;
		al_result_set_error(res,
				    "memory limit of %llu bytes reached: killed by the OOM killer",
				    (unsigned long long)lim->memory_bytes);
	} else if (sig == SIGXCPU || (sig == SIGKILL && res->cpu_ms >= lim->cpu_ms)) {
		res->status = AL_ST_CPU_LIMIT;
		al_result_set_error(res, "CPU-time limit of %llu ms reached",
				    (unsigned long long)lim->cpu_ms);
	} else if (sig == SIGXFSZ || res->out_truncated || res->err_truncated || disk_full) {
		res->status = AL_ST_OUTPUT_LIMIT;
		if (res->out_truncated || res->err_truncated) {
			/* its output was cut: what it exited with followed writes lost */
			res->has_exit_code = false;
			res->exit_code = 0;
		}
		if (res->out_truncated || res->err_truncated)
			al_result_set_error(
			    res, "output limit reached: %s over its cap of %llu bytes",
			    res->out_truncated ? "stdout" : "stderr",
			    (unsigned long long)(res->out_truncated ? lim->stdout_bytes
								    : lim->stderr_bytes));
		else
			al_result_set_error(res, "disk or file-size limit of %llu bytes reached",
					    (unsigned long long)lim->disk_bytes);
	} else if (WIFEXITED(ws) && WEXITSTATUS(ws) == 0) {
		res->status = AL_ST_OK;
	} else {
		res->status = AL_ST_NONZERO_EXIT;
	}
}
