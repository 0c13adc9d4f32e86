/* hostroot.h - what of the host a sandbox that runs the host's programs
 * (the process backend; the container backend without an image) gets:
 * nothing but these, read-only. Shared with the static sandbox init, so
 * only macros and static tables here. */
#ifndef AL_HOSTROOT_H
#define AL_HOSTROOT_H

/* Top-level names kept as the host has them: links on a merged-/usr host
 * (copied as links), directories elsewhere (bound read-only). */
#define AL_HOST_TOP                                                                                \
	{                                                                                          \
		"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", NULL                      \
	}

/* Entries of the host's /etc a program may need, bound read-only when
 * present (a symlink is copied as a symlink): the loader cache, the
 * alternatives links, certificates, time zone, public tables, the
 * interpreters' site configuration. Never passwd, shadow, the host's
 * names or anything of a daemon's configuration. */
#define AL_HOST_ETC                                                                                \
	{                                                                                          \
		"alternatives", "ssl", "ca-certificates", "ld.so.cache", "localtime", "timezone",  \
		    "os-release", "protocols", "services", "mime.types", "gai.conf", "host.conf",  \
		    "python3", "python3.11", "python3.12", "perl", "magic", NULL                   \
	}

/* Device nodes of a minimal /dev (bound from the host's). */
#define AL_HOST_DEV                                                                                \
	{                                                                                          \
		"null", "zero", "full", "random", "urandom", NULL                                  \
	}

/* The generated /etc files (uid: the job's uid inside the sandbox). */
#define AL_ETC_PASSWD_FMT                                                                          \
	"root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n"                                         \
	"airlock:x:%u:%u:airlock job:%s:/bin/sh\n"                                                 \
	"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
#define AL_ETC_GROUP_FMT "root:x:0:\nairlock:x:%u:\nnogroup:x:65534:\n"
#define AL_ETC_HOSTS	 "127.0.0.1\tlocalhost airlock\n::1\tlocalhost ip6-localhost\n"
#define AL_ETC_HOSTNAME	 "airlock\n"
#define AL_ETC_NSSWITCH                                                                            \
	"passwd: files\ngroup: files\nshadow: files\nhosts: files\n"                               \
	"networks: files\nprotocols: files\nservices: files\n"

#endif
