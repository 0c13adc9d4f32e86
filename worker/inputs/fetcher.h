/* fetcher.h - what airlock-inputs' parts share, in fetcher.c (its names
 * carry fx_: the helper is a program of its own, and none of them may read
 * as another part of the tree's): the inputs of the run, the tier's rules,
 * the cache and the one way out (fx_die). main.c holds the URL inputs and
 * the pack, git.c the git inputs; both call down into fetcher.c. */
#ifndef AL_INPUTS_FETCHER_H
#define AL_INPUTS_FETCHER_H

#include <openssl/evp.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "../../common/egress.h"
#include "../../proto/buf.h"
#include "../../proto/inputs.h"

struct input {
	const char *url, *sha256, *path;
	const char *ref; /* git: the ref (sha256 is NULL) */
	enum al_unpack unpack;
	uint64_t bytes;
	bool cached;
	int fd;		 /* the cached file, read-only */
	char commit[41]; /* git: the commit checked out */
};

struct fetcher {
	const char *cache, *out, *ca, *ca_extra, *ca_into;
	uint64_t cache_bytes, max_bytes, timeout_ms;
	uid_t uid; /* git runs as it (the slot's own: never root) */
	struct al_egress_rule rules[AL_EGRESS_RULES_MAX];
	size_t nrules;
	struct input in[AL_INPUTS_MAX];
	size_t nin;
	char *ca_blob;
	size_t ca_len;
	char part[4096];      /* a download not verified yet ("" = none) */
	bool cache_full;      /* the answer says so (fx_cache_room_or_die) */
	void (*on_die)(void); /* what fx_die undoes first (main sets git.c's) */
};

extern struct fetcher fx;

/* One connection's checks and state. */
struct fetch {
	size_t i;
	const char *host; /* the URL's host: a name, or a literal address */
	bool literal;
	unsigned port;
	int fd;
	uint64_t got;
	EVP_MD_CTX *md;
	char refused[300]; /* why the connection was not made */
	bool too_big;
};

/* The one answer: {"ok":true,"inputs":[...],"pack_bytes":N} (ok), else
 * {"ok":false,"status":...,"error":msg}; then exit. */
void fx_answer(bool ok, const char *status, const char *msg, uint64_t pack_bytes)
    __attribute__((noreturn));
/* 64 lowercase hex digits: a SHA-256 as the cache names it */
bool fx_hex64(const char *s);
/* The one answer {"ok":false,...} and exit: status "rejected" (the job's
 * fault) or "sandbox_error". */
void fx_die(const char *status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));
/* When the cache's file system has less than AL_INPUT_CACHE_ROOM_MIN
 * bytes free (a write there failed for want of room, which git reports as
 * whatever it was doing), die with a sandbox_error that names the cache and
 * its size, the answer marked "cache_full": the host's fault, never the
 * job's. */
void fx_cache_room_or_die(const char *what);
/* url against the rules (its name's, or a range rule for a literal, at
 * the port), filling f's host and port; dies when they do not let it out. */
void fx_check_url(struct fetch *f, const char *what, const char *url, char *host, size_t cap);
/* Whether the rules let a connection to sa out (f->refused says why not). */
bool fx_addr_ok(struct fetch *f, const struct sockaddr *sa);
/* The cache's file named key into in[i].fd (and now recently used):
 * false when the cache holds none; dies when it is over max_bytes. */
bool fx_cache_take(size_t i, const char *key);
/* Least recently used out until the cache holds at most cache_bytes. */
void fx_evict(void);
/* fx.part named for in[i]'s download: the file the fetch writes. */
const char *fx_cache_part(size_t i);
/* fx.part, complete and checked, into the cache as key and in[i].fd. */
void fx_cache_put(size_t i, const char *key);

/* git.c: in[i], a git input, into the cache (a tar of its tree and its
 * .git) and in[i].fd. */
void fx_git_get(size_t i);
/* The working directory of a git run that fx_die() leaves, removed. */
void fx_git_cleanup(void);

#endif
