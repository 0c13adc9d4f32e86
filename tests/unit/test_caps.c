/* test_caps.c - the capability bits the policy module knows per backend
 * name (so that the scheduler, which links no backend, refuses a tier that
 * grants what its backend cannot give) are the bits each backend's ops
 * table declares. */
#include "../../backends/backend.h"
#include "../../common/policy.h"
#include "tap.h"

int main(void)
{
	for (const struct al_backend_ops *const *b = al_backend_all(); *b; b++)
		TAP_OK(al_policy_backend_caps((*b)->name) == (*b)->caps,
		       "backend %s: the policy's capability bits are its ops table's (%#x)",
		       (*b)->name, (*b)->caps);
	TAP_OK(al_policy_backend_caps("docker") == 0, "an unknown backend has none");
	return tap_done();
}
