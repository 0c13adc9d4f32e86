/* git.c - airlock-inputs' git inputs: {git: {url, ref}, path}, one commit
 * of a repository checked out into the job's tree with its (shallow) .git.
 *
 * The host's git client does the fetching, with the rules of the URL
 * inputs and none of root's rights:
 * - it runs as the slot's own uid, no groups, no new privileges, in a
 *   directory of its own, with a clean environment (no system or global
 *   config, no credential prompt, no proxy) and RLIMIT_FSIZE at the
 *   tier's max_input_bytes;
 * - the URL's name goes through the tier's egress rules, and every address
 *   it resolves to is checked as a connection's would be, then pinned for
 *   git's libcurl (http.curloptResolve): git never resolves it again;
 * - http and https only (GIT_ALLOW_PROTOCOL), no redirects and so no
 *   http-alternates (http.followRedirects=false), no submodules, no hooks;
 * - a ref that is not a commit id is asked of the server (ls-remote), then
 *   the object it names is fetched, depth 1, and checked to be the one.
 * What comes back is one stream, git's tar of the tree and a tar of .git,
 * counted against max_input_bytes as it arrives; it goes into the host's
 * cache under a key made of the object's id, and is unpacked as any tar
 * input is (no "..", no link pointing out, no device). Each git command
 * runs as the init of a PID namespace of its own: when it ends or is
 * killed, nothing it started runs on, and the directory is removed after. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <netdb.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <linux/close_range.h>

#include "fetcher.h"

#define GIT	  "/usr/bin/git"
#define ERR_TAIL  1024			      /* of git's stderr, for the reason */
#define LS_MAX	  (1u << 20)		      /* of ls-remote's answer */
#define FSIZE_CAP (fx.max_bytes + (1u << 20)) /* RLIMIT_FSIZE of a git run */

static char workdir[4096]; /* the running input's ("" = none) */

/* ---- running git as the slot's uid ---- */

struct step {
	int sink;     /* stdout into this file (counted), or -1: into buf */
	char *buf;    /* LS_MAX + 1 */
	size_t len;   /* of buf, or bytes written to sink */
	bool too_big; /* stdout went over max_bytes */
	bool timed_out;
	int status;	    /* waitpid's */
	char err[ERR_TAIL]; /* the end of stderr */
	size_t errlen;
};

static int rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (type == FTW_DP)
		rmdir(path);
	else
		unlink(path);
	return 0;
}

/* Nothing of git's runs now: each run was the init of a PID namespace of
 * its own, reaped (the kernel kills the rest with it), so no process can
 * move a directory under the removal. */
void fx_git_cleanup(void)
{
	if (!workdir[0])
		return;
	nftw(workdir, rm_one, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
	workdir[0] = '\0';
}

static bool at_cap;

static int cap_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)path;
	(void)ftw;
	at_cap |= type == FTW_F && S_ISREG(st->st_mode) && (uint64_t)st->st_size >= FSIZE_CAP;
	return 0;
}

/* Whether a file of the run reached RLIMIT_FSIZE (git tells it in many
 * ways, or not at all: "invalid index-pack output"). */
static bool hit_fsize(void)
{
	at_cap = false;
	nftw(workdir, cap_one, 32, FTW_PHYS | FTW_MOUNT);
	return at_cap;
}

static void keep_tail(struct step *s, const char *p, size_t n)
{
	if (n >= sizeof(s->err) - 1) {
		p += n - (sizeof(s->err) - 1);
		n = sizeof(s->err) - 1;
	}
	if (s->errlen + n > sizeof(s->err) - 1) {
		size_t drop = s->errlen + n - (sizeof(s->err) - 1);

		memmove(s->err, s->err + drop, s->errlen - drop);
		s->errlen -= drop;
	}
	memcpy(s->err + s->errlen, p, n);
	s->errlen += n;
	s->err[s->errlen] = '\0';
}

static bool take_out(struct step *s, const char *p, size_t n)
{
	if (s->sink < 0) {
		if (s->len + n > LS_MAX)
			return false;
		memcpy(s->buf + s->len, p, n);
		s->len += n;
		s->buf[s->len] = '\0';
		return true;
	}
	if (s->len + n > fx.max_bytes) {
		s->too_big = true;
		return false;
	}
	if (al_write_all(s->sink, p, n))
		return false;
	s->len += n;
	return true;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* argv run in workdir as fx.uid with env, as the init of a new PID
 * namespace; its stdout and stderr into s, within fx.timeout_ms. */
static void run_step(char *const argv[], char *const env[], struct step *s)
{
	int out[2], err[2];
	uint64_t deadline = now_ms() + fx.timeout_ms;
	pid_t pid;
	struct pollfd pf[2];

	if (pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC))
		fx_die("sandbox_error", "git: pipe: %s", strerror(errno));
	/* the init of a PID namespace: when it ends, every process it left
	 * ends too, and none can leave it */
	if ((pid = (pid_t)syscall(SYS_clone, CLONE_NEWPID | SIGCHLD, 0, 0, 0, 0)) < 0)
		fx_die("sandbox_error", "git: clone: %s", strerror(errno));
	if (pid == 0) {
		struct rlimit fsize = {FSIZE_CAP, FSIZE_CAP};
		struct rlimit core = {0, 0};
		int null = open("/dev/null", O_RDONLY);

		if (null < 0 || dup2(null, 0) < 0 || dup2(out[1], 1) < 0 || dup2(err[1], 2) < 0)
			_exit(126);
		syscall(SYS_close_range, 3, ~0U, 0);
		if (setrlimit(RLIMIT_FSIZE, &fsize) || setrlimit(RLIMIT_CORE, &core) ||
		    chdir(workdir) || setgroups(0, NULL) || setgid(fx.uid) || setuid(fx.uid) ||
		    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
			_exit(126);
		/* after the uid change, which clears it: git dies with this
		 * helper (which dies with its worker), and with git its PID
		 * namespace. The helper may have died before the signal was
		 * armed: then stdout's pipe has no reader. */
		{
			struct pollfd pd = {.fd = 1, .events = POLLOUT};

			if (prctl(PR_SET_PDEATHSIG, SIGKILL) || poll(&pd, 1, 0) < 0 ||
			    (pd.revents & (POLLERR | POLLHUP)))
				_exit(126);
		}
		signal(SIGPIPE, SIG_DFL);
		execve(argv[0], argv, env);
		dprintf(2, "airlock-inputs: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(out[1]);
	close(err[1]);
	pf[0] = (struct pollfd){.fd = out[0], .events = POLLIN};
	pf[1] = (struct pollfd){.fd = err[0], .events = POLLIN};
	while (pf[0].fd >= 0 || pf[1].fd >= 0) {
		uint64_t t = now_ms();
		char buf[65536];
		int r;

		if (t >= deadline) {
			s->timed_out = true;
			break;
		}
		r = poll(pf, 2, (int)(deadline - t));
		if (r < 0 && errno == EINTR)
			continue;
		for (int k = 0; r > 0 && k < 2; k++) {
			ssize_t n;

			if (pf[k].fd < 0 || !pf[k].revents)
				continue;
			n = read(pf[k].fd, buf, sizeof(buf));
			if (n <= 0) {
				close(pf[k].fd);
				pf[k].fd = -1;
			} else if (k == 1) {
				keep_tail(s, buf, (size_t)n);
			} else if (!take_out(s, buf, (size_t)n)) {
				close(pf[k].fd);
				pf[k].fd = -1;
				kill(pid, SIGKILL);
			}
		}
	}
	for (int k = 0; k < 2; k++)
		if (pf[k].fd >= 0)
			close(pf[k].fd);
	kill(pid, SIGKILL); /* and with it the namespace: all of the run */
	while (waitpid(pid, &s->status, 0) < 0 && errno == EINTR)
		;
}

/* ---- the input ---- */

/* The last line git wrote: its reason. */
static const char *last_line(struct step *s)
{
	char *e;

	while (s->errlen && (s->err[s->errlen - 1] == '\n' || s->err[s->errlen - 1] == '\r'))
		s->err[--s->errlen] = '\0';
	e = strrchr(s->err, '\n');
	return e ? e + 1 : s->err[0] ? s->err : "(no message)";
}

/* A failed step, told as the job's fault or the host's. */
static void __attribute__((noreturn)) failed(size_t i, const char *url, struct step *s)
{
	static const char *const job_fault[] = {"not found",
						"returned error: 4",
						"couldn't find remote ref",
						"not our ref",
						"names no commit",
						"Authentication failed",
						"could not read Username",
						"terminal prompts disabled",
						"returned error: 3"};
	const char *why;

	if (s->timed_out)
		fx_die("sandbox_error", "inputs[%zu]: %s: git: no answer within %llu ms", i, url,
		       (unsigned long long)fx.timeout_ms);
	if (s->too_big)
		fx_die("rejected",
		       "inputs[%zu]: %s: the checkout is larger than the tier's max_input_bytes "
		       "(%llu)",
		       i, url, (unsigned long long)fx.max_bytes);
	if ((WIFSIGNALED(s->status) && WTERMSIG(s->status) == SIGXFSZ) || hit_fsize())
		fx_die("rejected",
		       "inputs[%zu]: %s is larger than the tier's max_input_bytes (%llu)", i, url,
		       (unsigned long long)fx.max_bytes);
	{
		char what[32];

		snprintf(what, sizeof(what), "inputs[%zu]: git", i);
		fx_cache_room_or_die(what); /* git's words for a full disk vary */
	}
	why = last_line(s);
	if (!strncmp(why, "fatal: ", 7))
		why += 7;
	for (size_t k = 0; k < sizeof(job_fault) / sizeof(job_fault[0]); k++)
		if (strstr(s->err, job_fault[k]))
			fx_die("rejected", "inputs[%zu]: git: %s%s", i, why,
			       strstr(s->err, "returned error: 3")
				   ? " (a redirect: git inputs follow none; give the repository's "
				     "own URL)"
				   : "");
	fx_die("sandbox_error", "inputs[%zu]: git: %s", i, why);
}

/* The addresses of f's host that the rules let out, as
 * http.curloptResolve's "host:port:addr[,addr]" (nothing for a literal,
 * whose range rule is checked here too); refused when there is none. */
static void pin(struct fetch *f, const char *what, char *out, size_t cap)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
	char port[8];
	int rc, n = 0;
	size_t len;

	snprintf(port, sizeof(port), "%u", f->port);
	if (f->literal)
		hints.ai_flags = AI_NUMERICHOST;
	if ((rc = getaddrinfo(f->host, port, &hints, &res)))
		fx_die("sandbox_error", "%s: cannot resolve %s: %s", what, f->host,
		       gai_strerror(rc));
	len = (size_t)snprintf(out, cap, "%s:%u:", f->host, f->port);
	for (struct addrinfo *r = res; r; r = r->ai_next) {
		char a[INET6_ADDRSTRLEN];
		const void *ip = r->ai_family == AF_INET6
				     ? (const void *)&((struct sockaddr_in6 *)r->ai_addr)->sin6_addr
				     : (const void *)&((struct sockaddr_in *)r->ai_addr)->sin_addr;

		if (!fx_addr_ok(f, r->ai_addr) || !inet_ntop(r->ai_family, ip, a, sizeof(a)) ||
		    len >= cap)
			continue; /* git's libcurl never sees it */
		len += (size_t)snprintf(out + len, cap - len,
					r->ai_family == AF_INET6 ? "%s[%s]" : "%s%s",
					n++ ? "," : "", a);
	}
	freeaddrinfo(res);
	if (!n)
		fx_die("rejected", "%s: %s", what, f->refused[0] ? f->refused : "no address");
	if (f->literal || len >= cap)
		out[0] = '\0';
}

/* The environment git runs in: nothing of the host's config or the
 * worker's, and the settings above as GIT_CONFIG_* (for every git the
 * run starts). */
#define ENV_MAX 48
static char env_store[ENV_MAX][4200];
static char *env_v[ENV_MAX + 1];

static void make_env(const char *resolve, bool ca)
{
	static const char *const fixed[] = {
	    "PATH=/usr/bin:/bin",      "LC_ALL=C",
	    "GIT_CONFIG_NOSYSTEM=1",   "GIT_CONFIG_GLOBAL=/dev/null",
	    "GIT_TERMINAL_PROMPT=0",   "GIT_ALLOW_PROTOCOL=http:https",
	    "GIT_ASKPASS=/bin/false",  "GIT_PROTOCOL_FROM_USER=0",
	    "GIT_NO_REPLACE_OBJECTS=1"};
	const char *kv[][2] = {{"http.followRedirects", "false"},
			       {"http.proxy", ""},
			       {"protocol.allow", "never"},
			       {"protocol.http.allow", "always"},
			       {"protocol.https.allow", "always"},
			       {"protocol.version", "2"},
			       {"transfer.unpackLimit", "1"},
			       {"transfer.fsckObjects", "true"},
			       {"core.hooksPath", "/dev/null"},
			       {"gc.auto", "0"},
			       {"submodule.recurse", "false"},
			       {"http.curloptResolve", resolve[0] ? resolve : NULL},
			       {"http.sslCAInfo", ca ? "ca.pem" : NULL}};
	size_t n = 0, k = 0;

	snprintf(env_store[n++], sizeof(env_store[0]), "HOME=%s", workdir);
	for (size_t j = 0; j < sizeof(fixed) / sizeof(fixed[0]); j++)
		snprintf(env_store[n++], sizeof(env_store[0]), "%s", fixed[j]);
	for (size_t j = 0; j < sizeof(kv) / sizeof(kv[0]); j++) {
		if (!kv[j][1])
			continue;
		snprintf(env_store[n++], sizeof(env_store[0]), "GIT_CONFIG_KEY_%zu=%s", k,
			 kv[j][0]);
		snprintf(env_store[n++], sizeof(env_store[0]), "GIT_CONFIG_VALUE_%zu=%s", k,
			 kv[j][1]);
		k++;
	}
	snprintf(env_store[n++], sizeof(env_store[0]), "GIT_CONFIG_COUNT=%zu", k);
	for (size_t j = 0; j < n; j++)
		env_v[j] = env_store[j];
	env_v[n] = NULL;
}

/* ls-remote's answer: the object the ref names (the exact ref, else
 * refs/heads/REF, else refs/tags/REF), into id. */
static bool pick_ref(const char *ls, const char *ref, char id[41])
{
	char want[3][AL_GIT_REF_MAX + 16];
	bool found = false;

	snprintf(want[0], sizeof(want[0]), "%s", ref);
	snprintf(want[1], sizeof(want[1]), "refs/heads/%s", ref);
	snprintf(want[2], sizeof(want[2]), "refs/tags/%s", ref);
	for (int w = 0; w < 3 && !found; w++)
		for (const char *l = ls; *l && !found;) {
			const char *nl = strchr(l, '\n'), *tab = strchr(l, '\t');
			size_t end = nl ? (size_t)(nl - l) : strlen(l);

			if (tab && tab - l == 40 && (size_t)(tab - l) < end &&
			    end - 41 == strlen(want[w]) && !strncmp(tab + 1, want[w], end - 41)) {
				memcpy(id, l, 40);
				id[40] = '\0';
				found = strspn(id, "0123456789abcdef") == 40;
			}
			l += end + (nl != NULL);
		}
	return found;
}

/* Fetch the object, check it is what was asked, point HEAD at its
 * commit with an index (no files written: git archive streams them), then
 * both tars to stdout. "$1" the URL, "$2" the object's id. */
static const char FETCH_SH[] =
    "set -e\n"
    "git init -q --template= .\n"
    "git fetch -q --depth 1 --no-tags -- \"$1\" \"$2\"\n"
    "test \"$(git rev-parse --verify -q FETCH_HEAD)\" = \"$2\" ||"
    " { echo \"fatal: the server sent another object than $2\" >&2; exit 3; }\n"
    "c=$(git rev-parse --verify -q \"$2^{commit}\") ||"
    " { echo \"fatal: $2 names no commit\" >&2; exit 3; }\n"
    "git update-ref --no-deref HEAD \"$c\"\n"
    "git read-tree HEAD\n"
    "rm -rf .git/FETCH_HEAD .git/logs\n"
    "tar -cf - --numeric-owner --owner=0 --group=0 .git\n"
    "git archive --format=tar HEAD\n";

void fx_git_get(size_t i)
{
	struct input *in = &fx.in[i];
	struct fetch f = {.i = i};
	char what[48], host[256], resolve[1024], id[41], key[65], seed[64];
	unsigned char md[32];
	unsigned mdlen = 0;
	struct step s = {.sink = -1};
	bool ca = fx.ca_blob && !strncmp(in->url, "https://", 8);

	snprintf(what, sizeof(what), "inputs[%zu].git.url", i);
	fx_check_url(&f, what, in->url, host, sizeof(host));
	if (access(GIT, X_OK))
		fx_die("sandbox_error",
		       "inputs[%zu]: git inputs need git on the worker's host (%s)", i, GIT);
	if (!fx.uid)
		fx_die("sandbox_error", "inputs[%zu]: git inputs need the slot's uid (--uid)", i);
	pin(&f, what, resolve, sizeof(resolve));
	snprintf(workdir, sizeof(workdir), "%s/.git.%d.%zu.XXXXXX", fx.cache, (int)getpid(), i);
	if (!mkdtemp(workdir)) {
		workdir[0] = '\0';
		fx_die("sandbox_error", "inputs[%zu]: the cache: %s", i, strerror(errno));
	}
	if (chown(workdir, fx.uid, fx.uid))
		fx_die("sandbox_error", "inputs[%zu]: the cache: %s", i, strerror(errno));
	if (ca) {
		char path[4200];
		int fd;

		snprintf(path, sizeof(path), "%s/ca.pem", workdir);
		if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)) < 0 ||
		    al_write_all(fd, fx.ca_blob, fx.ca_len))
			fx_die("sandbox_error", "inputs[%zu]: the CA file: %s", i, strerror(errno));
		close(fd);
	}
	make_env(resolve, ca);

	/* the object: the commit id given, or the one the server names */
	if (strlen(in->ref) == 40 && strspn(in->ref, "0123456789abcdef") == 40) {
		snprintf(id, sizeof(id), "%s", in->ref);
	} else {
		char *argv[] = {(char *)GIT,	 (char *)"ls-remote", (char *)"--",
				(char *)in->url, (char *)in->ref,     NULL};

		if (!(s.buf = malloc(LS_MAX + 1)))
			fx_die("sandbox_error", "out of memory");
		s.buf[0] = '\0';
		run_step(argv, env_v, &s);
		if (s.timed_out || !WIFEXITED(s.status) || WEXITSTATUS(s.status))
			failed(i, in->url, &s);
		if (!pick_ref(s.buf, in->ref, id))
			fx_die(
			    "rejected",
			    "inputs[%zu].git.ref: \"%s\" is no branch, tag or ref of %s (or give "
			    "a 40-hex commit id)",
			    i, in->ref, in->url);
		free(s.buf);
	}

	/* the cache's key: the object's id (its content's hash) */
	snprintf(seed, sizeof(seed), "airlock git %s", id);
	EVP_Digest(seed, strlen(seed), md, &mdlen, EVP_sha256(), NULL);
	for (unsigned k = 0; k < 32; k++)
		snprintf(key + 2 * k, 3, "%02x", md[k]);
	if (!fx_cache_take(i, key)) {
		char *argv[] = {(char *)"/bin/sh",
				(char *)"-c",
				(char *)FETCH_SH,
				(char *)"sh",
				(char *)in->url,
				id,
				NULL};
		struct step fs = {.sink = -1};

		if ((fs.sink = open(fx_cache_part(i), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
				    0600)) < 0)
			fx_die("sandbox_error", "inputs[%zu]: the cache: %s", i, strerror(errno));
		run_step(argv, env_v, &fs);
		close(fs.sink);
		if (fs.timed_out || fs.too_big || !WIFEXITED(fs.status) || WEXITSTATUS(fs.status))
			failed(i, in->url, &fs);
		in->bytes = fs.len;
		fx_cache_put(i, key);
	}
	fx_git_cleanup();
}
