/* env.h - a daemon's settings from the environment: every long option
 * --some-name may also be given as AIRLOCK_SOME_NAME (a flag wins), so that
 * a systemd unit's EnvironmentFile can carry a Redis URL with its password
 * without putting it on a command line that `ps` shows. */
#ifndef AL_ENV_H
#define AL_ENV_H

/* The value of AIRLOCK_<NAME> for the option NAME ('-' read as '_'), or
 * dflt when unset or empty. */
const char *al_opt_env(const char *name, const char *dflt);

#endif
