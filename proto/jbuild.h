/* jbuild.h - building a JSON document with jansson where every step is
 * checked: a failed step (out of memory, a NULL value) marks the builder,
 * and a marked document is given up whole, never written with a part left
 * out. Used for the OCI bundle and the CLI's --json views. */
#ifndef AL_JBUILD_H
#define AL_JBUILD_H

#include <jansson.h>
#include <stdbool.h>

struct al_jb {
	bool bad; /* some step failed */
};

/* obj[key] = v, taking v (also when obj or v is NULL: then marked). */
void al_jb_set(struct al_jb *b, json_t *obj, const char *key, json_t *v);
/* Append v to arr, taking v. */
void al_jb_add(struct al_jb *b, json_t *arr, json_t *v);
/* Mark the builder when rc (a jansson or helper return) is not 0. */
void al_jb_check(struct al_jb *b, int rc);
/* The finished document: doc, or NULL (doc freed) when a step failed. */
json_t *al_jb_done(struct al_jb *b, json_t *doc);

#endif
