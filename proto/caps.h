/* caps.h - what each backend can enforce or give (AL_CAP_*), in one table:
 * each backend's ops table takes its bits from here (AL_CAPS_<BACKEND>),
 * and so does the policy (al_caps_of), which must refuse what a backend
 * cannot do in the scheduler too, a daemon that links no backend. Here,
 * below both (data only, no I/O), so that common/ needs nothing of
 * backends/. */
#ifndef AL_CAPS_H
#define AL_CAPS_H

#include <string.h>

enum {
	AL_CAP_NO_NETWORK = 1u << 0, /* can give a job no network at all */
	AL_CAP_EGRESS = 1u << 1,     /* can give a job outbound network */
	AL_CAP_MEMORY = 1u << 2,     /* enforces memory limits */
	AL_CAP_PIDS = 1u << 3,	     /* enforces process-count limits */
	AL_CAP_CPU = 1u << 4,	     /* enforces CPU limits */
	AL_CAP_FILES = 1u << 5,	     /* input and collected output files */
	AL_CAP_OWN_KERNEL = 1u << 6, /* the job runs on its own kernel */
	AL_CAP_SERVICE = 1u << 7,    /* the sandbox outlives the result (service VMs) */
	/* grading jobs (proto/grade.h): the worker runs the build and then each
	 * test as a sandbox of its own, all sharing the job's build tree
	 * (al_run_spec.grade_tree) */
	AL_CAP_GRADE = 1u << 8,
	/* grading jobs, run whole inside one sandbox (the microVM's agent runs
	 * the build and each test in a cgroup and uid of its own) */
	AL_CAP_GRADE_INSIDE = 1u << 9,
	/* sessions (proto/call.h): the sandbox stays up for calls, its
	 * session server reached through al_watch.session_fd */
	AL_CAP_SESSION = 1u << 10,
	/* a session's sandbox saved whole (memory, devices, files) and started
	 * again from that: pause, resume, fork (the snapshot op) */
	AL_CAP_SNAPSHOT = 1u << 11,
};

#define AL_CAPS_PROCESS                                                                            \
	(AL_CAP_NO_NETWORK | AL_CAP_EGRESS | AL_CAP_MEMORY | AL_CAP_PIDS | AL_CAP_CPU |            \
	 AL_CAP_FILES | AL_CAP_GRADE | AL_CAP_SESSION)
#define AL_CAPS_CONTAINER                                                                          \
	(AL_CAP_NO_NETWORK | AL_CAP_EGRESS | AL_CAP_MEMORY | AL_CAP_PIDS | AL_CAP_CPU |            \
	 AL_CAP_FILES | AL_CAP_GRADE | AL_CAP_SESSION)
#define AL_CAPS_MICROVM                                                                            \
	(AL_CAP_NO_NETWORK | AL_CAP_EGRESS | AL_CAP_MEMORY | AL_CAP_PIDS | AL_CAP_CPU |            \
	 AL_CAP_FILES | AL_CAP_OWN_KERNEL | AL_CAP_GRADE_INSIDE | AL_CAP_SESSION |                 \
	 AL_CAP_SNAPSHOT)
#define AL_CAPS_VM                                                                                 \
	(AL_CAP_MEMORY | AL_CAP_CPU | AL_CAP_OWN_KERNEL | AL_CAP_SERVICE | AL_CAP_NO_NETWORK |     \
	 AL_CAP_EGRESS)
#define AL_CAPS_NOOP 0u

/* The backends by name, with their bits. */
struct al_caps_entry {
	const char *name;
	unsigned caps;
};
static const struct al_caps_entry al_caps_table[] = {
    {"process", AL_CAPS_PROCESS}, {"container", AL_CAPS_CONTAINER}, {"microvm", AL_CAPS_MICROVM},
    {"vm", AL_CAPS_VM},		  {"noop", AL_CAPS_NOOP},
};

/* The entry of the backend named name, or NULL when no backend has it. */
static inline const struct al_caps_entry *al_caps_find(const char *name)
{
	for (size_t i = 0; i < sizeof(al_caps_table) / sizeof(al_caps_table[0]); i++)
		if (!strcmp(name, al_caps_table[i].name))
			return &al_caps_table[i];
	return NULL;
}

/* The bits of the backend named name (0 for an unknown name). */
static inline unsigned al_caps_of(const char *name)
{
	const struct al_caps_entry *e = al_caps_find(name);

	return e ? e->caps : 0;
}

#endif
