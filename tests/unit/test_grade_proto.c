/* test_grade_proto.c - the grading fields of jobs and results
 * (proto/grade.h): round trips, and each bad input refused with its name. */
#include <stdlib.h>
#include <string.h>

#include "../../proto/grade.h"
#include "../../proto/mp.h"
#include "policy_file.h"
#include "tap.h"

#pragma GCC diagnostic ignored "-Wdiscarded-qualifiers"

static char *argv_run[] = {"./main"};
static char *argv_build[] = {"g++", "-O2", "-o", "main", "main.cpp"};
static char *argv_extra[] = {"--fast"};
static struct al_file src[] = {{"main.cpp", {"int main(){}", 12}, 0644}};
static struct al_file tfiles[] = {{"in.txt", {"5\n", 2}, 0600}};

static void grading_job(struct al_job *j, struct al_build *b, struct al_test *t, size_t nt)
{
	memset(j, 0, sizeof(*j));
	j->version = AL_PROTO_VERSION;
	j->id = "g-1";
	j->tenant = "course";
	j->tier = "untrusted";
	j->argv = argv_run;
	j->argc = 1;
	j->files = src;
	j->nfiles = 1;
	*b = (struct al_build){.argv = argv_build, .argc = 5, .limits = {.wall_ms = 30000}};
	j->build = b;
	for (size_t i = 0; i < nt; i++) {
		static char names[AL_TESTS_MAX + 1][16];

		snprintf(names[i], sizeof(names[i]), "case %zu", i);
		t[i] = (struct al_test){.name = names[i],
					.stdin_data = {"2 3\n", 4},
					.has_expect = true,
					.expect = {"5\n", 2},
					.compare = AL_CMP_TOKENS,
					.limits = {.wall_ms = 1000, .memory_bytes = 64u << 20}};
	}
	t[0].argv = argv_extra;
	t[0].argc = 1;
	t[0].files = tfiles;
	t[0].nfiles = 1;
	t[nt - 1].has_expect = false;
	t[nt - 1].expect = (struct al_bytes){0};
	j->tests = t;
	j->ntests = nt;
	j->stop_on_failure = true;
}

/* Encoding refuses the in-memory job with an error naming needle. */
static void refused(const char *what, const struct al_job *j, const char *needle)
{
	struct al_buf b = {0};
	struct al_err err = {0};

	TAP_OK(al_job_encode(j, &b, &err) == AL_EINVAL, "%s: refused", what);
	TAP_CONTAINS(err.msg, needle, "%s: the error says which", what);
	al_buf_free(&b);
}

/* Decoding a job whose "tests" (or key) is the packed val fails naming needle. */
static void undecodable(const char *what, const char *key, struct al_buf val, const char *needle)
{
	struct al_buf b = {0};
	msgpack_packer pk;
	struct al_job job;
	struct al_err err = {0};

	al_mp_packer_init(&pk, &b);
	msgpack_pack_map(&pk, 4);
	al_mp_pack_kv_uint(&pk, "v", 1);
	al_mp_pack_kv_str(&pk, "id", "g-2");
	al_mp_pack_kv_str(&pk, "tier", "t");
	al_mp_pack_str(&pk, key);
	al_buf_append(&b, val.data, val.len);
	TAP_OK(al_job_decode(b.data, b.len, &job, &err) == AL_EINVAL, "%s: refused", what);
	TAP_CONTAINS(err.msg, needle, "%s: the error says which", what);
	al_buf_free(&b);
	al_buf_free(&val);
}

/* One test (a map) packed from: name, then extra key and a string value. */
static struct al_buf one_test(const char *k, const char *v)
{
	struct al_buf b = {0};
	msgpack_packer pk;

	al_mp_packer_init(&pk, &b);
	msgpack_pack_array(&pk, 1);
	msgpack_pack_map(&pk, 1 + (k != NULL));
	al_mp_pack_kv_str(&pk, "name", "t1");
	if (k)
		al_mp_pack_kv_str(&pk, k, v);
	return b;
}

static void test_job(void)
{
	static struct al_test t[AL_TESTS_MAX + 1];
	struct al_build b;
	struct al_job j, back;
	struct al_buf buf = {0};
	struct al_err err = {0};

	grading_job(&j, &b, t, 3);
	j.group_scoring = AL_GROUPS_MIN;
	TAP_OK(al_job_encode(&j, &buf, &err) == AL_OK, "a grading job encodes (%s)", err.msg);
	TAP_OK(al_job_decode(buf.data, buf.len, &back, &err) == AL_OK, "and decodes (%s)", err.msg);
	TAP_OK(back.build && back.build->argc == 5 && !strcmp(back.build->argv[4], "main.cpp") &&
		   back.build->limits.wall_ms == 30000,
	       "the build: its argv and limits");
	TAP_OK(back.ntests == 3 && !strcmp(back.tests[1].name, "case 1") &&
		   back.tests[1].stdin_data.len == 4 && back.tests[1].has_expect &&
		   back.tests[1].compare == AL_CMP_TOKENS &&
		   back.tests[1].limits.memory_bytes == 64u << 20,
	       "each test: name, stdin, expected output, comparison, limits");
	TAP_OK(back.tests[0].argc == 1 && back.tests[0].nfiles == 1 &&
		   back.tests[0].files[0].mode == 0600 && !back.tests[2].has_expect &&
		   back.stop_on_failure && back.group_scoring == AL_GROUPS_MIN,
	       "extra argv, files, a test without expected output, stop_on_failure, "
	       "group_scoring min (kept by its name)");
	al_job_free(&back);
	al_buf_free(&buf);

	grading_job(&j, &b, t, AL_TESTS_MAX);
	TAP_OK(al_job_encode(&j, &buf, &err) == AL_OK &&
		   al_job_decode(buf.data, buf.len, &back, &err) == AL_OK &&
		   back.ntests == AL_TESTS_MAX,
	       "%d tests in one job", AL_TESTS_MAX);
	al_job_free(&back);
	al_buf_free(&buf);
	grading_job(&j, &b, t, AL_TESTS_MAX + 1);
	refused("257 tests", &j, "at most 256");

	grading_job(&j, &b, t, 3);
	t[2].name = "case 0";
	refused("two tests of one name", &j, "\"case 0\" is also tests[0]'s");
	grading_job(&j, &b, t, 3);
	t[1].name = "";
	refused("an empty test name", &j, "tests[1].name");
	grading_job(&j, &b, t, 3);
	t[1].name = "bad\nname";
	refused("a test name with a newline", &j, "control character");
	grading_job(&j, &b, t, 3);
	j.stdin_data = (struct al_bytes){"x", 1};
	refused("a grading job's own stdin", &j, "give each test its stdin");
	grading_job(&j, &b, t, 3);
	j.collect = (char *[]){"out.txt"};
	j.ncollect = 1;
	refused("collect in a grading job", &j, "collect: not in a grading job");
	grading_job(&j, &b, t, 3);
	t[1].files = (struct al_file[]){{"../escape", {"x", 1}, 0644}};
	t[1].nfiles = 1;
	refused("a test file outside its directory", &j, "tests[1].files[0].path");
	grading_job(&j, &b, t, 3);
	b.argc = 0;
	b.argv = NULL;
	refused("a build with nothing to run", &j, "build.argv: missing");
	grading_job(&j, &b, t, 3);
	b.limits.memory_bytes = AL_LIMIT_MEMORY_MAX + 1;
	refused("a build limit out of range", &j, "build.limits.memory_bytes");
	grading_job(&j, &b, t, 3);
	t[2].limits.wall_ms = AL_LIMIT_WALL_MS_MAX + 1;
	refused("a test limit out of range", &j, "tests[2].limits.wall_ms");
	grading_job(&j, &b, t, 3);
	j.ntests = 0;
	j.tests = NULL;
	refused("a build without tests", &j, "build: only in a grading job");
	j.build = NULL;
	refused("stop_on_failure without tests", &j, "stop_on_failure: only in a grading job");

	undecodable("an empty tests list", "tests", one_test(NULL, NULL), "argv: missing");
	{
		struct al_buf e = {0};
		msgpack_packer pk;

		al_mp_packer_init(&pk, &e);
		msgpack_pack_array(&pk, 0);
		undecodable("tests: []", "tests", e, "0 entries, expected 1..256");
	}
	undecodable("an unknown test field", "tests", one_test("colour", "red"),
		    "tests[0]: unknown or repeated field");
	undecodable("an unknown comparison", "tests", one_test("compare", "fuzzy"),
		    "tests[0].compare: unknown value \"fuzzy\"");
	undecodable("limits as a string", "tests", one_test("limits", "x"),
		    "tests[0].limits: wrong type");
	{
		struct al_buf e = {0};
		msgpack_packer pk;

		al_mp_packer_init(&pk, &e);
		al_mp_pack_str(&pk, "max");
		undecodable("an unknown group_scoring", "group_scoring", e,
			    "group_scoring: unknown value \"max\" (all, sum or min)");
	}
	{
		struct al_buf e = {0};
		msgpack_packer pk;

		al_mp_packer_init(&pk, &e);
		msgpack_pack_map(&pk, 1);
		al_mp_pack_kv_str(&pk, "runtime", "perl");
		undecodable("an unknown build runtime", "build", e,
			    "build.runtime: unknown value \"perl\"");
	}
	{
		struct al_buf e = {0};
		msgpack_packer pk;

		al_mp_packer_init(&pk, &e);
		msgpack_pack_array(&pk, 1);
		msgpack_pack_map(&pk, 0);
		undecodable("a test without a name", "tests", e, "tests[0].name: missing");
	}
}

static void test_result(void)
{
	struct al_test_result build = {.name = "build",
				       .verdict = AL_V_ACCEPTED,
				       .has_exit_code = true,
				       .wall_ms = 900,
				       .cpu_ms = 850};
	struct al_test_result tr[2] = {
	    {.name = "a",
	     .verdict = AL_V_WRONG_ANSWER,
	     .has_exit_code = true,
	     .cpu_ms = 3,
	     .out = {"4\n", 2},
	     .detail = "line 1: expected \"5\", got \"4\""},
	    {.name = "b",
	     .verdict = AL_V_MEMORY_LIMIT,
	     .signal = 9,
	     .peak_memory_bytes = 64u << 20,
	     .err_truncated = true},
	};
	struct al_result r = {.version = AL_PROTO_VERSION,
			      .id = "g-1",
			      .status = AL_ST_OK,
			      .build = &build,
			      .tests = tr,
			      .ntests = 2};
	struct al_result back;
	struct al_buf buf = {0};
	struct al_err err = {0};

	TAP_OK(al_result_encode(&r, &buf, &err) == AL_OK &&
		   al_result_decode(buf.data, buf.len, &back, &err) == AL_OK,
	       "a grading result round-trips (%s)", err.msg);
	TAP_OK(back.build && back.build->wall_ms == 900 && back.ntests == 2 &&
		   back.tests[0].verdict == AL_V_WRONG_ANSWER && back.tests[0].out.len == 2 &&
		   !strcmp(back.tests[0].detail, "line 1: expected \"5\", got \"4\"") &&
		   back.tests[1].verdict == AL_V_MEMORY_LIMIT && back.tests[1].signal == 9 &&
		   !back.tests[1].has_exit_code && back.tests[1].err_truncated &&
		   !back.tests[1].detail,
	       "each test's verdict, exit, usage, output and detail come back");
	al_result_free(&back);
	al_buf_free(&buf);
	TAP_OK(al_status_parse("compile_error") == AL_ST_COMPILE_ERROR &&
		   !strcmp(al_status_name(AL_ST_COMPILE_ERROR), "compile_error"),
	       "the compile_error status by name");
	for (int v = 0; v < AL_V_COUNT; v++)
		if (al_verdict_parse(al_verdict_name((enum al_verdict)v)) != v)
			TAP_OK(0, "verdict %d by name", v);
	TAP_OK(al_verdict_parse("passed") == AL_EINVAL,
	       "the verdicts map both ways; others refused");
	tr[1].verdict = AL_V_COUNT;
	TAP_OK(al_result_encode(&r, &buf, &err) == AL_EINVAL, "an unknown verdict is not encoded");
	al_buf_free(&buf);
}

/* Admission of a grading job (common/policy.c): its steps' limits. */
static void test_admission(void)
{
	struct al_policy pol = {0};
	struct al_err err = {0};
	struct al_test t[2];
	struct al_build b;
	struct al_job j;
	int rc = load_policy_text("tiers:\n"
				  "  p:\n"
				  "    backend: process\n"
				  "    defaults: {wall_ms: 2000, disk_bytes: 1048576}\n"
				  "    max: {wall_ms: 100000, cpu_ms: 50000, disk_bytes: 1048576}\n"
				  "  v: {backend: vm}\n",
				  &pol, &err);

	TAP_OK(rc == AL_OK, "policy loads (%s)", err.msg);
	if (rc)
		return;
	grading_job(&j, &b, t, 2);
	j.tier = "p";
	b.limits = (struct al_limits){.wall_ms = 60000};
	t[0].limits = (struct al_limits){.wall_ms = 500};
	t[1].limits = (struct al_limits){0};
	rc = al_policy_admit(&pol, &j, 0, &err);
	TAP_OK(rc == AL_OK && b.limits.cpu_ms == 50000 && t[0].limits.cpu_ms == 500 &&
		   !t[1].limits.cpu_ms && j.limits.cpu_ms == 2000,
	       "a step's CPU time follows its own wall-clock limit (build %llu, capped by the "
	       "tier's maximum; test %llu); a step without one takes the job's (%s)",
	       (unsigned long long)b.limits.cpu_ms, (unsigned long long)t[0].limits.cpu_ms,
	       err.msg);
	grading_job(&j, &b, t, 2);
	j.tier = "p";
	j.limits = (struct al_limits){.cpu_ms = 700};
	t[0].limits = (struct al_limits){.wall_ms = 5000};
	rc = al_policy_admit(&pol, &j, 0, &err);
	TAP_OK(rc == AL_OK && !t[0].limits.cpu_ms,
	       "...unless the job names its CPU time: then that is every step's default");
	grading_job(&j, &b, t, 2);
	j.tier = "p";
	t[1].limits = (struct al_limits){.wall_ms = 100001};
	rc = al_policy_admit(&pol, &j, 0, &err);
	TAP_OK(rc == AL_EINVAL, "a test's limit above the tier's maximum is refused");
	TAP_CONTAINS(err.msg, "tests[1].limits.wall_ms: 100001 is above tier p's maximum of 100000",
		     "naming the test");
	grading_job(&j, &b, t, 2);
	j.tier = "p";
	b.limits = (struct al_limits){.memory_bytes = 8ull << 30};
	rc = al_policy_admit(&pol, &j, 0, &err);
	TAP_CONTAINS(err.msg, "build.limits.memory_bytes", "the build's too");
	grading_job(&j, &b, t, 2);
	j.tier = "p";
	t[0].files = (struct al_file[]){{"big", {malloc(2u << 20), 2u << 20}, 0644}};
	rc = al_policy_admit(&pol, &j, 0, &err);
	free(t[0].files[0].data.data);
	TAP_CONTAINS(err.msg, "tests[0].files: 2097152 bytes do not fit its disk limit",
		     "a test's files past its disk limit");
	grading_job(&j, &b, t, 2);
	j.tier = "p";
	b.limits = (struct al_limits){.disk_bytes = 4};
	rc = al_policy_admit(&pol, &j, 0, &err);
	TAP_CONTAINS(err.msg, "build.files: 12 bytes do not fit its disk limit of 4 bytes",
		     "the job's files past the build's disk limit (the build tree's size)");
	grading_job(&j, &b, t, 2);
	j.tier = "p";
	j.network = AL_NET_EGRESS;
	rc = al_policy_admit(&pol, &j, 0, &err);
	TAP_CONTAINS(err.msg, "network: a grading job runs without network", "no network");
	grading_job(&j, &b, t, 2);
	j.tier = "v";
	rc = al_policy_admit(&pol, &j, 0, &err);
	TAP_CONTAINS(err.msg, "tier v runs on the vm backend, which does not run grading jobs",
		     "a backend that cannot grade");
	/* a language's build: its own limits, not its tests' (each at most
	 * the tier's maximum) */
	grading_job(&j, &b, t, 2);
	j.tier = "p";
	j.build = NULL;
	j.argv = NULL;
	j.argc = 0;
	j.language = "c11";
	rc = al_policy_admit(&pol, &j, 0, &err);
	TAP_OK(rc == AL_OK && j.build && j.build->limits.wall_ms == 60000 &&
		   j.build->limits.cpu_ms == 50000 &&
		   j.build->limits.memory_bytes == 512ull << 20 && t[0].limits.wall_ms == 1000,
	       "c11's build has the language's 60 s (CPU capped at the tier's 50 s) and 512 MiB, "
	       "not its tests' 1 s (%s)",
	       err.msg);
	if (j.build) {
		for (size_t i = 0; i < j.build->argc; i++)
			free(j.build->argv[i]);
		free(j.build->argv);
		free(j.build);
	}
	for (size_t i = 0; i < j.argc; i++)
		free(j.argv[i]);
	free(j.argv);
	al_policy_free(&pol);
}

int main(void)
{
	test_job();
	test_result();
	test_admission();
	return tap_done();
}
