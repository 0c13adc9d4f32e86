/* main.c - airlock-scheduler entry point (admission is built on top). */
#include <stdio.h>
#include <string.h>

#include "../proto/job.h"

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "--version") == 0) {
		printf("airlock-scheduler protocol %d\n", AL_PROTO_VERSION);
		return 0;
	}
	fprintf(stderr, "airlock-scheduler: admission is not built yet\n");
	return 2;
}
