/* test_proto.c - job/result codec: round trips and every rejection path. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "../../proto/mp.h"
#include "../../proto/result.h"
#include "tap.h"

/* Fixtures point job fields at string literals; the codec never writes them. */
#pragma GCC diagnostic ignored "-Wdiscarded-qualifiers"

/* mp(fmt, ...) packs a msgpack sequence: m N = map header, a N = array header,
 * s = str, u = uint64, i = int64, b = bin (ptr, len), S = str (ptr, len),
 * n = nil, t = true, f = double, x = raw bytes (ptr, len), B = al_buf.
 * Digits are skipped: "m2ss" reads as "mss" with the count 2 as an argument. */
static struct al_buf mp(const char *fmt, ...)
{
	struct al_buf b = {0};
	msgpack_packer pk;
	va_list ap;

	al_mp_packer_init(&pk, &b);
	va_start(ap, fmt);
	for (const char *c = fmt; *c; c++) {
		switch (*c) {
		case 'm': msgpack_pack_map(&pk, va_arg(ap, unsigned)); break;
		case 'a': msgpack_pack_array(&pk, va_arg(ap, unsigned)); break;
		case 's': al_mp_pack_str(&pk, va_arg(ap, const char *)); break;
		case 'u': msgpack_pack_uint64(&pk, va_arg(ap, uint64_t)); break;
		case 'i': msgpack_pack_int64(&pk, va_arg(ap, int64_t)); break;
		case 'n': msgpack_pack_nil(&pk); break;
		case 't': msgpack_pack_true(&pk); break;
		case 'f': msgpack_pack_double(&pk, va_arg(ap, double)); break;
		case 'b':
		case 'S':
		case 'x': {
			const char *p = va_arg(ap, const char *);
			size_t n = va_arg(ap, size_t);

			if (*c == 'b')
				al_mp_pack_bin(&pk, p, n);
			else if (*c == 'S')
				al_mp_pack_strn(&pk, p, n);
			else
				al_buf_append(&b, p, n);
			break;
		}
		case '0':
		case '1':
		case '2':
		case '3':
		case '4':
		case '5':
		case '6':
		case '7':
		case '8':
		case '9': break;
		case 'B': {
			struct al_buf *o = va_arg(ap, struct al_buf *);

			al_buf_append(&b, o->data, o->len);
			break;
		}
		default: abort();
		}
	}
	va_end(ap);
	return b;
}

/* The base job: v, id, tier, runtime, code. job_plus() rebuilds it without
 * the fields named in drop (space-separated) and with key=val added (val
 * already packed; key NULL adds nothing). */
static struct al_buf job_plus(const char *key, struct al_buf val, const char *drop)
{
	static const char *const names[] = {"v", "id", "tier", "runtime", "code"};
	struct al_buf base[5] = {
	    mp("u", (uint64_t)1), mp("s", "job-1"),    mp("s", "trusted"),
	    mp("s", "python"),	  mp("s", "print(1)"),
	};
	struct al_buf out = {0}, hdr;
	unsigned n = 0;
	bool keep[5];

	for (int i = 0; i < 5; i++) {
		char pat[32];

		snprintf(pat, sizeof(pat), " %s ", names[i]);
		keep[i] = !(key && strcmp(key, names[i]) == 0);
		if (drop) {
			char d[128];

			snprintf(d, sizeof(d), " %s ", drop);
			if (strstr(d, pat))
				keep[i] = false;
		}
		n += keep[i];
	}
	hdr = mp("m", n + (key != NULL));
	al_buf_append(&out, hdr.data, hdr.len);
	for (int i = 0; i < 5; i++) {
		struct al_buf k = mp("s", names[i]);

		if (keep[i]) {
			al_buf_append(&out, k.data, k.len);
			al_buf_append(&out, base[i].data, base[i].len);
		}
		al_buf_free(&k);
		al_buf_free(&base[i]);
	}
	if (key) {
		struct al_buf k = mp("s", key);

		al_buf_append(&out, k.data, k.len);
		al_buf_append(&out, val.data, val.len);
		al_buf_free(&k);
	}
	al_buf_free(&hdr);
	al_buf_free(&val);
	return out;
}

static void reject(const char *what, struct al_buf in, const char *needle)
{
	struct al_job job;
	struct al_err err = {0};
	int rc = al_job_decode(in.data ? in.data : "", in.len, &job, &err);

	TAP_OK(rc == AL_EINVAL, "reject %s: decode fails", what);
	TAP_CONTAINS(err.msg, needle, "reject %s: error names the problem", what);
	if (rc == AL_OK)
		al_job_free(&job);
	al_buf_free(&in);
}

static struct al_buf repeat_str(size_t n, char c)
{
	char *s = malloc(n + 1);
	struct al_buf b;

	memset(s, c, n);
	s[n] = '\0';
	b = mp("S", s, n);
	free(s);
	return b;
}

/* An array of n copies of one packed value. */
static struct al_buf array_of(unsigned n, struct al_buf elem)
{
	struct al_buf b = mp("a", n);

	for (unsigned i = 0; i < n; i++)
		al_buf_append(&b, elem.data, elem.len);
	al_buf_free(&elem);
	return b;
}

static void test_rejections(void)
{
	struct al_buf good = job_plus(NULL, (struct al_buf){0}, NULL), b;
	char nested[40];

	/* framing */
	reject("empty input", (struct al_buf){0}, "empty input");
	b = (struct al_buf){0};
	al_buf_append(&b, good.data, good.len - 1);
	reject("truncated job", b, "truncated");
	b = (struct al_buf){0};
	al_buf_append(&b, good.data, good.len);
	al_buf_append(&b, "\x01", 1);
	reject("trailing bytes", b, "trailing bytes");
	reject("top-level array", mp("au", 1u, (uint64_t)1), "expected map, got array");
	reject("never-used byte 0xc1", mp("x", "\xc1", (size_t)1), "invalid byte 0xc1");
	reject("array claiming 4G elements",
	       job_plus("argv", mp("x", "\xdd\xff\xff\xff\xff", (size_t)5), NULL),
	       "claims 4294967295 elements");
	reject("map claiming 4G entries", mp("x", "\xdf\xff\xff\xff\xff", (size_t)5), "claims");
	reject("string claiming 4 GB",
	       job_plus("code", mp("x", "\xdb\xff\xff\xff\xff", (size_t)5), NULL),
	       "claims 4294967295 bytes");
	memset(nested, 0x91, 20); /* 20 nested one-element arrays */
	nested[20] = 0x01;
	reject("nesting 20 deep", job_plus("argv", mp("x", nested, (size_t)21), NULL),
	       "nested deeper");
	reject("non-string key", mp("muu", 1u, (uint64_t)1, (uint64_t)2), "key #0: wrong type");
	reject("unknown field", job_plus("colour", mp("s", "red"), NULL),
	       "unknown field \"colour\"");
	reject("duplicate id field",
	       mp("msusssssssas", 5u, "v", (uint64_t)1, "id", "a", "id", "b", "tier", "t", "argv",
		  1u, "ls"),
	       "id: duplicate field");
	reject("job over 16 MiB", job_plus("stdin", repeat_str(AL_JOB_MAX_BYTES, 'a'), NULL),
	       "at most 16777216");

	/* inputs by URL */
	{
		static const char sha[] =
		    "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
		static const struct {
			const char *url, *sha, *path, *unpack, *needle;
		} bad[] = {
		    {"ftp://h/x", sha, "x", "none", "only http:// and https://"},
		    {"http://u:p@h/x", sha, "x", "none", "user information"},
		    {"http://h:0/x", sha, "x", "none", "port 0"},
		    {"http://h:99999/x", sha, "x", "none", "bad port"},
		    {"http://h_x/x", sha, "x", "none", "the host has a '_'"},
		    {"http:///x", sha, "x", "none", "no host"},
		    {"http://[::1/x", sha, "x", "none", "without ']'"},
		    {"http://h/a b", sha, "x", "none", "a space, control"},
		    {"http://h/x", "ABC", "x", "none", "64 lowercase hex"},
		    {"http://h/x", sha, "../x", "none", "\"..\" in path"},
		    {"http://h/x", sha, "/x", "none", "absolute path"},
		    {"http://h/x", sha, ".", "none", "\".\" component"},
		    {"http://h/x", sha, "x", "rar", "one of tar, zip, none"},
		};
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
			reject(
			    bad[i].needle,
			    job_plus("inputs",
				     mp("amssssssss", 1u, 4u, "url", bad[i].url, "sha256",
					bad[i].sha, "path", bad[i].path, "unpack", bad[i].unpack),
				     NULL),
			    bad[i].needle);
		reject("an input without a sha256",
		       job_plus("inputs", mp("amssss", 1u, 2u, "url", "http://h/x", "path", "x"),
				NULL),
		       "sha256: missing");
		reject("an input with an unknown field",
		       job_plus("inputs",
				mp("amssssssss", 1u, 4u, "url", "http://h/x", "sha256", sha, "path",
				   "x", "size", "1"),
				NULL),
		       "unknown or repeated field");
		reject(
		    "two inputs at one place",
		    job_plus("inputs",
			     mp("amssssssmssssss", 2u, 3u, "url", "http://h/x", "sha256", sha,
				"path", "d", 3u, "url", "http://h/y", "sha256", sha, "path", "d/e"),
			     NULL),
		    "meets inputs[0]");
		reject("17 inputs", job_plus("inputs", array_of(17, mp("u", (uint64_t)1)), NULL),
		       "at most 16");
	}

	/* git inputs */
	{
		static const struct {
			const char *url, *ref, *needle;
		} bad[] = {
		    {"ftp://h/r.git", "main", "inputs[0].git.url: \"ftp://h/r.git\": only http://"},
		    {"http://h/r.git", "../x", "inputs[0].git.ref: \"../x\""},
		    {"http://h/r.git", "-u", "git.ref: \"-u\""},
		    {"http://h/r.git", "a..b", "git.ref"},
		    {"http://h/r.git", "main.lock", "git.ref"},
		    {"http://h/r.git", "a b", "git.ref"},
		    {"http://h/r.git", "a@{1}", "git.ref"},
		    {"http://h/r.git", "refs//x", "git.ref"},
		    {"http://h/r.git", "x/", "git.ref"},
		    {"http://h/r.git", ".x", "git.ref"},
		    {"http://h/r.git", "", "git.ref"},
		};
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
			reject(bad[i].needle,
			       job_plus("inputs",
					mp("amsmssssss", 1u, 2u, "git", 2u, "url", bad[i].url,
					   "ref", bad[i].ref, "path", "src"),
					NULL),
			       bad[i].needle);
		reject("a git input without a ref",
		       job_plus("inputs",
				mp("amsmssss", 1u, 2u, "git", 1u, "url", "http://h/r.git", "path",
				   "src"),
				NULL),
		       "git.ref: missing");
		reject("a git input with a sha256 beside it",
		       job_plus("inputs",
				mp("amsmssssssss", 1u, 3u, "git", 2u, "url", "http://h/r.git",
				   "ref", "main", "path", "src", "sha256", "00"),
				NULL),
		       "a git input takes git {url, ref} and path only");
		reject("a git input with a url beside it",
		       job_plus("inputs",
				mp("amsssmssssss", 1u, 3u, "url", "http://h/x", "git", 2u, "url",
				   "http://h/r.git", "ref", "main", "path", "src"),
				NULL),
		       "a git input takes git {url, ref} and path only");
		reject("a git input with an unknown field in git",
		       job_plus("inputs",
				mp("amsmssssssss", 1u, 2u, "git", 3u, "url", "http://h/r.git",
				   "ref", "main", "depth", "5", "path", "src"),
				NULL),
		       "inputs[0].git: unknown or repeated field (url, ref)");
		reject("a git input without a path",
		       job_plus("inputs",
				mp("amsmssss", 1u, 1u, "git", 2u, "url", "http://h/r.git", "ref",
				   "main"),
				NULL),
		       "inputs[0].path: missing");
	}

	/* version */
	reject("missing v", job_plus(NULL, (struct al_buf){0}, "v"), "v: missing");
	reject("v = 2", job_plus("v", mp("u", (uint64_t)2), NULL), "unknown protocol version 2");
	reject("v as string", job_plus("v", mp("s", "1"), NULL), "v: wrong type");

	/* id, tenant, tier */
	reject("missing id", job_plus(NULL, (struct al_buf){0}, "id"), "id: missing");
	reject("id too long", job_plus("id", repeat_str(65, 'a'), NULL), "id: too long: 65");
	reject("id with a space", job_plus("id", mp("s", "a b"), NULL), "id: must be 1..64");
	reject("id not UTF-8", job_plus("id", mp("S", "\xff\xfe", (size_t)2), NULL),
	       "id: not valid UTF-8");
	reject("id as binary", job_plus("id", mp("b", "abc", (size_t)3), NULL),
	       "id: wrong type: expected string, got binary");
	reject("id as ext", job_plus("id", mp("x", "\xd4\x01\x02", (size_t)3), NULL), "got ext");
	reject("missing tier", job_plus(NULL, (struct al_buf){0}, "tier"), "tier: missing");
	reject("tier with a slash", job_plus("tier", mp("s", "../process"), NULL), "tier: must be");
	reject("tier nil", job_plus("tier", mp("n"), NULL),
	       "tier: wrong type: expected string, got nil");
	reject("empty tenant", job_plus("tenant", mp("s", ""), NULL), "tenant: must be 1..64");

	/* what to run */
	reject("unknown runtime", job_plus("runtime", mp("s", "ruby"), NULL),
	       "runtime: unknown value \"ruby\"");
	reject("runtime without code", job_plus(NULL, (struct al_buf){0}, "code"), "code: missing");
	reject("code without runtime", job_plus(NULL, (struct al_buf){0}, "runtime"),
	       "code: given without a runtime");
	reject("nothing to run", job_plus(NULL, (struct al_buf){0}, "runtime code"),
	       "argv: missing");
	reject("argv not an array", job_plus("argv", mp("s", "ls"), "runtime code"),
	       "argv: wrong type");
	reject("argv entry an integer", job_plus("argv", mp("au", 1u, (uint64_t)7), "runtime code"),
	       "argv[0]: wrong type");
	reject("argv with 257 entries",
	       job_plus("argv", array_of(257, mp("s", "x")), "runtime code"),
	       "argv: too many entries: 257");
	reject("argv entry too long",
	       job_plus("argv", array_of(1, repeat_str(4097, 'x')), "runtime code"),
	       "argv[0]: too long");
	reject("empty program name", job_plus("argv", mp("as", 1u, ""), "runtime code"),
	       "argv[0]: empty program name");
	reject("code over 1 MiB", job_plus("code", repeat_str(AL_CODE_MAX + 1, 'x'), NULL),
	       "code: too long");
	reject("code an integer", job_plus("code", mp("u", (uint64_t)3), NULL),
	       "code: wrong type: expected binary or string");
	reject("stdin over 1 MiB", job_plus("stdin", repeat_str(AL_STDIN_MAX + 1, 'x'), NULL),
	       "stdin: too long");

	/* files */
	reject("files a map", job_plus("files", mp("m", 0u), NULL), "files: wrong type");
	reject("absolute file path",
	       job_plus("files",
			mp("am2sssS", 1u, 2u, "path", "/etc/passwd", "data", "x", (size_t)1), NULL),
	       "absolute path");
	reject("file path with ..",
	       job_plus("files", mp("am2sssS", 1u, 2u, "path", "a/../../x", "data", "x", (size_t)1),
			NULL),
	       "\"..\" in path");
	reject("file path empty",
	       job_plus("files", mp("am2sssS", 1u, 2u, "path", "", "data", "x", (size_t)1), NULL),
	       "empty path");
	reject(
	    "file path with newline",
	    job_plus("files", mp("am2sssS", 1u, 2u, "path", "a\nb", "data", "x", (size_t)1), NULL),
	    "control character");
	reject(
	    "file path with //",
	    job_plus("files", mp("am2sssS", 1u, 2u, "path", "a//b", "data", "x", (size_t)1), NULL),
	    "empty or \".\" component");
	reject("duplicate file",
	       job_plus("files",
			mp("am2sssSm2sssS", 2u, 2u, "path", "a.txt", "data", "x", (size_t)1, 2u,
			   "path", "a.txt", "data", "y", (size_t)1),
			NULL),
	       "duplicate file \"a.txt\"");
	reject("a file and a file inside it",
	       job_plus("files",
			mp("am2sssSm2sssS", 2u, 2u, "path", "a", "data", "x", (size_t)1, 2u, "path",
			   "a/b", "data", "y", (size_t)1),
			NULL),
	       "\"a/b\" and \"a\": one is a file");
	reject("a file inside a later file",
	       job_plus("files",
			mp("am2sssSm2sssS", 2u, 2u, "path", "d/e/f", "data", "x", (size_t)1, 2u,
			   "path", "d/e", "data", "y", (size_t)1),
			NULL),
	       "\"d/e\" and \"d/e/f\": one is a file");
	reject("file without data", job_plus("files", mp("am1ss", 1u, 1u, "path", "a"), NULL),
	       "files[0].data: missing");
	reject("file mode setuid",
	       job_plus("files",
			mp("am3sssSsu", 1u, 3u, "path", "a", "data", "x", (size_t)1, "mode",
			   (uint64_t)04755),
			NULL),
	       "files[0].mode: out of range");
	reject("65 files",
	       job_plus("files", array_of(65, mp("m2sssS", 2u, "path", "a", "data", "", (size_t)0)),
			NULL),
	       "files: too many entries: 65");
	{
		struct al_buf big = repeat_str(5u << 20, 'z');

		/* [ {path: a, data: 5 MiB}, {path: b, data: 5 MiB} ] */
		b = mp("a", 2u);
		for (int i = 0; i < 2; i++) {
			struct al_buf e = mp("m2sss", 2u, "path", i ? "b" : "a", "data");

			al_buf_append(&b, e.data, e.len);
			al_buf_append(&b, big.data, big.len);
			al_buf_free(&e);
		}
		al_buf_free(&big);
		reject("files over 8 MiB in all", job_plus("files", b, NULL),
		       "in all, at most 8388608");
	}

	/* env */
	reject("env an array", job_plus("env", mp("a", 0u), NULL), "env: wrong type");
	reject("env name starting with a digit", job_plus("env", mp("m1ss", 1u, "1X", "v"), NULL),
	       "bad variable name \"1X\"");
	reject("env value an integer", job_plus("env", mp("m1su", 1u, "X", (uint64_t)1), NULL),
	       "env.X: wrong type");
	reject("env duplicate name", job_plus("env", mp("m2ssss", 2u, "X", "1", "X", "2"), NULL),
	       "env.X: duplicate variable");
	{
		b = mp("m", 65u);
		for (int i = 0; i < 65; i++) {
			char name[16];
			struct al_buf e;

			snprintf(name, sizeof(name), "V%d", i);
			e = mp("ss", name, "x");
			al_buf_append(&b, e.data, e.len);
			al_buf_free(&e);
		}
		reject("65 env vars", job_plus("env", b, NULL), "env: too many entries: 65");
	}

	/* limits */
	reject("limits unknown field",
	       job_plus("limits", mp("m1su", 1u, "walltime", (uint64_t)5), NULL),
	       "limits: unknown field");
	reject("zero wall limit", job_plus("limits", mp("m1su", 1u, "wall_ms", (uint64_t)0), NULL),
	       "limits.wall_ms: out of range: got 0");
	reject("negative memory limit",
	       job_plus("limits", mp("m1si", 1u, "memory_bytes", (int64_t)-5), NULL),
	       "limits.memory_bytes: must be >= 1, got -5");
	reject("pids above the cap",
	       job_plus("limits", mp("m1su", 1u, "pids", (uint64_t)100000), NULL),
	       "limits.pids: out of range");
	reject("cpu limit a float", job_plus("limits", mp("m1sf", 1u, "cpu_ms", 1.5), NULL),
	       "limits.cpu_ms: wrong type: expected integer, got float");
	reject("duplicate limit",
	       job_plus("limits", mp("m2susu", 2u, "pids", (uint64_t)4, "pids", (uint64_t)5), NULL),
	       "limits.pids: duplicate field");

	/* scheduling and the rest */
	reject("unknown network", job_plus("network", mp("s", "internet"), NULL),
	       "network: unknown value");
	reject("priority 10", job_plus("priority", mp("u", (uint64_t)10), NULL),
	       "priority: out of range");
	reject("max_attempts 0", job_plus("max_attempts", mp("u", (uint64_t)0), NULL),
	       "max_attempts: out of range: got 0");
	reject("negative deadline", job_plus("deadline_ms", mp("i", (int64_t)-1), NULL),
	       "deadline_ms: must be");
	reject("ftp callback", job_plus("callback_url", mp("s", "ftp://x/y"), NULL),
	       "callback_url: must start with http");
	reject("callback with a space", job_plus("callback_url", mp("s", "http://a b/"), NULL),
	       "callback_url: space or control");
	reject("callback too long", job_plus("callback_url", repeat_str(AL_URL_MAX + 1, 'h'), NULL),
	       "callback_url: too long");
	reject("empty idempotency key", job_plus("idempotency_key", mp("s", ""), NULL),
	       "idempotency_key: must be");
	reject("image as a path", job_plus("image", mp("s", "../../etc"), NULL),
	       "image: must be 1..64 characters of [A-Za-z0-9_-]");
	reject("image with a dot", job_plus("image", mp("s", "py.thon"), NULL), "image: must be");
	reject("image not text", job_plus("image", mp("u", (uint64_t)3), NULL), "image:");
	{
		char v[257];

		memset(v, 'v', sizeof(v));
		reject("label value too long",
		       job_plus("labels", mp("m1sS", 1u, "k", v, sizeof(v)), NULL),
		       "labels.k: too long");
	}
	reject("label key with a space", job_plus("labels", mp("m1ss", 1u, "a b", "v"), NULL),
	       "labels[0]: must be");
	reject("collect absolute path", job_plus("collect", mp("as", 1u, "/etc/shadow"), NULL),
	       "collect[0]: absolute path");
	reject("collect 17 paths", job_plus("collect", array_of(17, mp("s", "out")), NULL),
	       "collect: too many entries: 17");
	reject("collect duplicate", job_plus("collect", mp("ass", 2u, "out", "out"), NULL),
	       "collect[1]: duplicate path");
	al_buf_free(&good);
}

static void fill_full_job(struct al_job *j)
{
	static char *argv[] = {"arg1", "arg 2"};
	static char *collect[] = {"out/result.txt"};
	static struct al_file files[] = {
	    {"main.py", {"print(open('data/in.bin','rb').read())", 38}, 0644},
	    {"data/in.bin", {"\x00\xff\x01", 3}, 0600},
	};
	static struct al_kv env[] = {{"LANG", "C.UTF-8"}, {"N", "5"}};
	static struct al_kv labels[] = {{"course", "cs101"}, {"pr/number", "42"}};
	static struct al_input inputs[] = {
	    {"https://deb.example.invalid/pool/p_1.0.orig.tar.xz",
	     "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", ".", AL_UNPACK_TAR,
	     NULL},
	    {"http://[2001:db8::1]:8080/d.bin",
	     "0000000000000000000000000000000000000000000000000000000000000000", "data/d.bin",
	     AL_UNPACK_NONE, NULL},
	    {"https://git.example.invalid/team/project.git", "", "src", AL_UNPACK_GIT,
	     "refs/pull/7/head"},
	};

	memset(j, 0, sizeof(*j));
	j->version = AL_PROTO_VERSION;
	j->id = "job-42";
	j->tenant = "acme";
	j->tier = "untrusted";
	j->runtime = AL_RUNTIME_PYTHON;
	j->code = (struct al_bytes){"import sys\nprint(sys.argv)\n", 27};
	j->argv = argv;
	j->argc = 2;
	j->stdin_data = (struct al_bytes){"in\0put", 6};
	j->files = files;
	j->nfiles = 2;
	j->env = env;
	j->nenv = 2;
	j->collect = collect;
	j->ncollect = 1;
	j->limits = (struct al_limits){2000, 1000, 64u << 20, 16, 1024, 2048, 1u << 20};
	j->network = AL_NET_EGRESS;
	j->priority = 7;
	j->deadline_ms = 1900000000000ull;
	j->max_attempts = 3;
	j->idempotency_key = "k-1";
	j->callback_url = "https://hooks.example.invalid/airlock";
	j->image = "toolchain";
	j->labels = labels;
	j->nlabels = 2;
	j->inputs = inputs;
	j->ninputs = 3;
	j->submitted_ms = 1800000000000ull;
}

static void test_job_roundtrip(void)
{
	struct al_job in, out;
	struct al_buf b = {0};
	struct al_err err = {0};
	int rc;

	fill_full_job(&in);
	rc = al_job_encode(&in, &b, &err);
	TAP_OK(rc == AL_OK, "full job encodes (%s)", err.msg);
	rc = al_job_decode(b.data, b.len, &out, &err);
	TAP_OK(rc == AL_OK, "full job decodes (%s)", err.msg);
	if (rc)
		return;
	TAP_OK(strcmp(out.id, "job-42") == 0 && strcmp(out.tenant, "acme") == 0 &&
		   strcmp(out.tier, "untrusted") == 0,
	       "id, tenant, tier survive");
	TAP_OK(out.runtime == AL_RUNTIME_PYTHON && out.code.len == 27 &&
		   memcmp(out.code.data, in.code.data, 27) == 0,
	       "runtime and code survive");
	TAP_OK(out.argc == 2 && strcmp(out.argv[1], "arg 2") == 0, "argv survives");
	TAP_OK(out.stdin_data.len == 6 && memcmp(out.stdin_data.data, "in\0put", 6) == 0,
	       "stdin with a NUL byte survives");
	TAP_OK(out.nfiles == 2 && out.files[1].data.len == 3 &&
		   memcmp(out.files[1].data.data, "\x00\xff\x01", 3) == 0 &&
		   out.files[1].mode == 0600 && strcmp(out.files[1].path, "data/in.bin") == 0,
	       "binary input file and its mode survive");
	TAP_OK(out.nenv == 2 && strcmp(out.env[0].key, "LANG") == 0 &&
		   strcmp(out.env[0].value, "C.UTF-8") == 0,
	       "env survives");
	TAP_OK(memcmp(&out.limits, &in.limits, sizeof(in.limits)) == 0, "all limits survive");
	TAP_OK(out.network == AL_NET_EGRESS && out.priority == 7 && out.max_attempts == 3 &&
		   out.deadline_ms == in.deadline_ms && out.submitted_ms == in.submitted_ms,
	       "network, priority, attempts, deadline, submitted survive");
	TAP_OK(strcmp(out.idempotency_key, "k-1") == 0 &&
		   strcmp(out.callback_url, in.callback_url) == 0 && out.nlabels == 2 &&
		   strcmp(out.labels[1].key, "pr/number") == 0 && out.ncollect == 1,
	       "idempotency key, callback, labels, collect survive");
	TAP_OK(out.image && strcmp(out.image, "toolchain") == 0, "image survives");
	TAP_OK(out.ninputs == 3 && !strcmp(out.inputs[0].url, in.inputs[0].url) &&
		   !strcmp(out.inputs[0].sha256, in.inputs[0].sha256) &&
		   !strcmp(out.inputs[0].path, ".") && out.inputs[0].unpack == AL_UNPACK_TAR &&
		   !strcmp(out.inputs[1].path, "data/d.bin") &&
		   out.inputs[1].unpack == AL_UNPACK_NONE,
	       "inputs (url, sha256, path, unpack) survive");
	TAP_OK(out.inputs[2].unpack == AL_UNPACK_GIT &&
		   !strcmp(out.inputs[2].url, in.inputs[2].url) &&
		   !strcmp(out.inputs[2].ref, "refs/pull/7/head") &&
		   !strcmp(out.inputs[2].path, "src") && !out.inputs[2].sha256[0],
	       "a git input (url, ref, path) survives");
	al_job_free(&out);
	al_buf_free(&b);

	/* defaults */
	b = job_plus(NULL, (struct al_buf){0}, NULL);
	rc = al_job_decode(b.data, b.len, &out, &err);
	TAP_OK(rc == AL_OK && strcmp(out.tenant, "default") == 0 &&
		   out.priority == AL_PRIORITY_DEFAULT && out.network == AL_NET_NONE &&
		   out.limits.wall_ms == 0 && out.max_attempts == 0,
	       "minimal job gets documented defaults");
	al_job_free(&out);
	al_buf_free(&b);

	/* argv-only job */
	b = job_plus("argv", mp("ass", 2u, "/bin/echo", "hi"), "runtime code");
	rc = al_job_decode(b.data, b.len, &out, &err);
	TAP_OK(rc == AL_OK && out.runtime == AL_RUNTIME_ARGV && out.argc == 2,
	       "plain argv job decodes (%s)", err.msg);
	al_job_free(&out);
	al_buf_free(&b);

	/* encode refuses what decode refuses */
	fill_full_job(&in);
	in.id = "bad id";
	TAP_OK(al_job_encode(&in, &b, &err) == AL_EINVAL && strstr(err.msg, "id:"),
	       "encode validates too");
	al_buf_free(&b);
	al_job_free(NULL);
}

static void test_peek_and_ids(void)
{
	struct al_buf b = job_plus("colour", mp("s", "red"), NULL);
	char *id = al_job_peek_id(b.data, b.len);
	char id1[33], id2[33];

	TAP_OK(id && strcmp(id, "job-1") == 0, "peek finds the id of an invalid job");
	free(id);
	al_buf_free(&b);
	id = al_job_peek_id("\xc1", 1);
	TAP_OK(id == NULL, "peek gives NULL for garbage");
	b = job_plus("id", mp("s", "a b"), NULL);
	id = al_job_peek_id(b.data, b.len);
	TAP_OK(id == NULL, "peek refuses an id that would be unsafe as a key");
	al_buf_free(&b);
	TAP_OK(al_job_new_id(id1, NULL) == AL_OK && al_job_new_id(id2, NULL) == AL_OK &&
		   strlen(id1) == 32 && strcmp(id1, id2) != 0,
	       "generated ids are 32 hex chars and differ");
	TAP_OK(al_utf8_valid("h\xc3\xa9llo", 6) && !al_utf8_valid("\xc0\xaf", 2) &&
		   !al_utf8_valid("\xed\xa0\x80", 3) && !al_utf8_valid("a\0b", 3) &&
		   !al_utf8_valid("\xe2\x82", 2),
	       "UTF-8 check refuses overlong, surrogate, NUL and truncated sequences");
}

static void test_result(void)
{
	struct al_result r = {0}, out;
	struct al_buf b = {0};
	struct al_err err = {0};
	struct al_out_file f = {"out.txt", {"\x01\x02", 2}, true};
	int rc;

	r.version = AL_PROTO_VERSION;
	r.id = "job-42";
	r.attempt = 2;
	r.status = AL_ST_TIMEOUT;
	r.signal = 9;
	r.out = (struct al_bytes){"partial", 7};
	r.out_truncated = true;
	r.err = (struct al_bytes){"", 0};
	r.files = &f;
	r.nfiles = 1;
	r.wall_ms = 1500;
	r.cpu_ms = 1490;
	r.peak_memory_bytes = 1234567;
	r.backend = "process";
	r.worker = "host-a:1234";
	r.queued_ms = 1;
	r.started_ms = 2;
	r.finished_ms = 3;
	r.error = "wall-clock limit of 1000 ms reached";
	rc = al_result_encode(&r, &b, &err);
	TAP_OK(rc == AL_OK, "result encodes (%s)", err.msg);
	rc = al_result_decode(b.data, b.len, &out, &err);
	TAP_OK(rc == AL_OK, "result decodes (%s)", err.msg);
	if (!rc) {
		TAP_OK(out.status == AL_ST_TIMEOUT && out.attempt == 2 && !out.has_exit_code &&
			   out.signal == 9,
		       "status, attempt, no exit code, signal survive");
		TAP_OK(out.out.len == 7 && out.out_truncated && out.err.len == 0 &&
			   !out.err_truncated,
		       "streams and truncated flags survive");
		TAP_OK(out.nfiles == 1 && out.files[0].truncated && out.files[0].data.len == 2,
		       "collected file survives");
		TAP_OK(out.wall_ms == 1500 && out.peak_memory_bytes == 1234567 &&
			   strcmp(out.backend, "process") == 0 && out.finished_ms == 3 &&
			   strcmp(out.error, r.error) == 0,
		       "timings, backend, error survive");
		al_result_free(&out);
	}
	al_buf_free(&b);

	r.error = NULL;
	TAP_OK(al_result_encode(&r, &b, &err) == AL_EINVAL && strstr(err.msg, "error: required"),
	       "a timeout without an error message is refused");
	al_buf_free(&b);

	b = mp("m4susssssu", 4u, "v", (uint64_t)1, "id", "x", "status", "ok", "from_the_future",
	       (uint64_t)1);
	rc = al_result_decode(b.data, b.len, &out, &err);
	TAP_OK(rc == AL_OK && out.status == AL_ST_OK, "unknown result fields are ignored");
	al_result_free(&out);
	al_buf_free(&b);
	b = mp("m3sussss", 3u, "v", (uint64_t)1, "id", "x", "status", "exploded");
	rc = al_result_decode(b.data, b.len, &out, &err);
	TAP_OK(rc == AL_EINVAL && strstr(err.msg, "status: unknown value \"exploded\""),
	       "unknown status refused");
	al_buf_free(&b);
	b = mp("m2suss", 2u, "v", (uint64_t)1, "id", "x");
	rc = al_result_decode(b.data, b.len, &out, &err);
	TAP_OK(rc == AL_EINVAL && strstr(err.msg, "status: missing"), "missing status refused");
	al_buf_free(&b);
	b = mp("m3sussssst", 4u, "v", (uint64_t)1, "id", "x", "status", "ok", "stdout");
	rc = al_result_decode(b.data, b.len, &out, &err);
	TAP_OK(rc == AL_EINVAL, "result with a bad map count refused");
	al_buf_free(&b);
	b = mp("m4sussssst", 4u, "v", (uint64_t)1, "id", "x", "status", "ok", "stdout");
	rc = al_result_decode(b.data, b.len, &out, &err);
	TAP_OK(rc == AL_EINVAL && strstr(err.msg, "stdout: wrong type"),
	       "stdout as a bool refused");
	al_buf_free(&b);
	TAP_OK(al_status_parse("memory_limit") == AL_ST_MEMORY_LIMIT &&
		   al_status_parse("x") == AL_EINVAL &&
		   strcmp(al_status_name(AL_ST_WORKER_LOST), "worker_lost") == 0,
	       "status names map both ways");
}

int main(void)
{
	test_rejections();
	test_job_roundtrip();
	test_peek_and_ids();
	test_result();
	return tap_done();
}
