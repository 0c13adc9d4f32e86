/* policy_int.h - what the policy loader's files share, top down:
 * policy_load.c (the file, its root, tenants and languages), policy_tier.c
 * (a tier) and policy_yaml.c (YAML values). Each calls only those after
 * it. Internal to common/. */
#ifndef AL_POLICY_INT_H
#define AL_POLICY_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <yaml.h>

#include "policy.h"

/* One file being read: its document, its name (for errors), the error. */
struct ctx {
	yaml_document_t doc;
	const char *file;
	struct al_err *err;
};

#define FOR_PAIRS(c, map, k, v, it)                                                                \
	for (yaml_node_pair_t *it = (map)->data.mapping.pairs.start;                               \
	     it < (map)->data.mapping.pairs.top &&                                                 \
	     ((k) = yaml_document_get_node(&(c)->doc, it->key),                                    \
	     (v) = yaml_document_get_node(&(c)->doc, it->value), 1);                               \
	     it++)

/* Each node of sequence seq in n; the caller checked seq is a sequence. */
#define FOR_ITEMS(c, seq, n, it)                                                                   \
	for (yaml_node_item_t *it = (seq)->data.sequence.items.start;                              \
	     it < (seq)->data.sequence.items.top &&                                                \
	     ((n) = yaml_document_get_node(&(c)->doc, *it));                                       \
	     it++)

/* policy_yaml.c: each returns AL_OK, or AL_EINVAL with the error naming
 * the file's line and what (a key) */
int al_pol_fail(struct ctx *c, yaml_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* n's text if it is a scalar, else NULL. */
const char *al_pol_scalar(yaml_node_t *n);
int al_pol_u64(struct ctx *c, yaml_node_t *n, const char *what, uint64_t *out);
/* true/yes, false/no */
int al_pol_bool(struct ctx *c, yaml_node_t *n, const char *what, bool *out);
/* *out freed and replaced by a copy of the string */
int al_pol_str(struct ctx *c, yaml_node_t *n, const char *what, char **out);
int al_pol_map(struct ctx *c, yaml_node_t *n, const char *what);

/* policy_tier.c */
/* An image's name (a recipe of deploy/images/recipes), as al_pol_str. */
int al_pol_image(struct ctx *c, yaml_node_t *v, const char *what, char **out);
/* The tier named name from its mapping n into t. */
int al_pol_tier(struct ctx *c, yaml_node_t *name, yaml_node_t *n, struct al_tier_policy *t);

#endif
