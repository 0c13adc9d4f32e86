/* io.c - the CLI's allocations and local files: a short-lived command has
 * nothing to unwind to, so running out of memory ends it with one line and
 * EX_OSERR; a local file (or stdin) read whole, within a cap. Calls
 * nothing of the CLI's other files. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../proto/buf.h"
#include "cli.h"

void *cli_need(void *p)
{
	if (!p) {
		fprintf(stderr, "airlock: out of memory\n");
		exit(EXIT_OSERR);
	}
	return p;
}

char *cli_strdup(const char *s)
{
	return cli_need(strdup(s));
}

char *cli_strndup(const char *s, size_t n)
{
	return cli_need(strndup(s, n));
}

int cli_read_path(const char *path, struct al_bytes *out, size_t cap)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
	struct al_buf b = {0};
	char chunk[65536];
	size_t n;

	if (!f) {
		fprintf(stderr, "airlock: cannot read %s: %s\n", path, strerror(errno));
		return EXIT_NOINPUT;
	}
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		if (b.len + n > cap) {
			fprintf(stderr, "airlock: %s: larger than %zu bytes\n", path, cap);
			if (f != stdin)
				fclose(f);
			al_buf_free(&b);
			return EXIT_USAGE;
		}
		if (al_buf_append(&b, chunk, n))
			cli_need(NULL);
	}
	if (f != stdin)
		fclose(f);
	if (!b.data)
		if (al_buf_append(&b, "", 0))
			cli_need(NULL);
	out->data = b.data;
	out->len = b.len;
	return 0;
}
