/* registry.c - the list of built-in backends and the dispatchers that report
 * unsupported operations in one place. Compile-time options live here only. */
#include "backend.h"

#include <stdlib.h>
#include <string.h>

static const struct al_backend_ops *const backends[] = {
    &al_backend_process, &al_backend_container, &al_backend_microvm,
    &al_backend_vm,	 &al_backend_noop,	NULL,
};

const struct al_backend_ops *const *al_backend_all(void)
{
	return backends;
}

const struct al_backend_ops *al_backend_find(const char *name)
{
	for (size_t i = 0; backends[i]; i++)
		if (strcmp(backends[i]->name, name) == 0)
			return backends[i];
	return NULL;
}

static int unsupported(const struct al_backend_ops *ops, const char *op, struct al_err *err)
{
	return al_err_set(err, AL_ESANDBOX, "backend %s does not support %s", ops->name, op);
}

int al_backend_init(const struct al_backend_ops *ops, const struct al_backend_conf *conf,
		    struct al_err *err)
{
	if (!ops->init)
		return unsupported(ops, "init", err);
	if (!ops->prepare || !ops->start || !ops->kill || !ops->reap || !ops->destroy)
		return unsupported(ops, "the full lifecycle (prepare/start/kill/reap/destroy)",
				   err);
	return ops->init(conf, err);
}

int al_backend_sweep(const struct al_backend_ops *ops, const struct al_backend_conf *conf,
		     struct al_err *err)
{
	return ops->sweep ? ops->sweep(conf, err) : AL_OK;
}

struct al_sandbox *al_sandbox_new(const struct al_backend_ops *ops,
				  const struct al_backend_conf *conf,
				  const struct al_run_spec *spec)
{
	struct al_sandbox *sb = calloc(1, sizeof(*sb) + ops->priv_size);

	if (!sb)
		return NULL;
	sb->ops = ops;
	sb->conf = conf;
	sb->spec = *spec;
	sb->priv = sb + 1;
	return sb;
}

int al_backend_prepare(struct al_sandbox *sb, struct al_err *err)
{
	const struct al_job *job = sb->spec.job;

	/* What the backend cannot give, it never silently leaves out (the
	 * policy refuses such a tier; this holds if it did not). */
	if (sb->spec.network == AL_NET_EGRESS && !(sb->ops->caps & AL_CAP_EGRESS))
		return al_err_set(err, AL_EINVAL,
				  "network: the %s backend cannot give a job outbound network",
				  sb->ops->name);
	if (job && (job->nfiles || job->ncollect) && !(sb->ops->caps & AL_CAP_FILES))
		return al_err_set(err, AL_EINVAL,
				  "files: the %s backend takes no input or collected files",
				  sb->ops->name);
	return sb->ops->prepare ? sb->ops->prepare(sb, err) : unsupported(sb->ops, "prepare", err);
}

int al_backend_start(struct al_sandbox *sb, struct al_watch *w, struct al_err *err)
{
	w->nfds = 0;
	w->setup_ms = 0;
	return sb->ops->start ? sb->ops->start(sb, w, err) : unsupported(sb->ops, "start", err);
}

int al_backend_kill(struct al_sandbox *sb, struct al_err *err)
{
	return sb->ops->kill ? sb->ops->kill(sb, err) : unsupported(sb->ops, "kill", err);
}

int al_backend_reap(struct al_sandbox *sb, struct al_result *res, struct al_err *err)
{
	return sb->ops->reap ? sb->ops->reap(sb, res, err) : unsupported(sb->ops, "reap", err);
}

int al_backend_usage(struct al_sandbox *sb, struct al_usage *u)
{
	return sb->ops->usage ? sb->ops->usage(sb, u) : -1;
}

int al_backend_oom_kills(struct al_sandbox *sb, uint64_t *n)
{
	return sb->ops->oom_kills ? sb->ops->oom_kills(sb, n) : -1;
}

void al_backend_trim(struct al_sandbox *sb)
{
	if (sb && sb->ops->trim)
		sb->ops->trim(sb);
}

int al_backend_snapshot_room(struct al_sandbox *sb, const char *dir, struct al_err *err)
{
	return sb->ops->snapshot_room ? sb->ops->snapshot_room(sb, dir, err) : AL_OK;
}

int al_backend_snapshot(struct al_sandbox *sb, int fd, bool keep, struct al_err *err)
{
	if (!sb->ops->snapshot || !(sb->ops->caps & AL_CAP_SNAPSHOT || sb->ops->snapshot_ok))
		return al_err_set(err, AL_EINVAL,
				  "unsupported: the %s backend cannot save a sandbox (a snapshot)",
				  sb->ops->name);
	return sb->ops->snapshot(sb, fd, keep, err);
}

ssize_t al_backend_output(struct al_sandbox *sb, int stream, uint64_t off, void *buf, size_t cap)
{
	return sb->ops->output ? sb->ops->output(sb, stream, off, buf, cap) : -1;
}

void al_sandbox_free(struct al_sandbox *sb)
{
	if (!sb)
		return;
	if (sb->ops->destroy)
		sb->ops->destroy(sb);
	free(sb);
}
