/* test_jbuild.c - checked JSON building (common/jbuild.h): a document with
 * a failed step is given up whole, and the CLI's JSON views are whole. */
#include <stdlib.h>
#include <string.h>

#include "../../proto/json.h"
#include "../../proto/jbuild.h"
#include "tap.h"

int main(void)
{
	struct al_jb b = {0};
	json_t *o = json_object(), *a = json_array();
	struct al_result res = {0};
	json_t *j;
	char *txt;

	al_jb_set(&b, o, "x", json_integer(1));
	al_jb_add(&b, a, json_string("s"));
	al_jb_set(&b, o, "a", a);
	TAP_OK(!b.bad, "every step made: the builder is clean");
	o = al_jb_done(&b, o);
	txt = o ? json_dumps(o, JSON_SORT_KEYS | JSON_COMPACT) : NULL;
	TAP_OK(txt && !strcmp(txt, "{\"a\":[\"s\"],\"x\":1}"), "a clean document is kept whole: %s",
	       txt ? txt : "(null)");
	free(txt);
	json_decref(o);

	/* a step that failed (a value jansson could not make: here an invalid
	 * UTF-8 string, which json_string refuses like an allocation failure) */
	b = (struct al_jb){0};
	o = json_object();
	al_jb_set(&b, o, "ok", json_integer(1));
	al_jb_set(&b, o, "bad", json_string("\xff\xfe"));
	TAP_OK(b.bad, "a NULL value marks the builder");
	TAP_OK(al_jb_done(&b, o) == NULL,
	       "a marked document is given up, not written without a part");
	b = (struct al_jb){0};
	al_jb_add(&b, NULL, json_integer(2));
	TAP_OK(b.bad, "appending to a container that could not be made marks the builder");
	b = (struct al_jb){0};
	al_jb_check(&b, -1);
	TAP_OK(b.bad && al_jb_done(&b, NULL) == NULL, "a helper's failure code marks the builder");

	res.version = 1;
	res.id = (char *)"j1";
	res.out.data = (char *)"\xff\x00";
	res.out.len = 2;
	j = al_result_to_json(&res);
	TAP_OK(j && json_is_string(json_object_get(j, "stdout_base64")) &&
		   json_is_null(json_object_get(j, "backend")) &&
		   json_is_string(json_object_get(j, "status")),
	       "a result's JSON view is whole: bytes as base64, absent names as null");
	TAP_OK(j && json_is_string(json_object_get(j, "stdout")) &&
		   !strcmp(json_string_value(json_object_get(j, "stdout")),
			   "\xef\xbf\xbd\xef\xbf\xbd"),
	       "stdout is there too, as text: each byte of no valid sequence (and NUL) as U+FFFD");
	json_decref(j);
	res.out.data = (char *)"a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xe2\x82z\xf5";
	res.out.len = 14;
	j = al_result_to_json(&res);
	{
		struct al_bytes back = {0};

		TAP_OK(j &&
			   !strcmp(json_string_value(json_object_get(j, "stdout")),
				   "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xef\xbf\xbd\xef\xbf\xbdz"
				   "\xef\xbf\xbd") &&
			   al_json_get_bytes(j, "stdout", &back) == 0 && back.len == 14 &&
			   !memcmp(back.data, res.out.data, 14),
		       "valid sequences kept, a cut one and a bad lead replaced; the bytes read "
		       "back exact from stdout_base64");
		free(back.data);
	}
	json_decref(j);
	res.out.data = (char *)"plain\n";
	res.out.len = 6;
	j = al_result_to_json(&res);
	TAP_OK(j && !strcmp(json_string_value(json_object_get(j, "stdout")), "plain\n") &&
		   !json_object_get(j, "stdout_base64"),
	       "valid UTF-8: stdout only, no stdout_base64");
	json_decref(j);
	return tap_done();
}
