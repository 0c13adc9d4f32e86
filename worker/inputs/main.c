/* main.c - airlock-inputs: fetches a job's inputs for the worker, outside
 * every sandbox and outside the worker's own process (an archive's parser
 * never runs in the worker): each URL through the tier's egress rules
 * (the name checked against them, every address it resolves to before
 * the connection, every redirect again), at most max bytes, its SHA-256
 * verified; kept in the host's cache by hash (a size cap, least recently
 * used out first); then every input unpacked (tar, zip) or kept whole
 * into one inputs pack (backends/inpack.h), refusing what cannot be a
 * tree inside the work directory: "..", absolute paths, links pointing
 * out, devices, more than max bytes unpacked (a zip bomb stops there).
 *
 * usage: airlock-inputs --cache DIR --cache-bytes N --max-bytes N
 *        --timeout-ms N --out PACK [--ca FILE] [--ca-extra FILE] [--ca-into PATH]
 *        [--uid UID] [--allow RULE]... -- [URL SHA256 PATH UNPACK]...
 * A git input is URL REF PATH git (git.c: git runs as --uid).
 * --ca-into: the pack also holds, at PATH, the host's CA bundle with the
 * CAs of --ca (a tier's egress.ca_file: a network's intercepting proxy)
 * and --ca-extra (the worker's own, egress.cache_https) after it.
 *
 * It prints one JSON line: {"ok":true,"inputs":[{"url","sha256","bytes",
 * "cached"}],"pack_bytes":N} or {"ok":false,"status":"rejected" (the
 * job's fault: a wrong hash, a refused host, a 404, too big, a bad
 * archive) or "sandbox_error" (the network or the host),"error":"..."}. */
#include <archive.h>
#include <archive_entry.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <stdarg.h>

#include "../../backends/inpack.h"
#include "../../common/cleanup.h"
#include "../../common/egress.h"
#include "../../proto/inputs.h"
#include "fetcher.h"

#define REDIRECTS_MAX 5

/* ---- fetching ---- */

static curl_socket_t open_socket(void *arg, curlsocktype purpose, struct curl_sockaddr *a)
{
	struct fetch *f = arg;

	(void)purpose;
	if (fx_addr_ok(f, &a->addr))
		return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
	return CURL_SOCKET_BAD;
}

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
	struct fetch *f = arg;
	size_t len = size * n;

	if (f->got + len > fx.max_bytes) {
		f->too_big = true;
		return 0;
	}
	f->got += len;
	EVP_DigestUpdate(f->md, p, len);
	return al_write_all(f->fd, p, len) ? 0 : len;
}

static void fetch(size_t i, const char *tmp)
{
	struct input *in = &fx.in[i];
	struct fetch f = {.i = i};
	char what[48], host[256], url[AL_INPUT_URL_MAX + 1], got_hex[65];
	unsigned char md[32];
	unsigned mdlen = 0;
	long code = 0;
	CURL *c = curl_easy_init();
	CURLcode cr = CURLE_OK;

	snprintf(what, sizeof(what), "inputs[%zu]", i);
	snprintf(url, sizeof(url), "%s", in->url);
	if (!c || !(f.md = EVP_MD_CTX_new()))
		fx_die("sandbox_error", "%s: out of memory", what);
	for (int hop = 0;; hop++) {
		char *next = NULL;

		fx_check_url(&f, what, url, host, sizeof(host));
		if ((f.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0)
			fx_die("sandbox_error", "%s: the cache: %s", what, strerror(errno));
		f.got = 0;
		EVP_DigestInit_ex(f.md, EVP_sha256(), NULL);
		curl_easy_reset(c);
		curl_easy_setopt(c, CURLOPT_URL, url);
		curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
		curl_easy_setopt(c, CURLOPT_PROXY, ""); /* never the environment's */
		curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
		curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)fx.timeout_ms);
		curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 15000L);
		curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)fx.max_bytes);
		curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, open_socket);
		curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, &f);
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
		curl_easy_setopt(c, CURLOPT_WRITEDATA, &f);
		curl_easy_setopt(c, CURLOPT_USERAGENT, "airlock-inputs/1");
		if (fx.ca_blob) {
			struct curl_blob b = {fx.ca_blob, fx.ca_len, CURL_BLOB_NOCOPY};

			curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &b);
		}
		cr = curl_easy_perform(c);
		close(f.fd);
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
		if (f.refused[0])
			fx_die("rejected", "%s: %s", what, f.refused);
		if (f.too_big || cr == CURLE_FILESIZE_EXCEEDED)
			fx_die("rejected",
			       "%s: %s is larger than the tier's max_input_bytes (%llu)", what, url,
			       (unsigned long long)fx.max_bytes);
		if (cr == CURLE_WRITE_ERROR)
			fx_cache_room_or_die(what);
		if (cr != CURLE_OK)
			fx_die("sandbox_error", "%s: %s: %s", what, url, curl_easy_strerror(cr));
		if (code >= 300 && code < 400 &&
		    curl_easy_getinfo(c, CURLINFO_REDIRECT_URL, &next) == CURLE_OK && next) {
			if (hop == REDIRECTS_MAX)
				fx_die("rejected", "%s: more than %d redirects", what,
				       REDIRECTS_MAX);
			if (strlen(next) > AL_INPUT_URL_MAX)
				fx_die("rejected", "%s: a redirect to a URL too long", what);
			snprintf(what, sizeof(what), "inputs[%zu] (redirected)", i);
			snprintf(url, sizeof(url), "%s", next);
			continue;
		}
		break;
	}
	if (code != 200)
		fx_die(code >= 500 ? "sandbox_error" : "rejected", "%s: %s answered HTTP %ld", what,
		       url, code);
	EVP_DigestFinal_ex(f.md, md, &mdlen);
	for (unsigned k = 0; k < 32; k++)
		snprintf(got_hex + 2 * k, 3, "%02x", md[k]);
	if (strcmp(got_hex, in->sha256))
		fx_die("rejected", "inputs[%zu]: %s has SHA-256 %s, not the %s the job gives", i,
		       in->url, got_hex, in->sha256);
	in->bytes = f.got;
	EVP_MD_CTX_free(f.md);
	curl_easy_cleanup(c);
}

static void get(size_t i)
{
	struct input *in = &fx.in[i];

	if (fx_cache_take(i, in->sha256)) {
		/* a hit: its name is its hash, checked when it went in; the
		 * name still goes through the rules (the job could not fetch it) */
		struct fetch f;
		char host[256];

		fx_check_url(&f, "inputs", in->url, host, sizeof(host));
		return;
	}
	fetch(i, fx_cache_part(i));
	fx_cache_put(i, in->sha256);
}

/* ---- the pack ---- */

static struct al_pack_w W;
static uint64_t unpacked;

static void pack_failed(const struct al_err *err)
{
	fx_die(err->code == AL_EINVAL ? "rejected" : "sandbox_error", "%s", err->msg);
}

/* prefix/name into out ("." = the top) */
static void join(char *out, size_t cap, const char *prefix, const char *name)
{
	if (!strcmp(prefix, "."))
		snprintf(out, cap, "%s", name);
	else if (!*name)
		snprintf(out, cap, "%s", prefix);
	else
		snprintf(out, cap, "%s/%s", prefix, name);
}

/* An archive's entry name as the tree takes it: "./" and a trailing "/"
 * gone; false when it is not a path inside the tree. */
static bool entry_name(const char *raw, char *out, size_t cap)
{
	size_t n;

	while (raw[0] == '.' && raw[1] == '/')
		raw += 2;
	snprintf(out, cap, "%s", raw);
	n = strlen(out);
	while (n > 0 && out[n - 1] == '/')
		out[--n] = '\0';
	return n == 0 || strlen(raw) >= cap ? n == 0 && strlen(raw) < cap : al_pack_path_ok(out);
}

/* The data of the entry being read, into the pack (its size patched in
 * afterwards: a zip may not say it ahead). */
static void pack_data(struct archive *a, const char *path, unsigned mode, size_t i, char commit[41])
{
	struct al_err err = {0};
	off_t at = (off_t)W.off; /* the record's header */
	uint64_t size = 0;
	char buf[65536];
	unsigned char le[8];
	la_ssize_t r;

	if (al_pack_w_entry(&W, AL_PACK_FILE, path, mode, 0, &err))
		pack_failed(&err);
	while ((r = archive_read_data(a, buf, sizeof(buf))) > 0) {
		if ((unpacked += (uint64_t)r) > fx.max_bytes)
			fx_die(
			    "rejected",
			    "inputs[%zu]: unpacks to more than the tier's max_input_bytes (%llu): "
			    "stopped at \"%.200s\"",
			    i, (unsigned long long)fx.max_bytes, path);
		if (al_pack_w_data(&W, buf, (size_t)r, &err))
			pack_failed(&err);
		if (commit && !size && r >= 40 && strspn(buf, "0123456789abcdef") >= 40)
			snprintf(commit, 41, "%.40s", buf); /* a detached HEAD: the commit */
		size += (uint64_t)r;
	}
	if (r < 0)
		fx_die("rejected", "inputs[%zu]: \"%.200s\": %s", i, path, archive_error_string(a));
	for (int k = 0; k < 8; k++)
		le[k] = (size >> (8 * k)) & 0xff;
	if (pwrite(W.fd, le, 8, at + 8) != 8)
		fx_die("sandbox_error", "inputs: write the pack: %s", strerror(errno));
}

static void unpack_archive(size_t i)
{
	struct input *in = &fx.in[i];
	struct archive *a = archive_read_new();
	struct archive_entry *e;
	struct al_err err = {0};
	char name[AL_PACK_PATH_MAX + 1], path[AL_PACK_PATH_MAX + 1];
	char tname[AL_PACK_PATH_MAX + 1], tpath[AL_PACK_PATH_MAX + 1];
	int r;

	if (in->unpack == AL_UNPACK_ZIP) {
		archive_read_support_format_zip(a);
	} else {
		archive_read_support_format_tar(a);
		archive_read_support_format_gnutar(a);
		archive_read_support_filter_all(a);
		/* git's: the tar of .git, then git archive's of the tree */
		if (in->unpack == AL_UNPACK_GIT)
			archive_read_set_options(a, "tar:read_concatenated_archives");
	}
	if (archive_read_open_fd(a, in->fd, 65536) != ARCHIVE_OK)
		fx_die("rejected", "inputs[%zu]: not a %s archive: %s", i,
		       al_unpack_name(in->unpack), archive_error_string(a));
	while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		const char *raw = archive_entry_pathname(e);
		const char *hard = archive_entry_hardlink(e);
		mode_t type = archive_entry_filetype(e);
		unsigned mode = archive_entry_perm(e) & 0777;

		if (!mode) /* a zip made without Unix modes */
			mode = type == AE_IFDIR ? 0755 : 0644;

		if (!raw || !entry_name(raw, name, sizeof(name)))
			fx_die("rejected",
			       "inputs[%zu]: entry \"%.200s\" is not a path inside the tree "
			       "(absolute, or with \"..\")",
			       i, raw ? raw : "(unreadable name)");
		if (!name[0])
			continue; /* "./" itself */
		join(path, sizeof(path), in->path, name);
		if (!al_pack_path_ok(path))
			fx_die("rejected", "inputs[%zu]: entry \"%.200s\": a path too long", i,
			       name);
		if (hard) {
			if (!entry_name(hard, tname, sizeof(tname)) || !tname[0])
				fx_die("rejected",
				       "inputs[%zu]: \"%.200s\" is a hard link to \"%.200s\", "
				       "outside the tree",
				       i, name, hard);
			join(tpath, sizeof(tpath), in->path, tname);
			if (al_pack_w_entry(&W, AL_PACK_COPY, path, 0, strlen(tpath), &err) ||
			    al_pack_w_data(&W, tpath, strlen(tpath), &err))
				pack_failed(&err);
		} else if (type == AE_IFDIR) {
			if (al_pack_w_entry(&W, AL_PACK_DIR, path, mode, 0, &err))
				pack_failed(&err);
		} else if (type == AE_IFREG) {
			pack_data(a, path, mode, i,
				  in->unpack == AL_UNPACK_GIT && !strcmp(name, ".git/HEAD")
				      ? in->commit
				      : NULL);
		} else if (type == AE_IFLNK) {
			const char *t = archive_entry_symlink(e);

			if (!t || !al_pack_link_ok(name, t))
				fx_die("rejected",
				       "inputs[%zu]: \"%.200s\" is a symlink to \"%.200s\", "
				       "which points out of the tree",
				       i, name, t ? t : "?");
			if (al_pack_w_entry(&W, AL_PACK_SYMLINK, path, 0777, strlen(t), &err) ||
			    al_pack_w_data(&W, t, strlen(t), &err))
				pack_failed(&err);
		} else {
			fx_die("rejected",
			       "inputs[%zu]: \"%.200s\" is a device, fifo or socket: a tree "
			       "of files, directories and links only",
			       i, name);
		}
	}
	if (r != ARCHIVE_EOF)
		fx_die("rejected", "inputs[%zu]: a broken %s archive: %s", i,
		       al_unpack_name(in->unpack), archive_error_string(a));
	archive_read_free(a);
}

static void pack_whole(size_t i)
{
	struct input *in = &fx.in[i];
	struct al_err err = {0};
	char buf[65536];
	ssize_t r;

	if ((unpacked += in->bytes) > fx.max_bytes)
		fx_die("rejected", "inputs: more than the tier's max_input_bytes (%llu) in all",
		       (unsigned long long)fx.max_bytes);
	if (al_pack_w_entry(&W, AL_PACK_FILE, in->path, 0644, in->bytes, &err))
		pack_failed(&err);
	while ((r = read(in->fd, buf, sizeof(buf))) > 0)
		if (al_pack_w_data(&W, buf, (size_t)r, &err))
			pack_failed(&err);
}

/* ---- start ---- */

static uint64_t number(const char *s, const char *what)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || !*s)
		fx_die("sandbox_error", "airlock-inputs: %s: not a number: %s", what, s);
	return v;
}

static void load_ca(void)
{
	static const char *const system[] = {"/etc/ssl/certs/ca-certificates.crt",
					     "/etc/pki/tls/certs/ca-bundle.crt"};
	/* the worker's own CA (--ca-extra) is in the blob curl trusts too: its
	 * key is the worker's, and only the worker's proxy shows its leaves */
	const char *files[3] = {NULL, fx.ca, fx.ca_extra};
	FILE *m;

	for (size_t k = 0; k < 2 && !files[0]; k++)
		if (!access(system[k], R_OK))
			files[0] = system[k];
	if (!(m = open_memstream(&fx.ca_blob, &fx.ca_len)))
		fx_die("sandbox_error", "out of memory");
	for (int k = 0; k < 3; k++) {
		FILE *f = files[k] ? fopen(files[k], "r") : NULL;
		char buf[8192];
		size_t n;

		if (!f && k > 0 && files[k])
			fx_die("sandbox_error", "%s %s: %s",
			       k == 1 ? "egress.ca_file" : "the worker's egress CA", files[k],
			       strerror(errno));
		while (f && (n = fread(buf, 1, sizeof(buf), f)) > 0)
			fwrite(buf, 1, n, m);
		fputc('\n', m);
		if (f)
			fclose(f);
	}
	fclose(m);
}

int main(int argc, char **argv)
{
	struct al_err err = {0};
	int i = 1;
	cleanup_close int out = -1;

	fx.on_die = fx_git_cleanup;
	for (; i < argc && !strncmp(argv[i], "--", 2); i += 2) {
		const char *k = argv[i] + 2, *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(k, "")) {
			i++; /* "--": the inputs follow */
			break;
		}
		if (!v)
			fx_die("sandbox_error", "airlock-inputs: --%s needs a value", k);
		if (!strcmp(k, "cache"))
			fx.cache = v;
		else if (!strcmp(k, "out"))
			fx.out = v;
		else if (!strcmp(k, "ca"))
			fx.ca = v;
		else if (!strcmp(k, "ca-into"))
			fx.ca_into = v;
		else if (!strcmp(k, "ca-extra"))
			fx.ca_extra = v;
		else if (!strcmp(k, "cache-bytes"))
			fx.cache_bytes = number(v, k);
		else if (!strcmp(k, "max-bytes"))
			fx.max_bytes = number(v, k);
		else if (!strcmp(k, "timeout-ms"))
			fx.timeout_ms = number(v, k);
		else if (!strcmp(k, "uid"))
			fx.uid = (uid_t)number(v, k);
		else if (!strcmp(k, "allow") && fx.nrules < AL_EGRESS_RULES_MAX) {
			if (al_egress_rule_parse(v, &fx.rules[fx.nrules++], &err))
				fx_die("sandbox_error", "airlock-inputs: %s", err.msg);
		} else
			fx_die("sandbox_error", "airlock-inputs: unknown option --%s", k);
	}
	if (!fx.cache || !fx.out || !fx.max_bytes || !fx.timeout_ms || (argc - i) % 4 ||
	    (argc - i) / 4 > AL_INPUTS_MAX || (argc == i && !fx.ca_into) ||
	    (fx.ca_into && !fx.ca && !fx.ca_extra))
		fx_die("sandbox_error",
		       "usage: airlock-inputs --cache DIR --cache-bytes N --max-bytes "
		       "N --timeout-ms N --out PACK [--ca FILE] [--allow RULE]... URL "
		       "SHA256 PATH UNPACK...");
	for (; i < argc; i += 4) {
		struct input *in = &fx.in[fx.nin++];

		in->url = argv[i];
		in->path = argv[i + 2];
		in->unpack = !strcmp(argv[i + 3], "tar")   ? AL_UNPACK_TAR
			     : !strcmp(argv[i + 3], "zip") ? AL_UNPACK_ZIP
			     : !strcmp(argv[i + 3], "git") ? AL_UNPACK_GIT
							   : AL_UNPACK_NONE;
		in->fd = -1;
		if (in->unpack == AL_UNPACK_GIT) {
			in->ref = argv[i + 1];
			if (!al_git_ref_ok(in->ref))
				fx_die("rejected", "inputs[%zu].git.ref: not a ref", fx.nin - 1);
		} else if (!fx_hex64(in->sha256 = argv[i + 1]))
			fx_die("rejected", "inputs[%zu].sha256: not 64 hex digits", fx.nin - 1);
	}
	/* 0711: a git run (the slot's uid) reaches its directory in it; every
	 * entry is root's, 0600 */
	if ((mkdir(fx.cache, 0711) && errno != EEXIST) || chmod(fx.cache, 0711))
		fx_die("sandbox_error", "the input cache %s: %s", fx.cache, strerror(errno));
	curl_global_init(CURL_GLOBAL_DEFAULT);
	load_ca();
	for (size_t k = 0; k < fx.nin; k++) {
		if (fx.in[k].unpack == AL_UNPACK_GIT)
			fx_git_get(k);
		else
			get(k);
	}
	/* 0644 in a 0700 directory: a microVM's VMM user opens it in its jail */
	if ((out = open(fx.out, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644)) < 0)
		fx_die("sandbox_error", "the inputs pack %s: %s", fx.out, strerror(errno));
	W.fd = out;
	for (size_t k = 0; k < fx.nin; k++) {
		if (fx.in[k].unpack == AL_UNPACK_NONE)
			pack_whole(k);
		else
			unpack_archive(k);
	}
	if (fx.ca_into && (al_pack_w_entry(&W, AL_PACK_FILE, fx.ca_into, 0644, fx.ca_len, &err) ||
			   al_pack_w_data(&W, fx.ca_blob, fx.ca_len, &err)))
		pack_failed(&err);
	if (al_pack_w_end(&W, &err))
		pack_failed(&err);
	fx_answer(true, NULL, NULL, W.off);
	return 0;
}
