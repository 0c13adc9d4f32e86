/* instage.c - a job's inputs by URL, fetched before its sandbox (instage.h). */
#include "instage.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <ftw.h>
#include <linux/close_range.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../backends/jobfs.h"
#include "../backends/jobspec.h"
#include "../common/cleanup.h"
#include "../common/egress.h"
#include "../common/log.h"
#include "../proto/inputs.h"
#include "../proto/result.h"

#define ANSWER_MAX		  (64u << 10)	  /* the fetcher's one JSON line */
#define INPUT_CACHE_BYTES_DEFAULT (8ull << 30)	  /* the host's cache unless set */
#define INPUT_TIMEOUT_MS_DEFAULT  (600ull * 1000) /* one job's fetch unless set */

struct wk_instage {
	wk_instage_done_fn done;
	void *arg;
	pid_t pid;
	int pidfd;
	int out; /* the fetcher's stdout */
	struct event *ev;
	char buf[ANSWER_MAX];
	size_t len;
	char pack[PATH_MAX];
	char cache[PATH_MAX + 8]; /* the host's input cache */
	char job[AL_ID_MAX + 1];
};

static void pack_dir(const struct al_backend_conf *conf, char *out, size_t cap)
{
	snprintf(out, cap, "%s/inputs", conf->state_dir ? conf->state_dir : "/var/lib/airlock");
}

/* The host's input cache, shared by its workers: beside the packs. 0, or
 * AL_EINVAL when the path does not fit. */
static int cache_dir(const struct al_backend_conf *conf, char *out, size_t cap)
{
	char dir[PATH_MAX];

	pack_dir(conf, dir, sizeof(dir));
	return al_pathf(out, cap, "%s-cache", dir);
}

/* The pid of airlock-inputs in the name of one of its temporary entries in
 * the cache (".part.<pid>.<i>", a download; ".git.<pid>.<i>.XXXXXX", a git
 * run's directory), or 0. */
static long cache_tmp_pid(const char *name)
{
	const char *p = !strncmp(name, ".part.", 6)  ? name + 6
			: !strncmp(name, ".git.", 5) ? name + 5
						     : NULL;
	char *end;
	long pid;

	if (!p)
		return 0;
	pid = strtol(p, &end, 10);
	return end != p && *end == '.' && pid > 0 ? pid : 0;
}

/* Whether pid is a live airlock-inputs (its argv[0], which the worker
 * sets); another process of that pid is a reused pid. */
static bool fetcher_alive(long pid)
{
	char path[48], argv0[32] = "";
	cleanup_fclose FILE *f = NULL;

	snprintf(path, sizeof(path), "/proc/%ld/cmdline", pid);
	if (!(f = fopen(path, "re")))
		return false;
	return fread(argv0, 1, sizeof(argv0) - 1, f) && !strcmp(argv0, "airlock-inputs");
}

static int rm_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	(void)sb;
	(void)ftw;
	if (type == FTW_DP ? rmdir(path) : unlink(path))
		al_log("warn", "inputs_sweep", "path=%s error=\"%s\"", path, strerror(errno));
	return 0;
}

/* Remove from the cache what a fetcher killed before it could left half
 * made: pid's entries, or (pid 0) those of every fetcher no longer alive
 * (a killed worker's: its fetchers died with it). How many. */
static unsigned cache_sweep(const char *cache, long pid)
{
	DIR *d = opendir(cache);
	struct dirent *de;
	unsigned n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		long of = cache_tmp_pid(de->d_name);
		char path[PATH_MAX + 300];

		if (!of || (pid ? of != pid : fetcher_alive(of)))
			continue;
		snprintf(path, sizeof(path), "%s/%s", cache, de->d_name);
		nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
		n++;
	}
	closedir(d);
	return n;
}

int wk_instage_cache_room(const struct al_backend_conf *conf, struct al_err *err)
{
	char cache[PATH_MAX];
	struct statvfs v;
	unsigned long long room;

	if (cache_dir(conf, cache, sizeof(cache)) || statvfs(cache, &v))
		return AL_OK; /* not made yet: the fetcher makes it */
	room = (unsigned long long)v.f_bavail * v.f_frsize;
	if (room >= AL_INPUT_CACHE_ROOM_MIN)
		return AL_OK;
	return al_err_set(err, AL_ESANDBOX,
			  "the input cache %s is full: %llu of its file system's %llu bytes free",
			  cache, room, (unsigned long long)v.f_blocks * v.f_frsize);
}

void wk_instage_sweep(const struct al_backend_conf *conf)
{
	char dir[PATH_MAX], prefix[160], cache[PATH_MAX];
	DIR *d;
	struct dirent *de;
	unsigned swept;

	pack_dir(conf, dir, sizeof(dir));
	snprintf(prefix, sizeof(prefix), "%s.", conf->worker_id);
	if ((d = opendir(dir))) {
		while ((de = readdir(d)))
			if (!strncmp(de->d_name, prefix, strlen(prefix)))
				unlinkat(dirfd(d), de->d_name, 0);
		closedir(d);
	}
	/* the shared cache: what a killed worker's fetchers left half made */
	if (!cache_dir(conf, cache, sizeof(cache)) && (swept = cache_sweep(cache, 0)))
		al_log("info", "inputs_swept", "cache=%s entries=%u", cache, swept);
}

/* The fetcher's answer, read whole (one line of JSON). */
static void finish(struct wk_instage *st)
{
	json_error_t je;
	json_t *a = NULL;
	int status = AL_ST_SANDBOX_ERROR;
	char msg[AL_ERR_MSG_MAX], summary[128] = "";
	bool full = false;

	event_del(st->ev);
	al_pidfd_kill_wait(st->pidfd, false);
	st->pid = 0;
	snprintf(msg, sizeof(msg), "inputs: the fetcher ended without an answer");
	st->buf[st->len] = '\0';
	if (st->len && (a = json_loads(st->buf, 0, &je))) {
		json_t *ok = json_object_get(a, "ok"), *list = json_object_get(a, "inputs");
		const char *s = json_string_value(json_object_get(a, "status"));
		const char *e = json_string_value(json_object_get(a, "error"));

		if (json_is_true(ok)) {
			size_t n = json_array_size(list), hits = 0, i;
			json_int_t bytes = 0;
			json_t *in;

			json_array_foreach(list, i, in)
			{
				hits += json_is_true(json_object_get(in, "cached"));
				bytes += json_integer_value(json_object_get(in, "bytes"));
				const char *commit =
				    json_string_value(json_object_get(in, "commit"));

				al_log("info", "input", "job=%s %s=%s bytes=%lld cached=%s",
				       st->job, commit ? "commit" : "sha256",
				       commit ? commit
					      : json_string_value(json_object_get(in, "sha256")),
				       (long long)json_integer_value(json_object_get(in, "bytes")),
				       json_is_true(json_object_get(in, "cached")) ? "yes" : "no");
			}
			snprintf(summary, sizeof(summary),
				 "%zu (%zu from the host's cache), %lld bytes", n, hits,
				 (long long)bytes);
			status = AL_ST_OK;
		} else if (e) {
			status = s && !strcmp(s, "rejected") ? AL_ST_REJECTED : AL_ST_SANDBOX_ERROR;
			full = json_is_true(json_object_get(a, "cache_full"));
			snprintf(msg, sizeof(msg), "%s", e);
		}
	}
	json_decref(a);
	st->done(st->arg, status, msg, status == AL_ST_OK ? st->pack : NULL, summary, full);
}

static void on_read(evutil_socket_t fd, short what, void *arg)
{
	struct wk_instage *st = arg;
	ssize_t r;

	(void)what;
	r = read(fd, st->buf + st->len, sizeof(st->buf) - 1 - st->len);
	if (r < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (r > 0 && st->len + (size_t)r < sizeof(st->buf) - 1) {
		st->len += (size_t)r;
		return;
	}
	if (r > 0) /* more than any answer: not one */
		st->len = 0;
	finish(st);
}

static int add(char **argv, int *n, int max, const char *s)
{
	if (*n >= max - 1 || !(argv[*n] = strdup(s)))
		return AL_ENOMEM;
	(*n)++;
	return 0;
}

struct wk_instage *wk_instage_start(struct event_base *base, const struct al_backend_conf *conf,
				    const struct al_run_spec *spec, wk_instage_done_fn done,
				    void *arg, struct al_err *err)
{
	enum { ARGS_MAX = 18 + 2 * AL_EGRESS_RULES_MAX + 4 * AL_INPUTS_MAX };
	const struct al_job *job = spec->job;
	struct wk_instage *st = calloc(1, sizeof(*st));
	char *argv[ARGS_MAX] = {0}, dir[PATH_MAX], cache[PATH_MAX], num[4][32];
	int n = 0, pipefd[2] = {-1, -1}, bad = 0, helper = -1;
	char *const envp[] = {(char *)"PATH=/usr/bin:/bin", NULL};

	if (!st) {
		al_err_set(err, AL_ENOMEM, "inputs: out of memory");
		return NULL;
	}
	st->done = done;
	st->arg = arg;
	st->pidfd = st->out = -1;
	snprintf(st->job, sizeof(st->job), "%s", job->id);
	pack_dir(conf, dir, sizeof(dir));
	if (al_mkdir_p(dir, 0700) || al_pathf(st->pack, sizeof(st->pack), "%s/%s.%u.pack", dir,
					      conf->worker_id, spec->slot)) {
		al_err_sys(err, "inputs: mkdir %s", dir);
		goto fail_argv;
	}
	unlink(st->pack);
	bad |= cache_dir(conf, cache, sizeof(cache));
	snprintf(st->cache, sizeof(st->cache), "%s", cache);
	if ((helper = al_open_helper(conf->helper_dir, "airlock-inputs", err)) < 0)
		goto fail_argv;
	snprintf(num[0], sizeof(num[0]), "%llu",
		 (unsigned long long)(conf->input_cache_bytes ? conf->input_cache_bytes
							      : INPUT_CACHE_BYTES_DEFAULT));
	snprintf(num[1], sizeof(num[1]), "%llu",
		 (unsigned long long)(spec->max_input_bytes ? spec->max_input_bytes
							    : AL_INPUT_BYTES_DEF));
	snprintf(num[2], sizeof(num[2]), "%llu",
		 (unsigned long long)(conf->input_timeout_ms ? conf->input_timeout_ms
							     : INPUT_TIMEOUT_MS_DEFAULT));
	snprintf(num[3], sizeof(num[3]), "%u", (unsigned)(conf->uid_base + spec->slot));
	bad |= add(argv, &n, ARGS_MAX, "airlock-inputs");
	bad |= add(argv, &n, ARGS_MAX, "--cache") || add(argv, &n, ARGS_MAX, cache);
	bad |= add(argv, &n, ARGS_MAX, "--cache-bytes") || add(argv, &n, ARGS_MAX, num[0]);
	bad |= add(argv, &n, ARGS_MAX, "--max-bytes") || add(argv, &n, ARGS_MAX, num[1]);
	bad |= add(argv, &n, ARGS_MAX, "--timeout-ms") || add(argv, &n, ARGS_MAX, num[2]);
	bad |= add(argv, &n, ARGS_MAX, "--out") || add(argv, &n, ARGS_MAX, st->pack);
	/* a git input's git runs as the slot's uid, which nothing else uses
	 * before the job starts */
	bad |= add(argv, &n, ARGS_MAX, "--uid") || add(argv, &n, ARGS_MAX, num[3]);
	if (spec->ca_file)
		bad |= add(argv, &n, ARGS_MAX, "--ca") || add(argv, &n, ARGS_MAX, spec->ca_file);
	if (spec->cache_ca_file && spec->network == AL_NET_EGRESS)
		bad |= add(argv, &n, ARGS_MAX, "--ca-extra") ||
		       add(argv, &n, ARGS_MAX, spec->cache_ca_file);
	if (al_spec_ca_bundle(spec)) /* the job's trust store too */
		bad |= add(argv, &n, ARGS_MAX, "--ca-into") ||
		       add(argv, &n, ARGS_MAX, AL_CA_BUNDLE_REL);
	for (size_t i = 0; i < spec->ninput_rules; i++)
		bad |= add(argv, &n, ARGS_MAX, "--allow") ||
		       add(argv, &n, ARGS_MAX, spec->input_rules[i].text);
	bad |= add(argv, &n, ARGS_MAX, "--");
	for (size_t i = 0; i < job->ninputs; i++)
		bad |= add(argv, &n, ARGS_MAX, job->inputs[i].url) ||
		       add(argv, &n, ARGS_MAX,
			   job->inputs[i].unpack == AL_UNPACK_GIT ? job->inputs[i].ref
								  : job->inputs[i].sha256) ||
		       add(argv, &n, ARGS_MAX, job->inputs[i].path) ||
		       add(argv, &n, ARGS_MAX, al_unpack_name(job->inputs[i].unpack));
	if (bad) {
		al_err_set(err, AL_ENOMEM, "inputs: out of memory");
		goto fail_argv;
	}
	if (pipe2(pipefd, O_CLOEXEC)) {
		al_err_sys(err, "inputs: pipe");
		goto fail_argv;
	}
	st->pid = fork();
	if (st->pid < 0) {
		al_err_sys(err, "inputs: fork");
		goto fail_argv;
	}
	if (st->pid == 0) {
		int null = open("/dev/null", O_RDWR);
		struct pollfd pf = {.fd = pipefd[1], .events = POLLOUT};

		/* it dies with the worker (the signal is kept across the exec:
		 * the helper runs as root, no uid change clears it); the worker
		 * may have died before it was armed: then the pipe has no reader */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) || poll(&pf, 1, 0) < 0 ||
		    (pf.revents & (POLLERR | POLLHUP)))
			_exit(127);
		/* nothing of the worker but the pipe: stdin and stderr are /dev/null */
		if (null < 0 || dup2(null, 0) < 0 || dup2(pipefd[1], 1) < 0 || dup2(null, 2) < 0)
			_exit(127);
		signal(SIGPIPE, SIG_DFL);
		syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC);
		syscall(SYS_execveat, helper, "", argv, envp, AT_EMPTY_PATH);
		dprintf(1,
			"{\"ok\":false,\"status\":\"sandbox_error\",\"error\":\"inputs: cannot "
			"start airlock-inputs: %s\"}\n",
			strerror(errno));
		_exit(127);
	}
	close(pipefd[1]);
	pipefd[1] = -1;
	st->out = pipefd[0];
	if ((st->pidfd = (int)syscall(SYS_pidfd_open, st->pid, 0)) < 0) {
		al_err_sys(err, "inputs: pidfd_open");
		kill(st->pid, SIGKILL);
		waitpid(st->pid, NULL, 0);
		st->pid = 0;
		goto fail_argv;
	}
	fcntl(st->out, F_SETFL, O_NONBLOCK);
	if (!(st->ev = event_new(base, st->out, EV_READ | EV_PERSIST, on_read, st)) ||
	    event_add(st->ev, NULL)) {
		al_err_set(err, AL_ENOMEM, "inputs: cannot watch the fetcher");
		goto fail_argv;
	}
	for (int i = 0; i < n; i++)
		free(argv[i]);
	close(helper);
	return st;
fail_argv:
	for (int i = 0; i < n; i++)
		free(argv[i]);
	if (helper >= 0)
		close(helper);
	if (pipefd[1] >= 0)
		close(pipefd[1]);
	if (pipefd[0] >= 0 && st->out < 0)
		close(pipefd[0]);
	wk_instage_free(st);
	return NULL;
}

void wk_instage_free(struct wk_instage *st)
{
	if (!st)
		return;
	if (st->ev)
		event_free(st->ev);
	if (st->pid > 0 && st->pidfd >= 0) { /* killed mid-fetch: what it left */
		al_pidfd_kill_wait(st->pidfd, true);
		cache_sweep(st->cache, st->pid);
	}
	if (st->pidfd >= 0)
		close(st->pidfd);
	if (st->out >= 0)
		close(st->out);
	if (st->pack[0])
		unlink(st->pack);
	free(st);
}
