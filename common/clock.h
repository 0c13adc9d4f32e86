/* clock.h - the two clocks: Unix time (what is written into records and
 * results, and log lines) and a monotonic one (every interval and timeout:
 * a step of the wall clock moves none of them). In ms. */
#ifndef AL_CLOCK_H
#define AL_CLOCK_H

#include <stdint.h>

uint64_t al_now_ms(void);  /* Unix time, ms */
uint64_t al_mono_ms(void); /* CLOCK_MONOTONIC, ms */
uint64_t al_mono_us(void); /* CLOCK_MONOTONIC, us */

#endif
