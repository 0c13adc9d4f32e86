/* gradejob.c - grading jobs for the CLI (gradejob.h). */
#include "gradejob.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "../common/cleanup.h"
#include "../proto/grade.h"
#include "../proto/json.h"

#define SPEC_MAX (16u << 20) /* a spec file or one file it names */

/* A file's bytes (malloc'd, NUL-terminated); AL_ESYS/AL_EINVAL with err. */
static int slurp(const char *path, struct al_bytes *out, struct al_err *err)
{
	cleanup_fclose FILE *f = fopen(path, "rb");
	struct stat st;
	size_t n;

	if (!f)
		return al_err_sys(err, "%s", path);
	if (fstat(fileno(f), &st) || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > SPEC_MAX)
		return al_err_set(err, AL_EINVAL, "%s: not a regular file of at most %u bytes",
				  path, SPEC_MAX);
	out->data = malloc((size_t)st.st_size + 1);
	if (!out->data)
		return al_err_set(err, AL_ENOMEM, "out of memory");
	n = fread(out->data, 1, (size_t)st.st_size, f);
	out->data[n] = '\0';
	out->len = n;
	return AL_OK;
}

/* ---- YAML, as the JSON it stands for ---- */

static bool is_int(const char *s)
{
	if (*s == '-')
		s++;
	if (!*s)
		return false;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

/* A plain YAML number with a fraction or an exponent (1.5, .001, 1e-3,
 * -2.0E+1): YAML 1.2's core schema, without .inf and .nan. */
static bool is_real(const char *s)
{
	bool digits = false;

	if (*s == '-' || *s == '+')
		s++;
	for (; *s >= '0' && *s <= '9'; s++)
		digits = true;
	if (*s == '.')
		for (s++; *s >= '0' && *s <= '9'; s++)
			digits = true;
	if (!digits)
		return false;
	if (*s == 'e' || *s == 'E') {
		s++;
		if (*s == '-' || *s == '+')
			s++;
		if (*s < '0' || *s > '9')
			return false;
		while (*s >= '0' && *s <= '9')
			s++;
	}
	return !*s;
}

/* Where each field came from: lines[PATH] = its line ("build.limits",
 * "tests[2]"), to name it when the job's decoder refuses it. */
struct spec_lines {
	json_t *lines;	    /* PATH -> line number */
	char src[PATH_MAX]; /* the YAML file they are lines of */
};

static void note_line(struct spec_lines *sl, const char *path, const yaml_node_t *n)
{
	if (sl && sl->lines && n)
		json_object_set_new(sl->lines, path,
				    json_integer((json_int_t)n->start_mark.line + 1));
}

static json_t *yaml_node_json(yaml_document_t *doc, yaml_node_t *n, int depth,
			      struct spec_lines *sl, const char *path)
{
	json_t *v = NULL;
	char sub[512];

	if (!n || depth > 32)
		return NULL;
	switch (n->type) {
	case YAML_SCALAR_NODE: {
		const char *s = (const char *)n->data.scalar.value;

		if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
			return json_stringn(s, n->data.scalar.length);
		if (!strcmp(s, "true"))
			return json_true();
		if (!strcmp(s, "false"))
			return json_false();
		if (!strcmp(s, "null") || !strcmp(s, "~") || !*s)
			return json_null();
		if (is_int(s) && strlen(s) < 19)
			return json_integer(strtoll(s, NULL, 10));
		if (is_real(s))
			return json_real(strtod(s, NULL));
		return json_stringn(s, n->data.scalar.length);
	}
	case YAML_SEQUENCE_NODE:
		v = json_array();
		for (yaml_node_item_t *i = n->data.sequence.items.start;
		     v && i < n->data.sequence.items.top; i++) {
			yaml_node_t *in = yaml_document_get_node(doc, *i);
			json_t *e;

			snprintf(sub, sizeof(sub), "%s[%td]", path,
				 i - n->data.sequence.items.start);
			note_line(sl, sub, in);
			e = yaml_node_json(doc, in, depth + 1, sl, sub);

			if (!e || json_array_append_new(v, e)) {
				json_decref(v);
				return NULL;
			}
		}
		return v;
	case YAML_MAPPING_NODE:
		v = json_object();
		for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
		     v && p < n->data.mapping.pairs.top; p++) {
			yaml_node_t *k = yaml_document_get_node(doc, p->key);
			json_t *e;

			if (!k || k->type != YAML_SCALAR_NODE) {
				json_decref(v);
				return NULL;
			}
			snprintf(sub, sizeof(sub), "%s%s%s", path, *path ? "." : "",
				 (const char *)k->data.scalar.value);
			note_line(sl, sub, k);
			e = yaml_node_json(doc, yaml_document_get_node(doc, p->value), depth + 1,
					   sl, sub);
			if (!e || json_object_set_new(v, (const char *)k->data.scalar.value, e)) {
				json_decref(v);
				return NULL;
			}
		}
		return v;
	default: return NULL;
	}
}

static json_t *yaml_load(const char *path, const struct al_bytes *text, struct spec_lines *sl,
			 struct al_err *err)
{
	yaml_parser_t p;
	yaml_document_t doc;
	json_t *v = NULL;

	if (!yaml_parser_initialize(&p)) {
		al_err_set(err, AL_ENOMEM, "out of memory");
		return NULL;
	}
	yaml_parser_set_input_string(&p, (const unsigned char *)text->data, text->len);
	if (!yaml_parser_load(&p, &doc)) {
		al_err_set(err, AL_EINVAL, "%s: invalid YAML: %s (line %zu)", path,
			   p.problem ? p.problem : "?", p.problem_mark.line + 1);
		yaml_parser_delete(&p);
		return NULL;
	}
	if (sl)
		snprintf(sl->src, sizeof(sl->src), "%s", path);
	v = yaml_node_json(&doc, yaml_document_get_root_node(&doc), 0, sl, "");
	if (!v)
		al_err_set(err, AL_EINVAL,
			   "%s: expected a mapping of the job's fields (keys are text, at most 32 "
			   "deep)",
			   path);
	yaml_document_delete(&doc);
	yaml_parser_delete(&p);
	return v;
}

/* The spec file at path as JSON: .json, .yaml or .yml (a YAML file's
 * fields' lines into sl). */
static json_t *spec_load(const char *path, struct spec_lines *sl, struct al_err *err)
{
	const char *dot = strrchr(path, '.');
	struct al_bytes text = {0};
	json_t *v = NULL;

	if (!dot || (strcmp(dot, ".json") && strcmp(dot, ".yaml") && strcmp(dot, ".yml"))) {
		al_err_set(err, AL_EINVAL,
			   "%s: expected a directory, or a .json, .yaml or .yml file", path);
		return NULL;
	}
	if (slurp(path, &text, err))
		return NULL;
	if (!strcmp(dot, ".json")) {
		json_error_t je;

		if (!(v = json_loadb(text.data, text.len, JSON_REJECT_DUPLICATES, &je)))
			al_err_set(err, AL_EINVAL, "%s: invalid JSON: %s (line %d)", path, je.text,
				   je.line);
	} else {
		v = yaml_load(path, &text, sl, err);
	}
	free(text.data);
	if (v && !json_is_object(v)) {
		json_decref(v);
		al_err_set(err, AL_EINVAL, "%s: expected an object of the job's fields", path);
		return NULL;
	}
	return v;
}

/* Every key NAME_from of o: NAME from that file (relative to base). */
static int resolve_from(json_t *o, const char *base, struct al_err *err)
{
	const char *k;
	json_t *v;
	void *tmp;

	if (!json_is_object(o))
		return AL_OK;
	json_object_foreach_safe(o, tmp, k, v)
	{
		size_t kl = strlen(k);
		char path[PATH_MAX], name[128];
		struct al_bytes b = {0};
		int rc;

		if (kl <= 5 || strcmp(k + kl - 5, "_from") || kl - 5 >= sizeof(name))
			continue;
		if (!json_is_string(v))
			return al_err_set(err, AL_EINVAL, "%s: expected a path", k);
		snprintf(name, sizeof(name), "%.*s", (int)(kl - 5), k);
		if (al_pathf(path, sizeof(path), "%s/%s",
			     json_string_value(v)[0] == '/' ? "" : base, json_string_value(v)))
			return al_err_set(err, AL_EINVAL, "%s: path too long", k);
		if ((rc = slurp(path, &b, err)))
			return rc;
		rc = al_json_set_bytes(o, name, &b);
		free(b.data);
		if (rc || json_object_del(o, k))
			return al_err_set(err, AL_ENOMEM, "out of memory");
	}
	return AL_OK;
}

static int resolve_files(json_t *o, const char *base, struct al_err *err)
{
	size_t i;
	json_t *f;
	int rc;

	json_array_foreach(json_object_get(o, "files"), i,
			   f) if ((rc = resolve_from(f, base, err))) return rc;
	return AL_OK;
}

static int resolve_all(json_t *job, const char *base, struct al_err *err)
{
	size_t i;
	json_t *t;
	int rc;

	if ((rc = resolve_from(job, base, err)) || (rc = resolve_files(job, base, err)) ||
	    (rc = resolve_from(json_object_get(job, "build"), base, err)))
		return rc;
	json_array_foreach(json_object_get(job, "tests"), i,
			   t) if ((rc = resolve_from(t, base, err)) ||
				  (rc = resolve_files(t, base, err))) return rc;
	return AL_OK;
}

/* ---- the directory form ---- */

static json_t *array_at(json_t *o, const char *key)
{
	json_t *a = json_object_get(o, key);

	if (!a) {
		a = json_array();
		if (json_object_set_new(o, key, a))
			return NULL;
	}
	return json_is_array(a) ? a : NULL;
}

/* files/ under dir, recursively, as the job's files (path relative to top). */
static int add_files(json_t *files, const char *top, const char *rel, struct al_err *err)
{
	char path[PATH_MAX], sub[PATH_MAX];
	struct dirent **ents;
	int n, rc = AL_OK;

	if (al_pathf(path, sizeof(path), "%s%s%s", top, *rel ? "/" : "", rel))
		return al_err_set(err, AL_EINVAL, "%s/%s: path too long", top, rel);
	if ((n = scandir(path, &ents, NULL, alphasort)) < 0)
		return al_err_sys(err, "%s", path);
	for (int i = 0; i < n; i++) {
		struct stat st;
		struct al_bytes b = {0};
		json_t *f;

		if (rc || ents[i]->d_name[0] == '.')
			goto next;
		if (al_pathf(sub, sizeof(sub), "%s%s%s", rel, *rel ? "/" : "", ents[i]->d_name) ||
		    al_pathf(path, sizeof(path), "%s/%s", top, sub))
			rc = al_err_set(err, AL_EINVAL, "%s/%s: path too long", top, rel);
		else if (lstat(path, &st)) {
			rc = al_err_sys(err, "%s", path);
		} else if (S_ISDIR(st.st_mode)) {
			rc = add_files(files, top, sub, err);
		} else if (!S_ISREG(st.st_mode)) {
			rc =
			    al_err_set(err, AL_EINVAL, "%s: not a regular file or directory", path);
		} else if (!(rc = slurp(path, &b, err))) {
			f = json_pack("{s:s, s:i}", "path", sub, "mode", (int)(st.st_mode & 0755));
			if (!f || al_json_set_bytes(f, "data", &b) ||
			    json_array_append_new(files, f))
				rc = al_err_set(err, AL_ENOMEM, "out of memory");
			free(b.data);
		}
	next:
		free(ents[i]);
	}
	free(ents);
	return rc;
}

/* tests/NAME.in (+ .out, .args) as tests, in name order. */
static int add_tests(json_t *tests, const char *dir, const char *compare, struct al_err *err)
{
	struct dirent **ents;
	int n, rc = AL_OK;

	if ((n = scandir(dir, &ents, NULL, alphasort)) < 0)
		return al_err_sys(err, "%s", dir);
	for (int i = 0; i < n; i++) {
		const char *nm = ents[i]->d_name;
		size_t l = strlen(nm);
		char path[PATH_MAX];
		struct al_bytes in = {0}, b = {0};
		json_t *t = NULL;

		if (rc || l <= 3 || strcmp(nm + l - 3, ".in"))
			goto next;
		if (al_pathf(path, sizeof(path), "%s/%s", dir, nm)) {
			rc = al_err_set(err, AL_EINVAL, "%s/%s: path too long", dir, nm);
			goto next;
		}
		if ((rc = slurp(path, &in, err)))
			goto next;
		t = json_pack("{s:s#, s:s}", "name", nm, (int)(l - 3), "compare", compare);
		if (!t || al_json_set_bytes(t, "stdin", &in)) {
			rc = al_err_set(err, AL_ENOMEM, "out of memory");
			goto next;
		}
		if (!al_pathf(path, sizeof(path), "%s/%.*s.out", dir, (int)(l - 3), nm) &&
		    !access(path, F_OK)) {
			if ((rc = slurp(path, &b, err)))
				goto next;
			if (al_json_set_bytes(t, "expect", &b))
				rc = al_err_set(err, AL_ENOMEM, "out of memory");
			free(b.data);
			b.data = NULL;
		}
		if (!rc && !al_pathf(path, sizeof(path), "%s/%.*s.args", dir, (int)(l - 3), nm) &&
		    !access(path, F_OK) && !(rc = slurp(path, &b, err))) {
			json_t *av = json_array();

			for (char *s = b.data, *e; av && s && *s; s = e ? e + 1 : NULL) {
				e = strchr(s, '\n');
				if (json_array_append_new(
					av, json_stringn(s, e ? (size_t)(e - s) : strlen(s))))
					rc = al_err_set(err, AL_ENOMEM, "out of memory");
			}
			if (!av || json_object_set_new(t, "argv", av))
				rc = al_err_set(err, AL_ENOMEM, "out of memory");
		}
		if (!rc && json_array_append(tests, t))
			rc = al_err_set(err, AL_ENOMEM, "out of memory");
	next:
		json_decref(t);
		free(in.data);
		free(b.data);
		free(ents[i]);
	}
	free(ents);
	return rc;
}

/* grade.yaml's per_test: NAME: {points, group, hidden, compare, abs_tol,
 * ...}: a test map's fields (PROTOCOL.md, the same as a JSON job's tests)
 * for tests/NAME.in, merged into it. */
static int per_test(json_t *job, const char *dir, struct spec_lines *sl, struct al_err *err)
{
	json_t *per = json_object_get(job, "per_test"), *tests = json_object_get(job, "tests");
	const char *name;
	json_t *fields;

	if (!per)
		return AL_OK;
	if (!json_is_object(per))
		return al_err_set(err, AL_EINVAL,
				  "%s/grade.yaml: per_test: expected a mapping of test names to "
				  "their fields",
				  dir);
	json_object_foreach(per, name, fields)
	{
		json_t *t = NULL;
		size_t i;

		for (i = 0; i < json_array_size(tests); i++) {
			const char *tn = json_string_value(
			    json_object_get((t = json_array_get(tests, i)), "name"));

			if (tn && !strcmp(tn, name))
				break;
		}
		if (i == json_array_size(tests))
			return al_err_set(err, AL_EINVAL,
					  "%s/grade.yaml: per_test.%s: no test of that name "
					  "(tests/%s.in)",
					  dir, name, name);
		if (!json_is_object(fields))
			return al_err_set(err, AL_EINVAL,
					  "%s/grade.yaml: per_test.%s: expected a mapping of its "
					  "fields (points, group, hidden, ...)",
					  dir, name);
		if (json_object_get(fields, "name") || json_object_get(fields, "stdin") ||
		    json_object_get(fields, "expect"))
			return al_err_set(err, AL_EINVAL,
					  "%s/grade.yaml: per_test.%s: its name, stdin and expect "
					  "are its files'",
					  dir, name);
		if (json_object_update(t, fields))
			return al_err_set(err, AL_ENOMEM, "out of memory");
		{ /* its fields' lines: tests[i].FIELD is per_test.NAME.FIELD's */
			char from[300], to[300];
			size_t nf = (size_t)snprintf(from, sizeof(from), "per_test.%s", name);
			const char *key;
			json_t *ln, *add = json_object();

			json_object_foreach(sl->lines, key, ln)
			{
				if (strncmp(key, from, nf) || (key[nf] && key[nf] != '.'))
					continue;
				snprintf(to, sizeof(to), "tests[%zu]%s", i, key + nf);
				json_object_set(add, to, ln);
			}
			if (!add || json_object_update(sl->lines, add)) {
				json_decref(add);
				return al_err_set(err, AL_ENOMEM, "out of memory");
			}
			json_decref(add);
		}
	}
	json_object_del(job, "per_test");
	return AL_OK;
}

static json_t *dir_load(const char *dir, const char *compare_opt, struct spec_lines *sl,
			struct al_err *err)
{
	static const char *const names[] = {"grade.yaml", "grade.yml", "grade.json"};
	char path[PATH_MAX];
	json_t *job = NULL, *c;
	const char *compare = compare_opt;
	struct stat st;

	for (size_t i = 0; i < 3 && !job; i++) {
		if (al_pathf(path, sizeof(path), "%s/%s", dir, names[i])) {
			al_err_set(err, AL_EINVAL, "%s: path too long", dir);
			return NULL;
		}
		if (!access(path, F_OK) && !(job = spec_load(path, sl, err)))
			return NULL;
	}
	if (!job && !(job = json_object())) {
		al_err_set(err, AL_ENOMEM, "out of memory");
		return NULL;
	}
	/* "compare" in the directory's file is its tests' default */
	c = json_object_get(job, "compare");
	if (!compare)
		compare = json_is_string(c) ? json_string_value(c) : "trim";
	compare = strdupa(compare);
	json_object_del(job, "compare");
	if (al_pathf(path, sizeof(path), "%s/files", dir))
		goto fail_job;
	if (!stat(path, &st) && S_ISDIR(st.st_mode) &&
	    (!array_at(job, "files") || add_files(array_at(job, "files"), path, "", err)))
		goto fail_job;
	if (al_pathf(path, sizeof(path), "%s/tests", dir))
		goto fail_job;
	if (!stat(path, &st) && S_ISDIR(st.st_mode) &&
	    (!array_at(job, "tests") || add_tests(array_at(job, "tests"), path, compare, err)))
		goto fail_job;
	if (!json_array_size(json_object_get(job, "tests"))) {
		al_err_set(err, AL_EINVAL,
			   "%s: no tests: expected tests/NAME.in files (and NAME.out)", dir);
		goto fail_job;
	}
	if (per_test(job, dir, sl, err))
		goto fail_job;
	return job;
fail_job:
	if (!err->code)
		al_err_set(err, AL_ENOMEM, "out of memory");
	json_decref(job);
	return NULL;
}

/* The decoder's message names a field ("tests[2].limits.wall_ms: ...");
 * prefixed with the YAML file and the line of that field, or the nearest
 * one above it, when the spec was YAML; else with path. */
static void name_line(const struct spec_lines *sl, const char *path, struct al_err *err)
{
	char field[256];
	size_t n = strcspn(err->msg, ": ");
	json_t *line = NULL;

	snprintf(field, sizeof(field), "%.*s", (int)(n < sizeof(field) ? n : sizeof(field) - 1),
		 err->msg);
	while (sl->src[0] && field[0] && !(line = json_object_get(sl->lines, field))) {
		char *cut = field + strlen(field);

		while (cut > field && cut[-1] != '.' && cut[-1] != '[')
			cut--;
		if (cut > field)
			cut--;
		*cut = '\0';
	}
	if (line)
		al_err_wrap(err, "%s:%lld", sl->src, (long long)json_integer_value(line));
	else
		al_err_wrap(err, "%s", path);
}

int cli_grade_job_load(const char *path, const struct cli_grade_opts *o, struct al_job *job,
		       struct al_err *err)
{
	struct spec_lines sl = {0};
	struct stat st;
	json_t *j;
	struct al_buf mp = {0};
	char base[PATH_MAX], id[33];
	bool dir = !stat(path, &st) && S_ISDIR(st.st_mode);
	int rc;

	memset(job, 0, sizeof(*job));
	if (!dir && access(path, R_OK))
		return al_err_sys(err, "%s", path);
	snprintf(base, sizeof(base), "%s", path);
	if (!dir) { /* a file's NAME_from paths are relative to its directory */
		char *slash = strrchr(base, '/');

		if (slash)
			*slash = '\0';
		else
			snprintf(base, sizeof(base), ".");
	}
	if (!(sl.lines = json_object()))
		return al_err_set(err, AL_ENOMEM, "out of memory");
	if (!(j = dir ? dir_load(path, o->compare, &sl, err) : spec_load(path, &sl, err))) {
		json_decref(sl.lines);
		return err->code ? err->code : AL_EINVAL;
	}
	if ((rc = resolve_all(j, base, err)))
		goto out_job;
	if (!json_object_get(j, "v"))
		json_object_set_new(j, "v", json_integer(AL_PROTO_VERSION));
	bool had_id = json_object_get(j, "id") != NULL;

	if (!had_id && (rc = al_job_new_id(id, err)) == AL_OK)
		json_object_set_new(j, "id", json_string(id));
	if (o->tier || !json_object_get(j, "tier"))
		json_object_set_new(j, "tier", json_string(o->tier ? o->tier : "trusted"));
	if (o->image)
		json_object_set_new(j, "image", json_string(o->image));
	if (o->stop_on_failure)
		json_object_set_new(j, "stop_on_failure", json_true());
	if (rc || (rc = al_json_to_msgpack(j, &mp, err)))
		goto out_job;
	if ((rc = al_job_decode(mp.data, mp.len, job, err)))
		name_line(&sl, path, err);
	else if (!job->ntests)
		rc = al_err_set(err, AL_EINVAL, "%s: not a grading job: it has no tests", path);
	if (!rc && !had_id && o->no_new_id) { /* the codec needed one; the gateway gives it */
		free(job->id);
		job->id = NULL;
	}
out_job:
	if (rc)
		al_job_free(job);
	al_buf_free(&mp);
	json_decref(j);
	json_decref(sl.lines);
	return rc;
}

/* ---- the table ---- */

#define AL_STDERR_EXCERPT 2048 /* of a runtime_error's stderr, under its row */

static void print_row(FILE *f, const char *num, const struct al_test_result *t, bool build)
{
	char mem[32], rss[32], pts[32];

	snprintf(mem, sizeof(mem), "%llu KiB", (unsigned long long)(t->peak_memory_bytes >> 10));
	snprintf(rss, sizeof(rss), "%llu KiB", (unsigned long long)(t->max_rss_bytes >> 10));
	snprintf(pts, sizeof(pts), "%u/%u", (unsigned)t->points, (unsigned)t->max_points);
	fprintf(f, "%4s  %-24.24s %-14s %7llu %8llu %10s %10s %7s%s%s%s%s", num, t->name,
		al_verdict_name(t->verdict), (unsigned long long)t->cpu_ms,
		(unsigned long long)t->wall_ms, t->verdict == AL_V_SKIPPED ? "" : mem,
		t->verdict == AL_V_SKIPPED || !t->max_rss_bytes ? "" : rss, build ? "-" : pts,
		t->group ? "  [" : "", t->group ? t->group : "", t->group ? "]" : "",
		t->detail ? "  " : "");
	fprintf(f, "%s\n", t->detail ? t->detail : "");
	if (t->verdict == AL_V_RUNTIME_ERROR && t->err.len) { /* what it said as it failed */
		size_t n = t->err.len < AL_STDERR_EXCERPT ? t->err.len : AL_STDERR_EXCERPT;

		fputs("        | ", f);
		for (size_t i = 0; i < n; i++) {
			unsigned char ch = (unsigned char)t->err.data[i];

			if (ch == '\n' && i + 1 < n)
				fputs("\n        | ", f);
			else if (ch == '\n' || ch == '\t' || (ch >= 0x20 && ch != 0x7f))
				fputc(ch == '\n' ? ' ' : ch, f);
			else
				fputc('?', f);
		}
		fprintf(f, "%s\n", n < t->err.len ? " ..." : "");
	}
}

void cli_grade_print(FILE *f, const struct al_result *res)
{
	size_t ok = 0;

	if (res->status != AL_ST_OK && res->status != AL_ST_COMPILE_ERROR) {
		/* it did not get to its tests: no table */
		fprintf(f, "%s: %s\n", al_status_name(res->status), res->error ? res->error : "");
		return;
	}
	if (res->status == AL_ST_COMPILE_ERROR) {
		fwrite(res->out.data ? res->out.data : "", 1, res->out.len, f);
		fwrite(res->err.data ? res->err.data : "", 1, res->err.len, f);
		if (res->err.len && res->err.data[res->err.len - 1] != '\n')
			fputc('\n', f);
	}
	fprintf(f, "%4s  %-24s %-14s %7s %8s %10s %10s %7s  %s\n", "#", "test", "verdict", "cpu_ms",
		"wall_ms", "memory", "max_rss", "points", "detail");
	if (res->build)
		print_row(f, "-", res->build, true);
	for (size_t i = 0; i < res->ntests; i++) {
		char num[24];

		snprintf(num, sizeof(num), "%zu", i + 1);
		print_row(f, num, &res->tests[i], false);
		ok += res->tests[i].verdict == AL_V_ACCEPTED;
	}
	for (size_t i = 0; res->has_score && i < res->ngroups; i++)
		fprintf(f, "group %s: %llu/%llu\n", res->groups[i].name,
			(unsigned long long)res->groups[i].score,
			(unsigned long long)res->groups[i].max_score);
	if (res->status == AL_ST_COMPILE_ERROR)
		fprintf(f, "compile_error: %s; no test ran", res->error ? res->error : "");
	else
		fprintf(f, "%zu/%zu accepted", ok, res->ntests);
	if (res->has_score)
		fprintf(f, ", score %llu/%llu", (unsigned long long)res->score,
			(unsigned long long)res->max_score);
	fputc('\n', f);
}
