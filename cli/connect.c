/* connect.c - where the CLI's verbs go (a struct cli_where: direct Redis,
 * or a gateway with its API key), and the client for it. Calls nothing of
 * the CLI's other files but io.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* The API key: $AIRLOCK_TOKEN, else the first line of --token-file. */
static char *gateway_token(const char *token_file, struct al_err *err)
{
	char line[1024];
	FILE *f;

	if (getenv("AIRLOCK_TOKEN") && *getenv("AIRLOCK_TOKEN"))
		return cli_strdup(getenv("AIRLOCK_TOKEN"));
	if (!token_file) {
		al_err_set(err, AL_EINVAL,
			   "--gateway needs an API key: $AIRLOCK_TOKEN or --token-file");
		return NULL;
	}
	if (!(f = fopen(token_file, "re"))) {
		al_err_sys(err, "--token-file %s", token_file);
		return NULL;
	}
	if (!fgets(line, sizeof(line), f))
		line[0] = '\0';
	fclose(f);
	line[strcspn(line, "\r\n")] = '\0';
	if (!line[0]) {
		al_err_set(err, AL_EINVAL, "--token-file %s is empty", token_file);
		return NULL;
	}
	return cli_strdup(line);
}

struct al_client *cli_connect(const struct cli_where *where, int *rc)
{
	struct al_err err = {0};
	struct al_client *c = NULL;

	if (where->gateway) {
		char *token = gateway_token(where->token_file, &err);

		if (token) {
			c = al_client_connect_gateway(where->gateway, token, &err);
			memset(token, 0, strlen(token));
			free(token);
		}
	} else {
		c = al_client_connect(where->redis, &err);
	}

	if (!c) {
		fprintf(stderr, "airlock: %s\n", err.msg);
		*rc = err.code == AL_EINVAL ? EXIT_USAGE : EXIT_UNAVAILABLE;
	}
	return c;
}
