/* jobfs_layout.h - the directories of a job's tmpfs (see jobfs.h), shared
 * with the static sandbox init, which includes nothing else of the worker.
 *
 * One tmpfs of the job's disk limit holds every byte a job may store: its
 * work directory, its /tmp (where the work dir is not /tmp already) and its
 * /dev/shm are directories of it, so one budget covers them all. */
#ifndef AL_JOBFS_LAYOUT_H
#define AL_JOBFS_LAYOUT_H

#define AL_JOBFS_WORK "work" /* input files, cwd, HOME; collected from here (0700, the job's) */
#define AL_JOBFS_TMP  "tmp"  /* the job's /tmp where that is not the work dir (1777) */
#define AL_JOBFS_SHM  "shm"  /* the job's /dev/shm (1777) */

#endif
