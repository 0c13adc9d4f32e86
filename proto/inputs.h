/* inputs.h - a job's inputs by reference: files and archives named by URL
 * and SHA-256, fetched by the worker (never the job) through its tier's
 * egress rules, verified, cached on the host by hash and unpacked into
 * the job's work directory before it starts. The job field "inputs". */
#ifndef AL_INPUTS_H
#define AL_INPUTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define AL_INPUTS_MAX	   16		/* inputs of one job */
#define AL_INPUT_URL_MAX   2048		/* an input's URL */
#define AL_INPUT_BYTES_DEF (1ull << 30) /* a tier's max_input_bytes unless set */
/* The input cache is full when its file system has less free than this:
 * a fetch that failed there is the host's fault, and the worker takes no
 * job with inputs until it has room again (worker/health.c). */
#define AL_INPUT_CACHE_ROOM_MIN (1u << 20)

enum al_unpack {
	AL_UNPACK_NONE = 0, /* the bytes as one file at path */
	AL_UNPACK_TAR,	    /* a tar (plain, gzip, xz, bzip2 or zstd) unpacked under path */
	AL_UNPACK_ZIP,	    /* a zip unpacked under path */
	AL_UNPACK_GIT,	    /* a git repository's commit (url, ref) checked out under path */
};

#define AL_GIT_REF_MAX 255 /* a git input's ref */

struct al_input {
	char *url;	 /* http:// or https://, at most AL_INPUT_URL_MAX (git: the repository's) */
	char sha256[65]; /* 64 lowercase hex digits: the fetched bytes' ("" for git) */
	char *path;	 /* relative: the file (none) or the directory (tar, zip);
			  * "." = the work directory itself (archives only) */
	enum al_unpack unpack;
	char *ref; /* git only: a branch, a tag, a full ref or a 40-hex commit id */
};

struct al_job;
struct msgpack_object;
struct msgpack_packer;

/* Decode the "inputs" array into job (caller frees with al_job_free, also
 * after an error). */
int al_inputs_decode(const struct msgpack_object *v, struct al_job *job, struct al_err *err);
/* The checks decode makes, on a job built in memory (with its files: an
 * input's path is no file's, and no input is another's). */
int al_inputs_validate(const struct al_job *job, struct al_err *err);
int al_inputs_pack(struct msgpack_packer *pk, const struct al_input *in, size_t n);
void al_inputs_free(struct al_input *in, size_t n);
const char *al_unpack_name(enum al_unpack u);
/* Whether s is a ref a git input takes: a 40-hex commit id, or a name of
 * letters, digits and "._/-" that git would take (no "..", no "//", no
 * leading "-" or "/", no trailing "/", "." or ".lock"). */
bool al_git_ref_ok(const char *s);

/* The URL's scheme, host and port, for the egress checks: host gets the
 * name or the literal address (no brackets), cap bytes; *https tells
 * the scheme. AL_EINVAL naming what is wrong (what names the field). */
int al_input_url_parse(const char *what, const char *url, char *host, size_t cap, unsigned *port,
		       int *https, struct al_err *err);

#endif
