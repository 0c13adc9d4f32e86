/* chunk.c - a live-output entry as a chunk (see chunk.h). */
#include "chunk.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool al_chunk_of_entry(const struct redisReply *e, struct al_chunk *ch)
{
	const redisReply *f;

	memset(ch, 0, sizeof(*ch));
	if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
	    e->element[0]->type != REDIS_REPLY_STRING || e->element[1]->type != REDIS_REPLY_ARRAY)
		return false;
	snprintf(ch->id, sizeof(ch->id), "%s", e->element[0]->str);
	f = e->element[1];
	for (size_t i = 0; i + 1 < f->elements; i += 2) {
		const redisReply *k = f->element[i], *v = f->element[i + 1];

		if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING)
			continue;
		if (!strcmp(k->str, "t"))
			ch->kind = !strcmp(v->str, "out")	? AL_CHUNK_STDOUT
				   : !strcmp(v->str, "err")	? AL_CHUNK_STDERR
				   : !strcmp(v->str, "restart") ? AL_CHUNK_RESTART
				   : !strcmp(v->str, "end")	? AL_CHUNK_END
								: 0;
		else if (!strcmp(k->str, "a"))
			ch->attempt = (unsigned)strtoul(v->str, NULL, 10);
		else if (!strcmp(k->str, "d")) {
			ch->data = v->str;
			ch->len = v->len;
		} else if (!strcmp(k->str, "s"))
			snprintf(ch->status, sizeof(ch->status), "%s", v->str);
	}
	return ch->kind != 0;
}
