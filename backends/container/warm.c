/* warm.c - the container tier's warm interpreter: a slot's next container,
 * started before its job comes.
 *
 * A print(1) in a container spends nearly all of its time in the runtime
 * (runc creating the namespaces, mounts and cgroup: ~37 ms here) and in
 * python3 starting. So after a python job that could have run in one
 * (ctr_warm_take says when), the slot's next container is made and started
 * at once, between jobs (refill), of that job's shape: the same image,
 * memory, pids and disk limits and CPU share, and the same variables that
 * python3 reads as it starts (the CPU-time and wall limits are set when the
 * job comes). It is made by the same ctr_make as a job's (its own
 * directory, tmpfs, cgroup, bundle: user namespace, seccomp filter, masked
 * paths, read-only root); its program is al_warm_python (jobspec.h), which
 * compiles the launcher, says 'R' on fd 3 (a socket) and waits. Its
 * environment is the base one of every job, with the start-up variables of
 * the job it was made after: which a job must have with the same values to
 * take it. Nothing of any job is in it: no code, no files, no variable of
 * another job's but those, which are then the job's own.
 *
 * The next job that fits takes it: its files are written into the
 * container's work directory (nothing else has written there), and the
 * container's fd 3 gets the job's stdin, stdout, stderr and code as
 * descriptors, with a memfd of its argv, environment and rlimits (the CPU
 * limit plus the start-up's seconds). The interpreter then runs the job as
 * python3 -c LAUNCHER would (the same tracebacks, sys.argv, exit codes),
 * and the container ends with it, as a cold job's: one container per job.
 * The CPU time the start-up used is not the job's: the job's CPU counts
 * from its hand-over (cpu_base_ns), or, when it came while the container
 * was still starting, from the moment the interpreter took it, which the
 * interpreter tells after its 'G' ("S<its CPU ns>": ctr_warm_base).
 *
 * On runsc, which passes no descriptor in, the socket's far end goes to the
 * container's shim with a socket file listening in the container
 * (CTR_GV_WARM); airlock-exec connects to it as the sandbox starts, the
 * shim hands it that end, and airlock-exec puts it at fd 3 for the
 * interpreter. The worker's end works as on runc from the start (a job that
 * comes while the sandbox starts is buffered there); the job's descriptors
 * pass through it all the same (the Sentry takes them in).
 *
 * A job that does not fit (another shape, a tier of another runtime or
 * platform, a variable read at start-up set otherwise, binds, egress, a
 * session, a grading step, less memory than WARM_MIN_MEMORY) runs cold and
 * the warm container waits on; one that died is discarded and the job runs
 * cold. What a job can tell: its
 * argv in /proc/self/cmdline is the warm program's, and the interpreter
 * was started before its job (its start time).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <fcntl.h>

#include "../../common/cleanup.h"
#include "../../common/log.h"
#include "../fdpass.h"
#include "../jobspec.h"
#include "ctr.h"

/* A slot keeps a warm container per kind of runtime: runc or crun, and
 * runsc, so that a worker serving a tier of each (the example policy's
 * team and sandboxed) keeps both warm as their jobs alternate. */
#define WARM_KINDS	      2
#define WARM_AT(slot, gvisor) ((slot)*WARM_KINDS + ((gvisor) ? 1u : 0u))

/* A job with less memory than this runs cold (the interpreter holds ~10
 * MiB before its job). */
#define WARM_MIN_MEMORY (64ull << 20)
#define WARM_IMAGE_MAX	128

/* What a slot's warm container is made for: a job of this shape takes it. */
struct shape {
	bool py; /* the slot's last job could have run in one */
	char image[WARM_IMAGE_MAX];
	char runtime[16], platform[16]; /* its tier's oci_runtime and runsc_platform ("": none) */
	uint64_t memory_bytes, pids, disk_bytes, cpu_millis;
	struct al_buf vars; /* its start-up variables, each NUL-ended */
};

struct warm {
	struct al_sandbox *sb; /* the started container; NULL = none */
	struct al_job job;     /* its sandbox's job: python, no code */
	struct shape shape;
	char hash[128]; /* its catalogue image's content hash when it was made */
};

static struct {
	const struct al_backend_conf *conf;
	const struct al_backend_ops *ops; /* the container backend's, for al_sandbox_new */
	struct warm *slot;		  /* WARM_KINDS per slot (WARM_AT) */
	struct shape *want;		  /* each one's next warm container */
	struct al_buf base;		  /* a python job's argv and environment, no variables */
	const char *argv[4];
	uint32_t envc;
	unsigned seq;
	int null_fd;
} W = {.null_fd = -1};

int ctr_warm_init(const struct al_backend_conf *conf, const struct al_backend_ops *ops,
		  struct al_err *err)
{
	static const struct al_job py = {.runtime = AL_RUNTIME_PYTHON};
	const struct al_run_spec spec = {.job = &py};
	uint32_t argc = 0;
	const char *p;

	W.conf = conf;
	W.ops = ops;
	W.slot = calloc(WARM_AT(conf->slots ? conf->slots : 1, 0), sizeof(*W.slot));
	W.want = calloc(WARM_AT(conf->slots ? conf->slots : 1, 0), sizeof(*W.want));
	if (!W.slot || !W.want || al_argv_env(&spec, "/proc/self/fd/3", &W.base, &argc, &W.envc) ||
	    argc != 4) {
		ctr_warm_fini();
		return al_err_set(err, AL_ENOMEM, "container: out of memory");
	}
	p = W.base.data;
	for (int i = 0; i < 4; i++, p += strlen(p) + 1)
		W.argv[i] = p;
	if ((W.null_fd = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0) {
		ctr_warm_fini();
		return al_err_sys(err, "container: open /dev/null");
	}
	return AL_OK;
}

static size_t count_of(const struct al_buf *b)
{
	size_t n = 0;

	for (size_t i = 0; i < b->len; i++)
		n += b->data[i] == '\0';
	return n;
}

static bool same_shape(const struct shape *a, const struct shape *b)
{
	return a->py && b->py && !strcmp(a->image, b->image) && !strcmp(a->runtime, b->runtime) &&
	       !strcmp(a->platform, b->platform) && a->memory_bytes == b->memory_bytes &&
	       a->pids == b->pids && a->disk_bytes == b->disk_bytes &&
	       a->cpu_millis == b->cpu_millis && a->vars.len == b->vars.len &&
	       (!a->vars.len || !memcmp(a->vars.data, b->vars.data, a->vars.len));
}

/* The shape of sb's job into s when it could run in a warm container (a
 * python job run as python3 -c LAUNCHER would run it, nothing a warm
 * container lacks); false otherwise. strs: its argv, then its environment. */
static bool shape_of(const struct al_sandbox *sb, const char *strs, uint32_t argc, uint32_t envc,
		     struct shape *s)
{
	const struct al_run_spec *sp = &sb->spec;

	if (sp->job->runtime != AL_RUNTIME_PYTHON || sp->nbinds || sp->grade_tree || sp->session ||
	    sp->network == AL_NET_EGRESS || sp->limits.memory_bytes < WARM_MIN_MEMORY || argc < 4 ||
	    sp->slot >= W.conf->slots || (sp->image && strlen(sp->image) >= WARM_IMAGE_MAX) ||
	    (sp->oci_runtime && strlen(sp->oci_runtime) >= sizeof(s->runtime)) ||
	    (sp->oci_platform && strlen(sp->oci_platform) >= sizeof(s->platform)))
		return false;
	for (uint32_t i = 0; i < 4; i++, strs += strlen(strs) + 1)
		if (strcmp(strs, W.argv[i]))
			return false;
	for (uint32_t i = 4; i < argc; i++)
		strs += strlen(strs) + 1;
	*s = (struct shape){.py = true,
			    .memory_bytes = sp->limits.memory_bytes,
			    .pids = sp->limits.pids,
			    .disk_bytes = sp->limits.disk_bytes,
			    .cpu_millis = sp->cpu_millis};
	snprintf(s->image, sizeof(s->image), "%s", sp->image ? sp->image : "");
	snprintf(s->runtime, sizeof(s->runtime), "%s", sp->oci_runtime ? sp->oci_runtime : "");
	snprintf(s->platform, sizeof(s->platform), "%s", sp->oci_platform ? sp->oci_platform : "");
	for (uint32_t i = 0; i < envc; i++, strs += strlen(strs) + 1)
		if (al_startup_var(strs) && al_buf_append(&s->vars, strs, strlen(strs) + 1)) {
			al_buf_free(&s->vars);
			return false;
		}
	return true;
}

static bool alive(const struct warm *w)
{
	const struct ctr_sb *c = w->sb ? w->sb->priv : NULL;
	struct pollfd p = {.fd = c ? c->pidfd : -1, .events = POLLIN};

	return c && c->pidfd >= 0 && poll(&p, 1, 0) == 0;
}

static void discard(struct warm *w)
{
	al_sandbox_free(w->sb); /* ctr_destroy: its interpreter ends at EOF */
	w->sb = NULL;
	al_buf_free(&w->shape.vars);
	w->shape = (struct shape){0};
}

static int warm_argv_env(const struct shape *s, struct al_buf *out, uint32_t *argc, uint32_t *envc)
{
	const char *p = W.base.data;
	int bad = 0;

	bad |= al_buf_append(out, W.argv[0], strlen(W.argv[0]) + 1) |
	       al_buf_append(out, W.argv[1], strlen(W.argv[1]) + 1) |
	       al_buf_append(out, al_warm_python, strlen(al_warm_python) + 1) |
	       al_buf_append(out, W.argv[2], strlen(W.argv[2]) + 1);
	*argc = 4;
	*envc = 0;
	for (int i = 0; i < 4; i++)
		p += strlen(p) + 1;
	/* the base variables but those read at start-up, which are the job's */
	for (uint32_t i = 0; i < W.envc; i++, p += strlen(p) + 1)
		if (!al_startup_var(p)) {
			bad |= al_buf_append(out, p, strlen(p) + 1);
			(*envc)++;
		}
	if (s->vars.len) {
		bad |= al_buf_append(out, s->vars.data, s->vars.len);
		*envc += (uint32_t)count_of(&s->vars);
	}
	return bad ? -1 : 0;
}

/* Make and start slot's warm container of the wanted shape. */
static void spawn(struct warm *w, const struct shape *want, unsigned slot)
{
	struct al_err err = {0};
	struct al_run_spec spec = {0};
	struct ctr_argv argv = {0};
	struct ctr_sb *c;
	int sv[2] = {-1, -1}, rc;

	w->shape = *want;
	w->shape.vars = (struct al_buf){0};
	if (al_buf_append(&w->shape.vars, want->vars.data, want->vars.len)) {
		w->shape.py = false;
		return;
	}
	w->job = (struct al_job){.runtime = AL_RUNTIME_PYTHON};
	spec.job = &w->job;
	spec.limits.memory_bytes = want->memory_bytes;
	spec.limits.cpu_ms = 1000; /* its job's comes with it */
	spec.limits.pids = want->pids;
	spec.limits.disk_bytes = want->disk_bytes;
	spec.cpu_millis = want->cpu_millis;
	spec.image = w->shape.image[0] ? w->shape.image : NULL;
	spec.oci_runtime = w->shape.runtime[0] ? w->shape.runtime : NULL;
	spec.oci_platform = w->shape.platform[0] ? w->shape.platform : NULL;
	spec.slot = slot;
	if (spec.image)
		al_image_hash(W.conf, spec.image, w->hash, sizeof(w->hash));
	if (!(w->sb = al_sandbox_new(W.ops, W.conf, &spec))) {
		discard(w);
		return;
	}
	c = w->sb->priv;
	ctr_sb_init(c);
	c->warm = true;
	snprintf(c->name, sizeof(c->name), "al-%s-%u-warm+%u", W.conf->worker_id, slot, ++W.seq);
	rc = ctr_runtime_of(&w->sb->spec, &c->rt, &err);
	if (rc == AL_OK && c->rt.gvisor) /* airlock-exec connects to the socket file */
		ctr_runtime_host_uds(&c->rt);
	if (rc == AL_OK && warm_argv_env(&w->shape, &argv.strings, &argv.argc, &argv.envc))
		rc = al_err_set(&err, AL_ENOMEM, "container: out of memory");
	else if (rc == AL_OK)
		rc = ctr_make(w->sb, &argv, &err);
	al_buf_free(&argv.strings);
	if (rc == AL_OK && !c->found)
		rc = al_err_set(&err, AL_ESANDBOX, "container: no /usr/bin/python3 in the image");
	if (rc == AL_OK && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		rc = al_err_sys(&err, "container: socketpair");
	if (rc == AL_OK) {
		const int src[4] = {W.null_fd, W.null_fd, W.null_fd, sv[1]};

		rc = ctr_spawn_shim(c, src, &err);
		al_closep(&c->warm_lfd); /* the shim's now */
		close(sv[1]);
		c->ctl = sv[0];
	}
	if (rc) {
		al_log("warn", "warm_container", "slot=%u error=\"%s\" note=\"its jobs run cold\"",
		       slot, err.msg);
		discard(w);
	}
}

void ctr_warm_refill(const struct al_backend_conf *conf, unsigned slot)
{
	for (unsigned k = 0; W.slot && slot < conf->slots && k < WARM_KINDS; k++) {
		struct warm *w = &W.slot[WARM_AT(slot, k)];
		const struct shape *want = &W.want[WARM_AT(slot, k)];

		if (!want->py || (w->sb && same_shape(&w->shape, want) && alive(w)))
			continue;
		discard(w);
		spawn(w, want, slot);
	}
}

/* The memfd the warm interpreter reads its job's argv and environment from
 * (jobspec.c: "ARGC\0ENVC\0", argv, environment, work directory (none:
 * the bundle's /work), "AS,CPU,FSIZE,NOFILE"). */
static int spec_memfd(const struct al_sandbox *sb, const struct al_buf *strs, uint32_t argc,
		      uint32_t envc, struct al_err *err)
{
	const struct al_limits *l = &sb->spec.limits;
	struct al_buf b = {0};
	char head[2][16], rl[96];
	int fd;

	snprintf(head[0], sizeof(head[0]), "%u", argc);
	snprintf(head[1], sizeof(head[1]), "%u", envc);
	snprintf(rl, sizeof(rl), "%llu,%llu,%llu,%u",
		 (unsigned long long)(l->memory_bytes + (1ull << 30)),
		 (unsigned long long)((l->cpu_ms + 999) / 1000),
		 (unsigned long long)al_fsize_limit(l), (unsigned)sb->conf->nofile);
	if (al_buf_append(&b, head[0], strlen(head[0]) + 1) ||
	    al_buf_append(&b, head[1], strlen(head[1]) + 1) ||
	    al_buf_append(&b, strs->data, strs->len) || al_buf_append(&b, "", 1) ||
	    al_buf_append(&b, rl, strlen(rl) + 1)) {
		al_buf_free(&b);
		return al_err_set(err, AL_ENOMEM, "container: out of memory");
	}
	fd = ctr_memfd("job-spec", b.data, b.len, err);
	al_buf_free(&b);
	return fd;
}

int ctr_warm_take(struct al_sandbox *sb, struct al_err *err)
{
	struct ctr_sb *c = sb->priv;
	const struct al_job *job = sb->spec.job;
	struct al_buf strs = {0};
	struct shape s = {0};
	uint32_t argc = 0, envc = 0;
	uid_t uid = sb->conf->userns_base + sb->spec.slot * CTR_ID_RANGE + CTR_UID;
	struct warm *w;
	unsigned at;
	bool fits;
	int rc;

	if (!W.slot || job->runtime != AL_RUNTIME_PYTHON)
		return 0;
	if (al_argv_env(&sb->spec, "/proc/self/fd/3", &strs, &argc, &envc)) {
		al_buf_free(&strs);
		return al_err_set(err, AL_ENOMEM, "container: out of memory");
	}
	if (!shape_of(sb, strs.data, argc, envc, &s)) {
		al_buf_free(&strs);
		return 0;
	}
	at = WARM_AT(sb->spec.slot, c->rt.gvisor);
	w = &W.slot[at];
	fits = w->sb && same_shape(&w->shape, &s) && alive(w);
	if (fits && s.image[0]) { /* an image rebuilt since: the job runs in the new one */
		char now[sizeof(w->hash)];

		al_image_hash(sb->conf, s.image, now, sizeof(now));
		fits = !strcmp(now, w->hash);
	}
	/* what the slot's next warm container is (refill) */
	al_buf_free(&W.want[at].vars);
	W.want[at] = s;
	if (!fits) {
		al_buf_free(&strs);
		return 0;
	}
	/* the container is the job's now */
	*c = *(struct ctr_sb *)w->sb->priv;
	free(w->sb); /* all it held is c's now: nothing to destroy */
	w->sb = NULL;
	al_buf_free(&w->shape.vars);
	w->shape = (struct shape){0};
	if ((rc = al_jobfs_write_files(&c->fs, job, uid, uid, err)) ||
	    (sb->spec.inputs_pack && (rc = al_jobfs_unpack(&c->fs, sb->spec.inputs_pack, uid, uid,
							   sb->spec.max_input_bytes, err)))) {
		al_buf_free(&strs);
		return al_err_wrap(err, "container");
	}
	c->code_fd = ctr_memfd("job-code", job->code.data, job->code.len, err);
	c->stdin_fd = c->code_fd < 0
			  ? -1
			  : ctr_memfd("job-stdin", job->stdin_data.data, job->stdin_data.len, err);
	c->spec_fd = c->stdin_fd < 0 ? -1 : spec_memfd(sb, &strs, argc, envc, err);
	al_buf_free(&strs);
	if (c->spec_fd < 0)
		return err->code ? err->code : AL_ESANDBOX;
	return 1;
}

int ctr_warm_go(struct al_sandbox *sb, struct al_err *err)
{
	struct ctr_sb *c = sb->priv;
	const int fds[5] = {c->stdin_fd, c->fs.out_fd, c->fs.err_fd, c->code_fd, c->spec_fd};

	c->cpu_base_ns = al_cg_cpu_ns(&c->cg);
	/* its peer is the interpreter's alone (the shim closed its copy once the
	 * container ran): one that died refuses it */
	if (al_send_fds(c->ctl, 'G', fds, 5, MSG_DONTWAIT) != 1)
		return al_err_sys(err, "container: hand the job to its warm container");
	/* ctl stays open until the container is removed: closed with the
	 * interpreter's 'R' unread in it, the job's 'G' not yet read would be
	 * lost to an ECONNRESET */
	return AL_OK;
}

void ctr_warm_base(struct ctr_sb *c)
{
	char buf[64];
	ssize_t n;

	if (!c->warm || c->base_read || c->ctl < 0)
		return;
	/* its records (a SOCK_SEQPACKET): 'R', read only now (its job's 'G'
	 * went long ago), then "S<ns>" once it took the job */
	while ((n = recv(c->ctl, buf, sizeof(buf) - 1, MSG_DONTWAIT)) > 0) {
		buf[n] = '\0';
		if (buf[0] == 'S') {
			uint64_t ns = strtoull(buf + 1, NULL, 10);

			if (ns > c->cpu_base_ns) /* its start-up went on after the hand-over */
				c->cpu_base_ns = ns;
			c->base_read = true;
			return;
		}
	}
	/* not yet (it comes as the job starts), or never (it died) */
}

void ctr_warm_fini(void)
{
	for (unsigned i = 0; W.slot && i < WARM_AT(W.conf->slots, 0); i++)
		discard(&W.slot[i]);
	for (unsigned i = 0; W.want && i < WARM_AT(W.conf->slots, 0); i++)
		al_buf_free(&W.want[i].vars);
	free(W.slot);
	free(W.want);
	al_buf_free(&W.base);
	al_closep(&W.null_fd);
	W.slot = NULL;
	W.want = NULL;
	W.null_fd = -1;
}
