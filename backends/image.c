/* image.c - the image catalogue as the backends see it: DIR/NAME (a root
 * directory) and DIR/NAME.ext4 (the same tree as a read-only block image),
 * both made by deploy/images/build.sh from deploy/images/recipes/NAME. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "jobfs.h"
#include "../common/cleanup.h"

static const char *images_dir(const struct al_backend_conf *conf)
{
	return conf->images_dir ? conf->images_dir : AL_IMAGES_DIR;
}

int al_image_path(const struct al_backend_conf *conf, const char *name, bool disk, char *out,
		  size_t cap, struct al_err *err)
{
	char mark[4096];
	bool built;

	/* names are checked by the codec and the policy ([a-z0-9_-]): never a path */
	if (!name || !name[0] || strchr(name, '/') || name[0] == '.')
		return al_err_set(err, AL_EINVAL, "image: \"%s\" is not an image name",
				  name ? name : "");
	if (snprintf(out, cap, disk ? "%s/%s.ext4" : "%s/%s", images_dir(conf), name) >= (int)cap)
		return al_err_set(err, AL_EINVAL, "image: the path of %s is too long", name);
	snprintf(mark, sizeof(mark), "%s/%s/.airlock-image", images_dir(conf), name);
	if ((built = !access(mark, R_OK)) && !access(out, R_OK))
		return AL_OK;
	return al_err_set(err, AL_ESANDBOX,
			  "image %s is not built (no %s): run `deploy/images/build.sh%s%s "
			  "%s` (or `make images`)",
			  name, built ? out : mark, conf->images_dir ? " --out " : "",
			  conf->images_dir ? conf->images_dir : "", name);
}

void al_image_hash(const struct al_backend_conf *conf, const char *name, char *out, size_t cap)
{
	char path[4096];
	ssize_t n = -1;
	int fd;

	snprintf(out, cap, "unknown");
	snprintf(path, sizeof(path), "%s/%s/.airlock-image", images_dir(conf), name);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return;
	n = read(fd, out, cap - 1);
	close(fd);
	if (n <= 0) {
		snprintf(out, cap, "unknown");
		return;
	}
	out[n] = '\0';
	out[strcspn(out, "\n")] = '\0';
}

int al_image_layers(const struct al_backend_conf *conf, const char *dir, int *lower, int *blank,
		    char *out, size_t cap, struct al_err *err)
{
	char empty[PATH_MAX];

	*lower = *blank = -1;
	if (al_pathf(empty, sizeof(empty), "%s/empty-layer", conf->state_dir))
		return al_err_set(err, AL_EINVAL, "image: the state directory's path is too long");
	if (al_mkdir_p(conf->state_dir, 0755) || (mkdir(empty, 0555) && errno != EEXIST))
		return al_err_sys(err, "image: make %s", empty);
	if ((*lower = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return al_err_sys(err, "image: open %s", dir);
	if ((*blank = open(empty, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		al_closep(lower);
		return al_err_sys(err, "image: open %s", empty);
	}
	snprintf(out, cap, "/proc/self/fd/%d:/proc/self/fd/%d", *lower, *blank);
	return AL_OK;
}

int al_image_tree(const struct al_backend_conf *conf, const char *dir, struct al_err *err)
{
	cleanup_close int lower = -1, blank = -1, fs = -1;
	char layers[64];
	int mnt, rc;

	if ((rc = al_image_layers(conf, dir, &lower, &blank, layers, sizeof(layers), err)))
		return rc;
	if ((fs = fsopen("overlay", FSOPEN_CLOEXEC)) < 0 ||
	    fsconfig(fs, FSCONFIG_SET_STRING, "source", "airlock-image", 0) ||
	    fsconfig(fs, FSCONFIG_SET_STRING, "lowerdir", layers, 0) ||
	    fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0)) {
		return al_err_sys(err, "image: an overlay of %s", dir);
	}
	mnt =
	    fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	if (mnt < 0)
		al_err_sys(err, "image: mount the overlay of %s", dir);
	return mnt;
}
