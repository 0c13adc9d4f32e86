/* tap.h - a tiny TAP producer for the C unit tests: `ok N - name` lines and
 * an exit status of 1 when anything failed. tests/run.sh counts the lines. */
#ifndef AL_TAP_H
#define AL_TAP_H

#include <stdio.h>
#include <string.h>

static int tap_n, tap_failed;

#define TAP_OK(cond, ...)                                                                          \
	do {                                                                                       \
		int tap_c_ = !!(cond);                                                             \
		printf("%sok %d - ", tap_c_ ? "" : "not ", ++tap_n);                               \
		printf(__VA_ARGS__);                                                               \
		printf("\n");                                                                      \
		if (!tap_c_) {                                                                     \
			tap_failed++;                                                              \
			printf("#   failed at %s:%d: %s\n", __FILE__, __LINE__, #cond);            \
		}                                                                                  \
	} while (0)

/* Diagnostic: message must contain needle. */
#define TAP_CONTAINS(hay, needle, ...)                                                             \
	do {                                                                                       \
		const char *tap_h_ = (hay);                                                        \
		TAP_OK(tap_h_ &&strstr(tap_h_, (needle)), __VA_ARGS__);                            \
		if (!tap_h_ || !strstr(tap_h_, (needle)))                                          \
			printf("#   expected \"%s\" in \"%s\"\n", (needle),                        \
			       tap_h_ ? tap_h_ : "(null)");                                        \
	} while (0)

static inline int tap_done(void)
{
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}

#endif
