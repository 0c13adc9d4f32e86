/* jbuild.c - checked jansson building (jbuild.h). */
#include "jbuild.h"

void al_jb_set(struct al_jb *b, json_t *obj, const char *key, json_t *v)
{
	/* json_object_set_new takes v, and fails on a NULL obj or v */
	if (json_object_set_new(obj, key, v))
		b->bad = true;
}

void al_jb_add(struct al_jb *b, json_t *arr, json_t *v)
{
	if (json_array_append_new(arr, v))
		b->bad = true;
}

void al_jb_check(struct al_jb *b, int rc)
{
	if (rc)
		b->bad = true;
}

json_t *al_jb_done(struct al_jb *b, json_t *doc)
{
	if (b->bad || !doc) {
		json_decref(doc);
		return NULL;
	}
	return doc;
}
