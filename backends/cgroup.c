/* cgroup.c - per-job cgroups on cgroup v1 or v2 (see cgroup.h). */
#include "cgroup.h"

#include "../common/cleanup.h"
#include "../proto/buf.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int write_file(const char *dir, const char *file, const char *val)
{
	char path[PATH_MAX + 64];
	cleanup_close int fd = -1;

	if (al_pathf(path, sizeof(path), "%s/%s", dir, file))
		return AL_ESYS;
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return AL_ESYS;
	return write(fd, val, strlen(val)) == (ssize_t)strlen(val) ? 0 : -1;
}

static int read_file(const char *dir, const char *file, char *buf, size_t cap)
{
	char path[PATH_MAX + 64];
	ssize_t n;
	cleanup_close int fd = -1;

	if (al_pathf(path, sizeof(path), "%s/%s", dir, file))
		return AL_ESYS;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return AL_ESYS;
	n = read(fd, buf, cap - 1);
	if (n < 0)
		return AL_ESYS;
	buf[n] = '\0';
	return 0;
}

/* Value of "key N" in a flat keyed file such as memory.events. */
static uint64_t keyed(const char *buf, const char *key)
{
	size_t k = strlen(key);

	for (const char *p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, key, k) == 0 && p[k] == ' ')
			return strtoull(p + k + 1, NULL, 10);
	return 0;
}

/* Options field of a mountinfo line after the " - " separator. */
static bool has_opt(const char *opts, const char *want)
{
	size_t n = strlen(want);

	for (const char *p = opts; p; p = strchr(p, ','), p = p ? p + 1 : NULL)
		if (strncmp(p, want, n) == 0 &&
		    (p[n] == ',' || p[n] == '\0' || p[n] == '\n' || p[n] == ' '))
			return true;
	return false;
}

int al_cg_detect(struct al_cg_sys *sys, const char *worker_id, const char *backend,
		 struct al_err *err)
{
	char line[4096], buf[512];
	cleanup_fclose FILE *f = NULL;

	memset(sys, 0, sizeof(*sys));
	if (strchr(worker_id, '/') || strstr(worker_id, "..") ||
	    al_pathf(sys->subtree, sizeof(sys->subtree), "%s%s%s", worker_id, backend ? "/" : "",
		     backend ? backend : ""))
		return al_err_set(err, AL_EINVAL, "cgroup: unusable worker id \"%s\"", worker_id);
	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return al_err_sys(err, "cgroup: open /proc/self/mountinfo");
	while (fgets(line, sizeof(line), f)) {
		char mnt[PATH_MAX], fstype[64], opts[1024];
		const char *sep = strstr(line, " - ");

		/* 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue */
		if (!sep || sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1 ||
		    sscanf(sep + 3, "%63s %*s %1023s", fstype, opts) != 2)
			continue;
		if ((!strcmp(fstype, "cgroup2") || !strcmp(fstype, "cgroup")) && sys->nall < 16 &&
		    !al_pathf(sys->all[sys->nall], sizeof(sys->all[0]), "%s", mnt))
			sys->nall++;
		if (strcmp(fstype, "cgroup2") == 0 && !sys->v2[0]) {
			snprintf(sys->v2, sizeof(sys->v2), "%s", mnt);
		} else if (strcmp(fstype, "cgroup") == 0) {
			if (has_opt(opts, "memory"))
				snprintf(sys->memory, sizeof(sys->memory), "%s", mnt);
			if (has_opt(opts, "pids"))
				snprintf(sys->pids, sizeof(sys->pids), "%s", mnt);
			if (has_opt(opts, "cpu"))
				snprintf(sys->cpu, sizeof(sys->cpu), "%s", mnt);
			if (has_opt(opts, "cpuacct"))
				snprintf(sys->cpuacct, sizeof(sys->cpuacct), "%s", mnt);
		}
	}
	/* v2 only counts when its root offers every controller we need: a hybrid
	 * host mounts an empty v2 tree beside the v1 controllers. */
	if (sys->v2[0] && read_file(sys->v2, "cgroup.controllers", buf, sizeof(buf)) == 0 &&
	    strstr(buf, "memory") && strstr(buf, "pids") && strstr(buf, "cpu")) {
		sys->version = AL_CG_V2;
		return AL_OK;
	}
	if (sys->memory[0] && sys->pids[0] && sys->cpu[0] && sys->cpuacct[0]) {
		sys->version = AL_CG_V1;
		return AL_OK;
	}
	return al_err_set(
	    err, AL_ESANDBOX,
	    "cgroup: no usable hierarchy: need cgroup v2 with memory, pids and cpu, or v1 memory, "
	    "pids, cpu and cpuacct mounted (found v2=%s memory=%s pids=%s cpu=%s cpuacct=%s)",
	    sys->v2[0] ? sys->v2 : "-", sys->memory[0] ? "yes" : "no", sys->pids[0] ? "yes" : "no",
	    sys->cpu[0] ? "yes" : "no", sys->cpuacct[0] ? "yes" : "no");
}

static int mkdir_p(const char *path)
{
	char tmp[PATH_MAX];

	snprintf(tmp, sizeof(tmp), "%s", path);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0755) && errno != EEXIST)
			return AL_ESYS;
		*p = '/';
	}
	return mkdir(tmp, 0755) && errno != EEXIST ? -1 : 0;
}

/* v2: controllers must be enabled in every ancestor's subtree_control, from
 * the root down to airlock/<subtree> (the parent of the jobs' cgroups). */
static int v2_enable(const struct al_cg_sys *sys, struct al_err *err)
{
	char dir[PATH_MAX], *p;
	size_t root_len = strlen(sys->v2);

	if (al_pathf(dir, sizeof(dir), "%s/airlock/%s", sys->v2, sys->subtree) || mkdir_p(dir))
		return al_err_sys(err, "cgroup: mkdir %s", dir);
	for (p = dir + root_len;; p = strchr(p + 1, '/')) {
		char keep = p ? *p : '\0';

		if (p)
			*p = '\0';
		if (write_file(dir, "cgroup.subtree_control", "+memory +pids +cpu"))
			return al_err_sys(
			    err, "cgroup: enable memory, pids, cpu in %s/cgroup.subtree_control",
			    dir);
		if (!p)
			break;
		*p = keep;
	}
	return AL_OK;
}

int al_cg_enable_subtree(const struct al_cg_sys *sys, struct al_err *err)
{
	return sys->version == AL_CG_V2 ? v2_enable(sys, err) : AL_OK;
}

int al_cg_at(struct al_cg *cg, const struct al_cg_sys *sys, const char *name, struct al_err *err)
{
	const char *roots[4] = {sys->memory, sys->pids, sys->cpu, sys->cpuacct};

	memset(cg, 0, sizeof(*cg));
	cg->sys = sys;
	if (sys->version == AL_CG_V2) {
		roots[0] = sys->v2;
		cg->ndirs = 1;
	} else if (sys->version == AL_CG_V1) {
		cg->ndirs = 4;
	} else {
		return al_err_set(err, AL_ESANDBOX, "cgroup: not detected");
	}
	for (int i = 0; i < cg->ndirs; i++)
		if (al_pathf(cg->dirs[i], sizeof(cg->dirs[i]), "%s/airlock/%s/%s", roots[i],
			     sys->subtree, name)) {
			cg->ndirs = 0;
			return al_err_sys(err, "cgroup: path for %s", name);
		}
	return AL_OK;
}

int al_cg_create(struct al_cg *cg, const struct al_cg_sys *sys, const char *name,
		 const struct al_cg_limits *lim, struct al_err *err)
{
	int rc;

	if ((rc = al_cg_at(cg, sys, name, err)) || (rc = al_cg_enable_subtree(sys, err)))
		return rc;
	for (int i = 0; i < cg->ndirs; i++) {
		bool dup = false;

		for (int j = 0; j < i; j++)
			dup |= strcmp(cg->dirs[i], cg->dirs[j]) == 0; /* co-mounted cpu,cpuacct */
		if (!dup && mkdir_p(cg->dirs[i])) {
			al_err_sys(err, "cgroup: mkdir %s", cg->dirs[i]);
			goto out_destroy;
		}
	}

	if ((rc = al_cg_set_limits(cg, lim, err)))
		goto out_destroy;
	return AL_OK;

out_destroy:
	rc = err ? err->code : AL_ESANDBOX;
	al_cg_destroy(cg, NULL);
	return rc;
}

/* Write v (and, for cpu.max, the period after it) to dir/file. */
static int set_u64(const char *dir, const char *file, uint64_t v, const char *suffix,
		   struct al_err *err)
{
	char val[64];

	snprintf(val, sizeof(val), "%" PRIu64 "%s", v, suffix);
	if (write_file(dir, file, val))
		return al_err_sys(err, "cgroup: write %s to %s/%s", val, dir, file);
	return AL_OK;
}

int al_cg_set_limits(struct al_cg *cg, const struct al_cg_limits *lim, struct al_err *err)
{
	const struct al_cg_sys *sys = cg->sys;
	char val[64];
	int rc = AL_OK;

	if (sys->version == AL_CG_V2) {
		if (lim->memory_bytes) {
			rc = set_u64(cg->dirs[0], "memory.max", lim->memory_bytes, "", err);
			/* no swap: swap would let a job exceed its memory limit
			 * (the file is absent without swap accounting) */
			write_file(cg->dirs[0], "memory.swap.max", "0");
		}
		if (!rc && lim->pids)
			rc = set_u64(cg->dirs[0], "pids.max", lim->pids, "", err);
		if (!rc && lim->cpu_millis)
			rc = set_u64(cg->dirs[0], "cpu.max", lim->cpu_millis * 100, " 100000", err);
	} else {
		if (lim->memory_bytes) {
			rc = set_u64(cg->dirs[0], "memory.limit_in_bytes", lim->memory_bytes, "",
				     err);
			/* memory+swap equal to memory: no swap escape (absent
			 * when the kernel has no swap accounting) */
			snprintf(val, sizeof(val), "%" PRIu64, lim->memory_bytes);
			write_file(cg->dirs[0], "memory.memsw.limit_in_bytes", val);
		}
		if (!rc && lim->pids)
			rc = set_u64(cg->dirs[1], "pids.max", lim->pids, "", err);
		if (!rc && lim->cpu_millis)
			rc = set_u64(cg->dirs[2], "cpu.cfs_period_us", 100000, "", err);
		if (!rc && lim->cpu_millis)
			rc = set_u64(cg->dirs[2], "cpu.cfs_quota_us", lim->cpu_millis * 100, "",
				     err);
	}
	return rc;
}

int al_cg_enter_self(const struct al_cg *cg)
{
	for (int i = 0; i < cg->ndirs; i++)
		if (write_file(cg->dirs[i], "cgroup.procs", "0"))
			return AL_ESYS;
	return 0;
}

uint64_t al_cg_cpu_ns(const struct al_cg *cg)
{
	char buf[4096];

	if (cg->sys->version == AL_CG_V2 &&
	    read_file(cg->dirs[0], "cpu.stat", buf, sizeof(buf)) == 0)
		return keyed(buf, "usage_usec") * 1000;
	if (cg->sys->version == AL_CG_V1 &&
	    read_file(cg->dirs[3], "cpuacct.usage", buf, sizeof(buf)) == 0)
		return strtoull(buf, NULL, 10);
	return 0;
}

int al_cg_usage(const struct al_cg *cg, uint64_t *memory_bytes, uint64_t *pids)
{
	bool v2 = cg->sys->version == AL_CG_V2;
	char buf[8192];
	uint64_t cur, file, shmem;

	if (read_file(cg->dirs[0], v2 ? "memory.current" : "memory.usage_in_bytes", buf,
		      sizeof(buf)))
		return AL_ESYS;
	cur = strtoull(buf, NULL, 10);
	/* less the page cache a limit would reclaim (tmpfs pages stay) */
	if (read_file(cg->dirs[0], "memory.stat", buf, sizeof(buf)))
		return AL_ESYS;
	file = keyed(buf, v2 ? "file" : "cache");
	shmem = keyed(buf, "shmem");
	file -= shmem < file ? shmem : file; /* what reclaim can take */
	*memory_bytes = cur > file ? cur - file : 0;
	if (read_file(cg->dirs[v2 ? 0 : 1], "pids.current", buf, sizeof(buf)))
		return AL_ESYS;
	*pids = strtoull(buf, NULL, 10);
	return 0;
}

int al_cg_stats(const struct al_cg *cg, struct al_cg_stats *st)
{
	char buf[4096];

	memset(st, 0, sizeof(*st));
	st->cpu_ns = al_cg_cpu_ns(cg);
	if (cg->sys->version == AL_CG_V2) {
		if (read_file(cg->dirs[0], "memory.peak", buf, sizeof(buf)) == 0)
			st->peak_memory_bytes = strtoull(buf, NULL, 10);
		if (read_file(cg->dirs[0], "memory.events", buf, sizeof(buf)) == 0) {
			st->oom_kills = keyed(buf, "oom_kill");
			st->memory_hit = keyed(buf, "max") > 0 || st->oom_kills > 0;
		}
	} else if (cg->sys->version == AL_CG_V1) {
		if (read_file(cg->dirs[0], "memory.max_usage_in_bytes", buf, sizeof(buf)) == 0)
			st->peak_memory_bytes = strtoull(buf, NULL, 10);
		if (read_file(cg->dirs[0], "memory.oom_control", buf, sizeof(buf)) == 0)
			st->oom_kills = keyed(buf, "oom_kill");
		/* the limit holds memory and memory+swap: either may fail first */
		if (read_file(cg->dirs[0], "memory.failcnt", buf, sizeof(buf)) == 0)
			st->memory_hit = strtoull(buf, NULL, 10) > 0 || st->oom_kills > 0;
		if (read_file(cg->dirs[0], "memory.memsw.failcnt", buf, sizeof(buf)) == 0)
			st->memory_hit |= strtoull(buf, NULL, 10) > 0;
	}
	return 0;
}

/* Kill every task listed in dir/cgroup.procs; returns how many were listed. */
static int kill_procs(const char *dir)
{
	char buf[8192];
	int n = 0;

	if (read_file(dir, "cgroup.procs", buf, sizeof(buf)))
		return 0;
	for (char *p = buf; *p;) {
		char *end;
		long pid = strtol(p, &end, 10);

		if (end == p)
			break;
		if (pid > 0) {
			kill((pid_t)pid, SIGKILL);
			n++;
		}
		p = end;
		while (*p == '\n')
			p++;
	}
	return n;
}

static int remove_dir(const char *dir, struct al_err *err);

/* Remove the child cgroups of dir (an OCI runtime's, inside ours). */
static void remove_children(const char *dir)
{
	struct dirent *de;
	DIR *d = opendir(dir);

	while (d && (de = readdir(d))) {
		char sub[PATH_MAX + 256];

		if (de->d_type == DT_DIR && de->d_name[0] != '.' &&
		    !al_pathf(sub, sizeof(sub), "%s/%s", dir, de->d_name))
			remove_dir(sub, NULL);
	}
	if (d)
		closedir(d);
}

static int remove_dir(const char *dir, struct al_err *err)
{
	struct timespec ts = {0, 2 * 1000 * 1000};

	/* The common case: the job's processes are gone (its PID namespace
	 * ended with it) and nothing was made inside; rmdir refuses otherwise */
	if (rmdir(dir) == 0 || errno == ENOENT)
		return AL_OK;
	remove_children(dir);
	/* cgroup.kill (v2, Linux 5.14+) kills atomically, forks included */
	write_file(dir, "cgroup.kill", "1");
	for (int tries = 0; tries < 2500; tries++) { /* ~5 s */
		if (rmdir(dir) == 0 || errno == ENOENT)
			return AL_OK;
		if (errno != EBUSY)
			break;
		kill_procs(dir);
		nanosleep(&ts, NULL);
	}
	return al_err_sys(err, "cgroup: rmdir %s", dir);
}

int al_cg_destroy(struct al_cg *cg, struct al_err *err)
{
	int rc = AL_OK;

	if (!cg || !cg->sys)
		return AL_OK;
	/* v1: freeze-free approach; killing repeatedly until empty is enough
	 * because a pids limit bounds how fast new tasks appear */
	for (int i = 0; i < cg->ndirs; i++)
		if (cg->dirs[i][0] && remove_dir(cg->dirs[i], err))
			rc = AL_ESANDBOX;
	if (!rc)
		cg->ndirs = 0;
	return rc;
}

static int sweep_tree(const char *root, struct al_err *err)
{
	struct dirent *de;
	DIR *d = opendir(root);
	int rc = AL_OK;

	if (!d)
		return errno == ENOENT ? AL_OK : al_err_sys(err, "cgroup: open %s", root);
	while ((de = readdir(d))) {
		char sub[PATH_MAX + 256];

		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		if (al_pathf(sub, sizeof(sub), "%s/%s", root, de->d_name) || remove_dir(sub, err))
			rc = AL_ESANDBOX;
	}
	closedir(d);
	return rc;
}

void al_cg_remove_everywhere(const struct al_cg_sys *sys, const char *name)
{
	char dir[PATH_MAX];

	for (int i = 0; i < sys->nall; i++)
		if (!al_pathf(dir, sizeof(dir), "%s/airlock/%s/%s", sys->all[i], sys->subtree,
			      name))
			remove_dir(dir, NULL); /* ENOENT: not made in this one */
}

int al_cg_remove_worker(const struct al_cg_sys *sys, const char *worker_id, int *left)
{
	char dir[PATH_MAX];
	int had = 0;

	*left = 0;
	if (!worker_id[0] || strchr(worker_id, '/') || !strcmp(worker_id, "..") ||
	    !strcmp(worker_id, "."))
		return 0;
	for (int i = 0; i < sys->nall; i++) {
		struct stat st;

		if (al_pathf(dir, sizeof(dir), "%s/airlock/%s", sys->all[i], worker_id) ||
		    stat(dir, &st))
			continue; /* none in this one */
		had++;
		remove_dir(dir, NULL);
		*left += stat(dir, &st) == 0;
	}
	return had;
}

int al_cg_sweep(const struct al_cg_sys *sys, struct al_err *err)
{
	const char *roots[4] = {sys->v2, sys->memory, sys->pids, sys->cpu};
	char dir[PATH_MAX + 128];
	int rc = AL_OK;

	if (sys->version == AL_CG_V1)
		roots[0] = sys->cpuacct;
	for (int i = 0; i < (sys->version == AL_CG_V2 ? 1 : 4); i++) {
		if (al_pathf(dir, sizeof(dir), "%s/airlock/%s", roots[i], sys->subtree) ||
		    sweep_tree(dir, err))
			rc = AL_ESANDBOX;
	}
	return rc;
}

void al_cg_release(const struct al_cg_sys *sys)
{
	char dir[PATH_MAX + 128];

	for (int i = 0; i < sys->nall; i++) {
		char *slash;

		if (al_pathf(dir, sizeof(dir), "%s/airlock/%s", sys->all[i], sys->subtree))
			continue;
		rmdir(dir);
		/* then airlock/<worker_id>, once no other backend uses it */
		slash = strrchr(dir, '/');
		if (slash && strchr(sys->subtree, '/')) {
			*slash = '\0';
			rmdir(dir);
		}
	}
}
