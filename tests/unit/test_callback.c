/* test_callback.c - callback_url checks (host and port against a tier's
 * callback_hosts) and the connect-time address check of webhooks: which
 * addresses count as internal, and when the policy lets one through. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "../../common/callback.h"
#include "../../common/policy.h"
#include "tap.h"

static bool addr_ok(char *const *hosts, size_t n, const char *text)
{
	struct sockaddr_in in = {.sin_family = AF_INET};
	struct sockaddr_in6 in6 = {.sin6_family = AF_INET6};
	char got[64];

	if (inet_pton(AF_INET, text, &in.sin_addr) == 1)
		return al_callback_addr_ok(hosts, n, (struct sockaddr *)&in, got, sizeof(got));
	if (inet_pton(AF_INET6, text, &in6.sin6_addr) == 1)
		return al_callback_addr_ok(hosts, n, (struct sockaddr *)&in6, got, sizeof(got));
	return false;
}

int main(void)
{
	char h0[] = "hooks.example.com", h1[] = "localhost:8080", h2[] = "127.0.0.1:9000",
	     h3[] = "[::1]:9001";
	char *hosts[] = {h0, h1, h2, h3};
	size_t n = sizeof(hosts) / sizeof(hosts[0]);
	struct al_err err = {0};
	static const char *const internal[] = {"127.0.0.1",
					       "127.1.2.3",
					       "10.0.0.1",
					       "172.16.0.1",
					       "172.31.255.255",
					       "192.168.1.1",
					       "169.254.169.254",
					       "100.64.0.1",
					       "0.0.0.0",
					       "224.0.0.1",
					       "255.255.255.255",
					       "::1",
					       "::",
					       "fe80::1",
					       "fd00::1",
					       "::ffff:127.0.0.1",
					       "::ffff:169.254.169.254",
					       "198.18.0.1",
					       NULL};
	static const char *const public[] = {"93.184.216.34",	"172.32.0.1",  "192.169.0.1",
					     "2606:4700::1111", "100.128.0.1", NULL};

	TAP_OK(al_callback_url_ok(hosts, n, "https://hooks.example.com/x", "t", &err) == AL_OK,
	       "an allowed host on the scheme's default port (443)");
	TAP_OK(al_callback_url_ok(hosts, n, "http://HOOKS.example.com:80/x?y", "t", &err) == AL_OK,
	       "host names compare case-insensitively; explicit default port");
	err.msg[0] = '\0';
	TAP_CONTAINS(al_callback_url_ok(hosts, n, "https://hooks.example.com:8443/", "t", &err)
			 ? err.msg
			 : NULL,
		     "port 8443 is not allowed", "an allowed host on another port: refused");
	TAP_OK(al_callback_url_ok(hosts, n, "http://localhost:8080/hook", "t", &err) == AL_OK,
	       "host:port entry: that port");
	TAP_OK(al_callback_url_ok(hosts, n, "http://localhost/hook", "t", &err) == AL_EINVAL,
	       "host:port entry: not the default port");
	TAP_OK(al_callback_url_ok(hosts, n, "http://[::1]:9001/", "t", &err) == AL_OK,
	       "an IPv6 literal with its port");
	TAP_OK(al_callback_url_ok(hosts, n, "http://user:pw@localhost:8080/", "t", &err) == AL_OK,
	       "user:password@ is not the host");
	TAP_OK(al_callback_url_ok(hosts, n, "http://evil.com@localhost:8080/", "t", &err) ==
		       AL_OK &&
		   al_callback_url_ok(hosts, n, "http://localhost:8080@evil.com/", "t", &err) ==
		       AL_EINVAL,
	       "the host is what follows the last @ of the authority");
	TAP_OK(al_callback_url_ok(hosts, n, "http://localhost:99999/", "t", &err) == AL_EINVAL &&
		   al_callback_url_ok(hosts, n, "http://localhost:80x/", "t", &err) == AL_EINVAL &&
		   al_callback_url_ok(hosts, n, "ftp://localhost/", "t", &err) == AL_EINVAL,
	       "bad ports and schemes are refused");
	for (const char *const *a = internal; *a; a++)
		TAP_OK(!addr_ok(NULL, 0, *a), "internal address %s refused at connect time", *a);
	for (const char *const *a = public; *a; a++)
		TAP_OK(addr_ok(NULL, 0, *a), "public address %s allowed", *a);
	TAP_OK(addr_ok(hosts, n, "127.0.0.1") && addr_ok(hosts, n, "::1") &&
		   !addr_ok(hosts, n, "127.0.0.2") && !addr_ok(hosts, n, "10.0.0.1"),
	       "an internal address passes only where callback_hosts names that very address");
	return tap_done();
}
