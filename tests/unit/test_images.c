/* test_images.c - a job's catalogue image at admission (common/policy.c):
 * the tier's default when it names none, one of the tier's images, else
 * rejected naming the allowed ones; a tier's image keys from YAML. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/policy.h"
#include "policy_file.h"
#include "tap.h"

int main(void)
{
	struct al_policy pol;
	struct al_err err = {0};
	const struct al_tier_policy *t;
	struct al_job job = {0};
	int rc;

	rc = load_policy_text(
	    "tiers:\n"
	    "  u: {backend: microvm, images: [python, toolchain], pool: {toolchain: 2}}\n"
	    "  c: {backend: container, image: node}\n"
	    "  p: {backend: process}\n",
	    &pol, &err);
	TAP_OK(rc == AL_OK, "a policy with images loads (%s)", err.msg);
	if (rc)
		return tap_done();
	t = al_policy_tier(&pol, "u");
	TAP_OK(t && t->nimages == 2 && !strcmp(t->image, "python") && t->pool == 0 &&
		   t->pools[1] == 2,
	       "images alone: the first is the default; a pool per image is kept per image");
	t = al_policy_tier(&pol, "c");
	TAP_OK(t && t->nimages == 1 && !strcmp(t->images[0], "node"),
	       "an image alone is the one the tier offers");

	t = al_policy_tier(&pol, "u");
	rc = al_policy_admit_image(t, &job, &err);
	TAP_OK(rc == AL_OK && job.image && !strcmp(job.image, "python"),
	       "a job naming no image gets the tier's default");
	free(job.image);
	job.image = strdup("toolchain");
	rc = al_policy_admit_image(t, &job, &err);
	TAP_OK(rc == AL_OK && !strcmp(job.image, "toolchain"), "a job may name another it offers");
	free(job.image);
	job.image = strdup("node");
	rc = al_policy_admit_image(t, &job, &err);
	TAP_OK(rc == AL_EINVAL, "an image the tier does not offer is refused");
	TAP_CONTAINS(err.msg,
		     "image: \"node\" is not allowed on tier u (allowed: python, toolchain)",
		     "the refusal names the image, the tier and the allowed ones");
	rc = al_policy_admit_image(al_policy_tier(&pol, "p"), &job, &err);
	TAP_OK(rc == AL_EINVAL, "a tier without images refuses any image");
	TAP_CONTAINS(err.msg, "tier p offers no catalogue image", "and says so");
	free(job.image);
	job.image = NULL;
	rc = al_policy_admit_image(al_policy_tier(&pol, "p"), &job, &err);
	TAP_OK(rc == AL_OK && !job.image, "a tier without images leaves the job without one");
	al_policy_free(&pol);
	return tap_done();
}
