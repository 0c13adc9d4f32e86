/* main.c - airlock-worker entry point (the worker loop is built on top). */
#include <stdio.h>
#include <string.h>

#include "../proto/job.h"

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "--version") == 0) {
		printf("airlock-worker protocol %d\n", AL_PROTO_VERSION);
		return 0;
	}
	fprintf(stderr, "airlock-worker: the worker loop is not built yet\n");
	return 2;
}
