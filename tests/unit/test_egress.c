/* test_egress.c - egress allow rules (common/egress.h): parsing, names,
 * wildcards, ranges, internal addresses, narrowing; the policy's egress:
 * mapping and a job's egress_allow at admission. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/egress.h"
#include "../../common/policy.h"
#include "policy_file.h"
#include "tap.h"

static struct sockaddr_storage sa_of(const char *addr)
{
	struct sockaddr_storage ss = {0};

	if (strchr(addr, ':')) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		s6->sin6_family = AF_INET6;
		inet_pton(AF_INET6, addr, &s6->sin6_addr);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		s4->sin_family = AF_INET;
		inet_pton(AF_INET, addr, &s4->sin_addr);
	}
	return ss;
}

static bool internal(const char *addr)
{
	struct sockaddr_storage ss = sa_of(addr);
	char text[64];

	return al_addr_internal((struct sockaddr *)&ss, text, sizeof(text));
}

static void rules(void)
{
	static const char *const good[] = {"pypi.example.org:443", "*.files.example.org:443",
					   "10.20.0.0/16:8080", "[fd00::/8]:443",
					   "apt.example.org:80"};
	static const struct {
		const char *text, *why;
	} bad_rules[] = {
	    {"pypi.example.org", "one :port"},	       {"pypi.example.org:0", "1..65535"},
	    {"pypi.example.org:99999", "1..65535"},    {"*.:443", "not a host name"},
	    {"a*b.org:443", "not a host name"},	       {"10.0.0.1:80", "as a range"},
	    {"10.0.0.0/33:80", "prefix out of range"}, {"x.y/8:80", "not an IP address"},
	    {"[fd00::/8]443", "[V6/PREFIX]:port"},     {"fd00::/8:443", "one :port"},
	};
	struct al_egress_rule r[5];
	struct al_err err = {0};
	struct sockaddr_storage ss;

	for (size_t i = 0; i < 5; i++)
		TAP_OK(al_egress_rule_parse(good[i], &r[i], &err) == AL_OK, "rule %s parses (%s)",
		       good[i], err.msg);
	for (size_t i = 0; i < sizeof(bad_rules) / sizeof(bad_rules[0]); i++) {
		struct al_egress_rule x;

		TAP_OK(al_egress_rule_parse(bad_rules[i].text, &x, &err) == AL_EINVAL,
		       "rule %s is refused", bad_rules[i].text);
		TAP_CONTAINS(err.msg, bad_rules[i].why, "and the refusal says why");
	}
	TAP_OK(al_egress_match_name(r, 5, "pypi.example.org", 443) == 0 &&
		   al_egress_match_name(r, 5, "PyPI.Example.ORG", 443) == 0,
	       "an exact name matches, case-insensitively");
	TAP_OK(al_egress_match_name(r, 5, "pypi.example.org", 80) == -1, "not on another port");
	TAP_OK(al_egress_match_name(r, 5, "files.files.example.org", 443) == 1 &&
		   al_egress_match_name(r, 5, "a.b.files.example.org", 443) == 1,
	       "a wildcard matches names under it");
	TAP_OK(al_egress_match_name(r, 5, "files.example.org", 443) == -1 &&
		   al_egress_match_name(r, 5, "evilfiles-example.org", 443) == -1 &&
		   al_egress_match_name(r, 5, "pypi.example.org.evil.com", 443) == -1,
	       "but not the suffix itself, a name ending in it, or a name extending an exact one");
	TAP_OK(al_egress_match_name(r, 5, "10.20.1.1", 8080) == -1,
	       "a literal address matches no name rule");
	ss = sa_of("10.20.3.4");
	TAP_OK(al_egress_match_range(r, 5, (struct sockaddr *)&ss, 8080) == 2,
	       "a range holds its address");
	TAP_OK(al_egress_match_range(r, 5, (struct sockaddr *)&ss, 80) == -1, "on its port only");
	ss = sa_of("::ffff:10.20.3.4");
	TAP_OK(al_egress_match_range(r, 5, (struct sockaddr *)&ss, 8080) == 2,
	       "a v4-mapped IPv6 address is its IPv4 address");
	ss = sa_of("10.21.0.1");
	TAP_OK(al_egress_match_range(r, 5, (struct sockaddr *)&ss, 8080) == -1,
	       "outside the range: none");
	ss = sa_of("fd12::1");
	TAP_OK(al_egress_match_range(r, 5, (struct sockaddr *)&ss, 443) == 3, "an IPv6 range");
}

static void addresses(void)
{
	static const char *const inside[] = {"127.0.0.1",
					     "10.1.2.3",
					     "172.16.0.1",
					     "192.168.1.1",
					     "169.254.169.254",
					     "100.64.0.1",
					     "0.0.0.0",
					     "224.0.0.1",
					     "::1",
					     "fe80::1",
					     "fc00::1",
					     "fd00:ec2::254",
					     "::ffff:127.0.0.1",
					     "::ffff:169.254.169.254",
					     "::"};
	static const char *const outside[] = {"93.184.216.34", "8.8.8.8", "2606:4700::1111",
					      "172.32.0.1"};

	for (size_t i = 0; i < sizeof(inside) / sizeof(inside[0]); i++)
		TAP_OK(internal(inside[i]), "%s is internal", inside[i]);
	for (size_t i = 0; i < sizeof(outside) / sizeof(outside[0]); i++)
		TAP_OK(!internal(outside[i]), "%s is public", outside[i]);
}

static void narrowing(void)
{
	struct al_egress_rule t[3], s;
	struct al_err err = {0};

	al_egress_rule_parse("*.example.org:443", &t[0], &err);
	al_egress_rule_parse("pypi.example.org:443", &t[1], &err);
	al_egress_rule_parse("10.0.0.0/8:80", &t[2], &err);
	al_egress_rule_parse("api.example.org:443", &s, &err);
	TAP_OK(al_egress_rule_within(&s, &t[0]), "a name under a wildcard is within it");
	al_egress_rule_parse("*.api.example.org:443", &s, &err);
	TAP_OK(al_egress_rule_within(&s, &t[0]), "a narrower wildcard is within it");
	al_egress_rule_parse("api.example.org:80", &s, &err);
	TAP_OK(!al_egress_rule_within(&s, &t[0]), "another port is not");
	al_egress_rule_parse("*.org:443", &s, &err);
	TAP_OK(!al_egress_rule_within(&s, &t[0]), "a wider wildcard is not");
	al_egress_rule_parse("10.1.0.0/16:80", &s, &err);
	TAP_OK(al_egress_rule_within(&s, &t[2]), "a range inside a range is within it");
	al_egress_rule_parse("11.0.0.0/16:80", &s, &err);
	TAP_OK(!al_egress_rule_within(&s, &t[2]), "a range elsewhere is not");
	al_egress_rule_parse("0.0.0.0/0:80", &s, &err);
	TAP_OK(!al_egress_rule_within(&s, &t[2]), "a wider range is not");
}

static void policy(void)
{
	struct al_policy pol;
	struct al_err err = {0};
	struct al_job job = {0};
	char *allow[2];
	int rc;

	rc = load_policy_text("tiers:\n"
			      "  v:\n"
			      "    backend: vm\n"
			      "    egress:\n"
			      "      allow: ['*.example.org:443', '10.0.0.0/8:80']\n"
			      "      max_bytes: 1048576\n"
			      "      max_connections: 8\n",
			      &pol, &err);
	TAP_OK(rc == AL_OK, "egress: {allow, max_bytes, max_connections} loads (%s)", err.msg);
	if (rc)
		return;
	TAP_OK(pol.tiers[0].egress && pol.tiers[0].negress_rules == 2 &&
		   pol.tiers[0].egress_max_bytes == 1048576 &&
		   pol.tiers[0].egress_max_connections == 8,
	       "its rules and caps are kept");
	job.id = (char *)"j";
	job.tier = (char *)"v";
	job.tenant = (char *)"default";
	job.network = AL_NET_EGRESS;
	allow[0] = (char *)"api.example.org:443";
	job.egress_allow = allow;
	job.negress_allow = 1;
	rc = al_policy_admit(&pol, &job, 0, &err);
	TAP_OK(rc == AL_OK, "a job narrowing the tier's rules is admitted (%s)", err.msg);
	allow[1] = (char *)"evil.com:443";
	job.negress_allow = 2;
	rc = al_policy_admit(&pol, &job, 0, &err);
	TAP_OK(rc == AL_EINVAL, "a job widening them is rejected");
	TAP_CONTAINS(err.msg,
		     "egress_allow[1]: \"evil.com:443\" is not within tier v's egress rules",
		     "naming the rule and the tier");
	allow[1] = (char *)"evil";
	rc = al_policy_admit(&pol, &job, 0, &err);
	TAP_OK(rc == AL_EINVAL, "a malformed job rule is rejected");
	TAP_CONTAINS(err.msg, "egress_allow[1]: egress rule \"evil\"", "naming it");
	al_policy_free(&pol);

	rc = load_policy_text("tiers:\n  v: {backend: vm, egress: {allow: [pypi.example.org]}}\n",
			      &pol, &err);
	TAP_OK(rc == AL_EINVAL, "a policy rule without a port is refused");
	TAP_CONTAINS(err.msg, ":2: egress rule \"pypi.example.org\"", "with its line");
	rc = load_policy_text("tiers:\n  v: {backend: vm, egress: {allow: []}}\n", &pol, &err);
	TAP_OK(rc == AL_EINVAL, "an empty allow list is refused");
	rc = load_policy_text(
	    "tiers:\n  v: {backend: vm, egress: {allow: [a.org:1], colour: red}}\n", &pol, &err);
	TAP_OK(rc == AL_EINVAL, "an unknown egress key is refused");
	TAP_CONTAINS(err.msg, "egress: unknown key \"colour\"", "naming it");
	rc = load_policy_text(
	    "tiers:\n  c: {backend: noop, egress: {allow: [pypi.example.org:443]}}\n", &pol, &err);
	TAP_OK(rc == AL_EINVAL, "egress rules on a backend that cannot give egress are refused");
	TAP_CONTAINS(err.msg, "the noop backend cannot give a job outbound network", "saying so");
	rc = load_policy_text("tiers:\n  p: {backend: process, egress: true}\n", &pol, &err);
	TAP_OK(rc == AL_EINVAL, "egress: true (everything) on the process backend is refused");
	TAP_CONTAINS(err.msg, "give the process backend an allow list", "asking for an allow list");
	rc = load_policy_text(
	    "tiers:\n  p: {backend: process, egress: {allow: [pypi.example.org:443]}}\n", &pol,
	    &err);
	TAP_OK(rc == AL_OK, "an allow list on the process backend loads");
	TAP_OK(!rc && pol.tiers[0].egress_cache_bytes == 0, "with no egress cache by default");
	if (!rc)
		al_policy_free(&pol);
	rc = load_policy_text("tiers:\n  p: {backend: process, egress: {allow: [a.org:80], "
			      "cache_bytes: 2147483648}}\n",
			      &pol, &err);
	TAP_OK(!rc && pol.tiers[0].egress_cache_bytes == 2147483648ull,
	       "egress.cache_bytes is kept (%s)", err.msg);
	if (!rc)
		al_policy_free(&pol);
	rc = load_policy_text("tiers:\n  p: {backend: process, egress: {allow: [a.org:80], "
			      "cache_bytes: lots}}\n",
			      &pol, &err);
	TAP_OK(rc == AL_EINVAL, "a cache_bytes that is not a number is refused");
	TAP_CONTAINS(err.msg, "cache_bytes: \"lots\" is not a non-negative integer", "naming it");
	rc = load_policy_text("tiers:\n  p: {backend: process, egress: {allow: [a.org:443], "
			      "cache_bytes: 1000000, cache_https: true}}\n",
			      &pol, &err);
	TAP_OK(!rc && pol.tiers[0].egress_cache_https, "egress.cache_https is kept (%s)", err.msg);
	if (!rc)
		al_policy_free(&pol);
	rc = load_policy_text("tiers:\n  p: {backend: process, egress: {allow: [a.org:443], "
			      "cache_https: true}}\n",
			      &pol, &err);
	TAP_OK(rc == AL_EINVAL, "cache_https without cache_bytes is refused");
	TAP_CONTAINS(err.msg, "egress.cache_https: needs egress.cache_bytes",
		     "saying what it needs");
	rc = load_policy_text("tiers:\n  p: {backend: process, egress: {allow: [a.org:443], "
			      "cache_bytes: 1000, cache_https: sometimes}}\n",
			      &pol, &err);
	TAP_OK(rc == AL_EINVAL, "a cache_https that is not a boolean is refused");
	TAP_CONTAINS(err.msg, "egress.cache_https", "naming it");
	rc = load_policy_text("tiers:\n  s: {backend: vm, egress: {allow: [a.org:443], "
			      "cache_bytes: 1000, cache_https: true}}\n",
			      &pol, &err);
	TAP_OK(rc == AL_EINVAL, "cache_https on a vm tier is refused");
	TAP_CONTAINS(err.msg, "a service VM's trust store is its image's", "saying why");
}

int main(void)
{
	rules();
	addresses();
	narrowing();
	policy();
	return tap_done();
}
