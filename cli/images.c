/* images.c - airlock images [--dir DIR] [--json]: what each catalogue
 * image on this host holds (deploy/images/build.sh made them): its name,
 * content hash (.airlock-image, as results report it in info.image), the
 * size of its block image (NAME.ext4, what a microVM reads), and its
 * recipe's packages with the versions installed (the recipe's list from
 * .inputs, the versions from the image's own dpkg status). Reads files
 * only: no Redis. */
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../common/cleanup.h"
#include "cli.h"

#define PKG_MAX 64

struct image {
	char name[65];
	char hash[80];
	long long size; /* of NAME.ext4; -1 when there is none */
	size_t npkg;
	char *pkg[PKG_MAX];
	char *ver[PKG_MAX]; /* NULL: not installed (a broken image) */
};

/* The first line of path (newline cut) into out; false when unreadable. */
static bool first_line(const char *path, const char *prefix, char *out, size_t cap)
{
	cleanup_fclose FILE *f = fopen(path, "r");
	char line[4096];

	while (f && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (!strncmp(line, prefix, strlen(prefix))) {
			snprintf(out, cap, "%s", line + strlen(prefix));
			return true;
		}
	}
	return false;
}

/* The recipe's packages (.inputs: "packages a,b,c"). */
static void read_packages(const char *dir, struct image *im)
{
	char path[4096], list[4096];

	snprintf(path, sizeof(path), "%s/%s/.inputs", dir, im->name);
	if (!first_line(path, "packages ", list, sizeof(list)))
		return;
	for (char *save = NULL, *p = strtok_r(list, ",", &save); p && im->npkg < PKG_MAX;
	     p = strtok_r(NULL, ",", &save))
		im->pkg[im->npkg++] = strdup(p);
}

/* Each recipe package's version, from var/lib/dpkg/status: paragraphs of
 * "Field: value" lines, an installed one says "Status: install ok
 * installed". */
static void read_versions(const char *dir, struct image *im)
{
	char path[4096], line[4096], pkg[256] = "", ver[256] = "";
	bool installed = false;
	cleanup_fclose FILE *f = NULL;

	snprintf(path, sizeof(path), "%s/%s/var/lib/dpkg/status", dir, im->name);
	if (!(f = fopen(path, "r")))
		return;
	for (bool more = true; more;) {
		more = fgets(line, sizeof(line), f) != NULL;
		line[more ? strcspn(line, "\n") : 0] = '\0';
		if (line[0]) {
			if (!strncmp(line, "Package: ", 9))
				snprintf(pkg, sizeof(pkg), "%.200s", line + 9);
			else if (!strncmp(line, "Version: ", 9))
				snprintf(ver, sizeof(ver), "%.200s", line + 9);
			else if (!strncmp(line, "Status: ", 8))
				installed = strstr(line, " installed") != NULL;
			continue;
		}
		for (size_t i = 0; installed && i < im->npkg; i++)
			if (!strcmp(im->pkg[i], pkg) && !im->ver[i])
				im->ver[i] = strdup(ver);
		pkg[0] = ver[0] = '\0';
		installed = false;
	}
}

static void image_free(struct image *im)
{
	for (size_t i = 0; i < im->npkg; i++) {
		free(im->pkg[i]);
		free(im->ver[i]);
	}
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct image *)a)->name, ((const struct image *)b)->name);
}

static void print_text(const struct image *ims, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct image *im = &ims[i];

		printf("%-14s %s  ", im->name, im->hash);
		if (im->size >= 0)
			printf("%lld MiB block image\n", (im->size + (1 << 20) - 1) >> 20);
		else
			printf("no block image (microVMs cannot use it)\n");
		for (size_t k = 0; k < im->npkg; k++)
			printf("  %-26s %s\n", im->pkg[k],
			       im->ver[k] ? im->ver[k] : "NOT INSTALLED");
	}
}

static int print_json(const struct image *ims, size_t n)
{
	json_t *all = json_array();
	char *text;

	for (size_t i = 0; all && i < n; i++) {
		json_t *pk = json_object();

		for (size_t k = 0; pk && k < ims[i].npkg; k++)
			json_object_set_new(pk, ims[i].pkg[k],
					    ims[i].ver[k] ? json_string(ims[i].ver[k])
							  : json_null());
		json_array_append_new(all, json_pack("{s:s, s:s, s:I, s:o*}", "name", ims[i].name,
						     "hash", ims[i].hash, "size_bytes",
						     (json_int_t)ims[i].size, "packages", pk));
	}
	text = all ? json_dumps(all, JSON_INDENT(2)) : NULL;
	json_decref(all);
	if (!text)
		return EXIT_OSERR;
	printf("%s\n", text);
	free(text);
	return 0;
}

int cli_images(const struct cli_where *where, int argc, char **argv)
{
	struct cli_images_flags fl = {.dir = "/var/lib/airlock/images"};
	const char *dir;
	bool json;
	int n_args = argc - 1;
	struct image ims[64];
	size_t n = 0;
	DIR *d;
	struct dirent *e;
	int rc;

	(void)where;
	if ((rc = cli_flags_take(cli_images_flags, 0, "images", &fl, &n_args, argv + 1)))
		return rc;
	if (n_args) {
		fprintf(stderr, "airlock images: no arguments but options (see airlock images "
				"--help)\n");
		return EXIT_USAGE;
	}
	dir = fl.dir;
	json = fl.json;
	if (!(d = opendir(dir))) {
		fprintf(stderr,
			"airlock: images: cannot read %s: %m (build the catalogue: make "
			"images)\n",
			dir);
		return EXIT_NOINPUT;
	}
	while ((e = readdir(d)) && n < sizeof(ims) / sizeof(ims[0])) {
		struct image *im = &ims[n];
		char path[4096];
		struct stat st;

		if (e->d_name[0] == '.' || strlen(e->d_name) >= sizeof(im->name))
			continue;
		memset(im, 0, sizeof(*im));
		snprintf(im->name, sizeof(im->name), "%s", e->d_name);
		snprintf(path, sizeof(path), "%s/%s/.airlock-image", dir, e->d_name);
		if (!first_line(path, "", im->hash, sizeof(im->hash)))
			continue; /* not an image */
		snprintf(path, sizeof(path), "%s/%s/var/lib/dpkg/status", dir, e->d_name);
		if (stat(path, &st))
			continue; /* the microVM guest (a kernel and an initramfs) */
		snprintf(path, sizeof(path), "%s/%s.ext4", dir, e->d_name);
		im->size = stat(path, &st) ? -1 : (long long)st.st_size;
		read_packages(dir, im);
		read_versions(dir, im);
		n++;
	}
	closedir(d);
	if (!n) {
		fprintf(stderr,
			"airlock: images: no image in %s (build the catalogue: make images)\n",
			dir);
		return EXIT_NOINPUT;
	}
	qsort(ims, n, sizeof(ims[0]), by_name);
	if (json)
		rc = print_json(ims, n);
	else
		print_text(ims, n), rc = 0;
	for (size_t i = 0; i < n; i++)
		image_free(&ims[i]);
	return rc;
}
