/* policy_file.h - for unit tests: load a policy from YAML text (written to
 * a temporary file, removed after). */
#ifndef AL_TEST_POLICY_FILE_H
#define AL_TEST_POLICY_FILE_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "../../common/policy.h"

static inline int load_policy_text(const char *yaml, struct al_policy *pol, struct al_err *err)
{
	char path[] = "/tmp/airlock-test-policy-XXXXXX";
	int fd = mkstemp(path), rc;
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;

	if (!f)
		return -1;
	fputs(yaml, f);
	fclose(f);
	rc = al_policy_load(path, pol, err);
	unlink(path);
	return rc;
}

#endif
