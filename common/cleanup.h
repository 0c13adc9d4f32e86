/* cleanup.h - what a local owns is let go when it goes out of scope
 * (crun's cleanup_free / cleanup_close): a declaration says it once, and no
 * early return can leak it or needs a copy of the free call.
 *
 *	cleanup_close int fd = open(...);	closed if >= 0
 *	cleanup_free char *buf = malloc(n);	freed (NULL is fine)
 *	cleanup_fclose FILE *f = fopen(...);	closed if not NULL
 *
 * A function that hands the resource on takes it out first, so the cleanup
 * finds nothing: return al_take_fd(&fd); out->data = al_take_ptr(&buf).
 * Teardown of what a struct holds: al_closep(&st->fd) closes and marks. */
#ifndef AL_CLEANUP_H
#define AL_CLEANUP_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline void al_cleanup_freep(void *p)
{
	free(*(void **)p);
}

/* Close *fd if open and mark it closed (-1): teardown of an fd a struct
 * holds, and the cleanup of cleanup_close. errno survives: a cleanup runs
 * after the failing call that set it. */
static inline void al_closep(int *fd)
{
	int saved = errno;

	if (*fd >= 0)
		close(*fd);
	*fd = -1;
	errno = saved;
}

static inline void al_cleanup_fclosep(FILE **f)
{
	int saved = errno;

	if (*f)
		fclose(*f);
	errno = saved;
}

#define cleanup_free   __attribute__((cleanup(al_cleanup_freep)))
#define cleanup_close  __attribute__((cleanup(al_closep)))
#define cleanup_fclose __attribute__((cleanup(al_cleanup_fclosep)))

/* The fd, now the caller's: the cleanup of *fd closes nothing. */
static inline int al_take_fd(int *fd)
{
	int v = *fd;

	*fd = -1;
	return v;
}

/* The pointer, now the caller's: the cleanup of *p frees nothing. */
static inline void *al_take_ptr(void *p)
{
	void *v = *(void **)p;

	*(void **)p = NULL;
	return v;
}

#endif
