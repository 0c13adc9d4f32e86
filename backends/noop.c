/* noop.c - a backend that runs nothing and succeeds at once. It exists only
 * to measure the queue's own overhead in tests/bench; the default policy
 * never routes a tier to it and the worker offers it only when its config
 * names it. */
#include <sys/eventfd.h>
#include <unistd.h>

#include "backend.h"

struct noop_sb {
	int efd;
};

static int noop_init(const struct al_backend_conf *conf, struct al_err *err)
{
	(void)conf;
	(void)err;
	return AL_OK;
}

static int noop_prepare(struct al_sandbox *sb, struct al_err *err)
{
	struct noop_sb *n = sb->priv;

	n->efd = eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK); /* readable at once */
	return n->efd < 0 ? al_err_sys(err, "noop: eventfd") : AL_OK;
}

static int noop_start(struct al_sandbox *sb, struct al_watch *w, struct al_err *err)
{
	struct noop_sb *n = sb->priv;

	(void)err;
	w->fds[w->nfds++] = n->efd;
	return AL_OK;
}

static int noop_kill(struct al_sandbox *sb, struct al_err *err)
{
	(void)sb;
	(void)err;
	return AL_OK;
}

static int noop_reap(struct al_sandbox *sb, struct al_result *res, struct al_err *err)
{
	(void)sb;
	(void)err;
	res->status = AL_ST_OK;
	res->has_exit_code = true;
	res->exit_code = 0;
	return 1;
}

static void noop_destroy(struct al_sandbox *sb)
{
	struct noop_sb *n = sb->priv;

	if (n->efd > 0)
		close(n->efd);
	n->efd = -1;
}

const struct al_backend_ops al_backend_noop = {
    .name = "noop",
    .caps = AL_CAPS_NOOP,
    .priv_size = sizeof(struct noop_sb),
    .init = noop_init,
    .prepare = noop_prepare,
    .start = noop_start,
    .kill = noop_kill,
    .reap = noop_reap,
    .destroy = noop_destroy,
};
