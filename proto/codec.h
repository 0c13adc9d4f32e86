/* codec.h - the job codec's shared fields (field.c), which job.c,
 * grade.c, inputs.c and call.c use, and the grading fields (grade.c)
 * that job.c and result.c call. Internal to proto/. */
#ifndef AL_CODEC_H
#define AL_CODEC_H

#include "grade.h"
#include "mp.h"

/* Decoders: what names the field in errors ("tests[3].files"); what they
 * fill is the caller's to free, also after an error. */
int al_dec_text_array(const msgpack_object *v, const char *what, size_t maxn, size_t maxlen,
		      char ***out, size_t *n, struct al_err *err);
int al_dec_files(const msgpack_object *v, const char *what, struct al_file **files, size_t *nfiles,
		 struct al_err *err);
int al_dec_limits(const msgpack_object *v, const char *what, struct al_limits *l,
		  struct al_err *err);
/* A map of named fields (what names it in errors): each key one of
 * names[0..n-1], once (seen gets their bits), its value given to fn(index,
 * value, ctx); an unknown or repeated key, or a key not text, is refused. */
typedef int (*al_field_fn)(int f, const msgpack_object *v, void *ctx, struct al_err *err);
int al_dec_fields(const msgpack_object *root, const char *what, const char *const *names, int n,
		  al_field_fn fn, void *ctx, uint32_t *seen, struct al_err *err);

/* A map's string field: a msgpack map of at most maxn text keys (at most
 * maxk bytes) to text values (maxv), into kv. */
int al_dec_kv_map(const msgpack_object *v, const char *what, size_t maxn, size_t maxk, size_t maxv,
		  struct al_kv **out, size_t *n, struct al_err *err);

/* Checks on a job built in memory; pre ("build.") prefixes field names. */
/* Whether s is 1 to max characters of [A-Za-z0-9] and extra. */
bool al_name_ok(const char *s, size_t max, const char *extra);
/* s as al_name_ok, else err naming what. */
int al_check_name(const char *what, const char *s, size_t max, const char *extra,
		  struct al_err *err);
/* v at most max, else err naming what. */
int al_check_limit(const char *what, uint64_t v, uint64_t max, struct al_err *err);
int al_check_command(const char *pre, enum al_runtime runtime, const struct al_bytes *code,
		     char *const *argv, size_t argc, struct al_err *err);
/* A relative path inside the work directory: no leading '/', no empty, "."
 * or ".." component, no control character, at most AL_PATH_MAX. */
int al_check_rel_path(const char *what, const char *p, struct al_err *err);
int al_check_files(const char *list, const struct al_file *files, size_t n, struct al_err *err);
int al_check_limits(const char *what, const struct al_limits *l, struct al_err *err);

/* Best effort, for a message that does not decode (at most max_len
 * bytes): the text values of its map's keys[0..n-1] (n <= 8), each a
 * well-formed id ([A-Za-z0-9._:-], 1..AL_ID_MAX) into out[k], else ""
 * there; the first of a key decides. Returns how many were found. */
size_t al_peek_ids(const void *buf, size_t len, size_t max_len, const char *const *keys, size_t n,
		   char (*out)[AL_ID_MAX + 1]);

/* Encoders: 0 or AL_ENOMEM. */
int al_pack_text_array(msgpack_packer *pk, char *const *v, size_t n);
int al_pack_files(msgpack_packer *pk, const struct al_file *files, size_t n);
int al_pack_limits(msgpack_packer *pk, const struct al_limits *l);

void al_free_files(struct al_file *files, size_t n);
void al_free_strv(char **v, size_t n);

/* The grading fields (grade.c). al_grade_dec_result decodes key's value
 * when key is one of the result's (build, tests), else does nothing. */
int al_grade_dec_build(const msgpack_object *v, struct al_job *job, struct al_err *err);
int al_grade_dec_checker(const msgpack_object *v, struct al_job *job, struct al_err *err);
int al_grade_dec_tests(const msgpack_object *v, struct al_job *job, struct al_err *err);
int al_grade_validate(const struct al_job *job, struct al_err *err);
size_t al_grade_job_nfields(const struct al_job *job);
int al_grade_pack_job(msgpack_packer *pk, const struct al_job *job);
void al_grade_free_job(struct al_job *job);

int al_grade_dec_result(const msgpack_object *key, const msgpack_object *v, struct al_result *res,
			struct al_err *err);
size_t al_grade_result_nfields(const struct al_result *res);
int al_grade_pack_result(msgpack_packer *pk, const struct al_result *res);
void al_grade_free_result(struct al_result *res);

#endif
