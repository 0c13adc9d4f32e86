/* test_aconn.c - the connection layer says why it refused a call (kept on
 * the connection, hiredis-style), and refuses rather than queue a
 * best-effort call while it is not up. */
#include <event2/event.h>
#include <string.h>

#include "../../common/aconn.h"
#include "tap.h"

int main(void)
{
	struct event_base *base = event_base_new();
	struct al_redis_url url;
	struct al_err err = {0};
	struct al_aconn *c;
	const char *argv[] = {"PING"};
	struct al_call call;

	TAP_OK(al_redis_url_parse("unix:///nonexistent/airlock-test.sock", &url, &err) == AL_OK,
	       "a unix socket URL parses");
	c = al_aconn_new(base, &url, "test", NULL, NULL, NULL);
	TAP_OK(c != NULL && !al_aconn_is_up(c), "a connection to nothing is made, and is not up");
	TAP_OK(!strcmp(al_aconn_strerror(c), "no error"), "no error before any call");
	TAP_OK(al_aconn_cmd(c, NULL, NULL, 1, argv, NULL) == AL_EREDIS &&
		   strstr(al_aconn_strerror(c), "not connected"),
	       "a best-effort command while down is refused: \"%s\"", al_aconn_strerror(c));
	al_call_init(&call, NULL);
	al_call_str(&call, "PING");
	TAP_OK(al_aconn_send(c, &call, NULL, NULL) == AL_EREDIS &&
		   strstr(al_aconn_strerror(c), "not connected"),
	       "a best-effort call while down is refused too");
	al_call_free(&call);
	al_call_init(&call, NULL);
	al_call_str(&call, "PING");
	TAP_OK(al_aconn_call(c, &call, NULL, NULL) == 0 && al_aconn_pending(c) == 1,
	       "a reliable call while down is kept for when the connection is up");
	al_aconn_free(c);
	event_base_free(base);
	return tap_done();
}
