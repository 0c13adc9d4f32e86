/* test_jobexec.c - al_exec_job (backends/jobexec.h): the exit code a shell
 * gives and the real reason in errno, for each way a job's program can fail
 * to start (each in a child, so that a successful exec ends only it). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../backends/jobexec.h"
#include "tap.h"

/* The (code, errno) al_exec_job returns for prog in a child, as code * 1000
 * + errno; -1 if the child exec'd (or died). */
static int try_exec(const char *prog, char *const *argv)
{
	int fd[2], st, got = -1;
	pid_t pid;

	if (pipe(fd))
		return -1;
	pid = fork();
	if (pid == 0) {
		int code, e;

		close(fd[0]);
		fcntl(fd[1], F_SETFD, FD_CLOEXEC);
		code = al_exec_job(prog, argv, (char *[]){NULL});
		e = code * 1000 + errno;
		if (write(fd[1], &e, sizeof(e)) != sizeof(e))
			_exit(2);
		_exit(0);
	}
	close(fd[1]);
	if (read(fd[0], &got, sizeof(got)) != sizeof(got))
		got = -1;
	close(fd[0]);
	waitpid(pid, &st, 0);
	return got;
}

static void write_file(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");

	if (f) {
		fputs(text, f);
		fclose(f);
	}
	chmod(path, mode);
}

int main(void)
{
	char dir[] = "/tmp/al-jobexec.XXXXXX", path[256], loop[256];
	char *one[] = {(char *)"x", NULL};
	static char big[200000];
	char *bigv[40];

	if (!mkdtemp(dir))
		return 1;
	snprintf(path, sizeof(path), "%s/data.bin", dir);
	write_file(path, "\x01\x02\x03 not a program\n", 0755);
	TAP_OK(try_exec(path, one) == 126 * 1000 + ENOEXEC,
	       "a file no kernel runs: 126, ENOEXEC (not \"Permission denied\")");
	snprintf(path, sizeof(path), "%s/noexec.sh", dir);
	write_file(path, "#!/bin/sh\nexit 0\n", 0644);
	TAP_OK(try_exec(path, one) == 126 * 1000 + EACCES, "no execute bit: 126, EACCES");
	snprintf(path, sizeof(path), "%s/missing", dir);
	TAP_OK(try_exec(path, one) == 127 * 1000 + ENOENT, "no such file: 127, ENOENT");
	TAP_OK(try_exec("al-no-such-program-anywhere", one) == 127 * 1000 + ENOENT,
	       "a name found in no directory of the search path: 127, ENOENT");
	snprintf(loop, sizeof(loop), "%s/loop", dir);
	if (symlink(loop, loop)) /* a link to itself */
		perror("symlink");
	TAP_OK(try_exec(loop, one) == 126 * 1000 + ELOOP, "a symlink loop: 126, ELOOP");
	memset(big, 'a', sizeof(big) - 1);
	for (int i = 0; i < 39; i++)
		bigv[i] = big;
	bigv[39] = NULL;
	TAP_OK(try_exec("/bin/true", bigv) == 126 * 1000 + E2BIG,
	       "arguments past the kernel's limit: 126, E2BIG");
	TAP_OK(try_exec("true", one) == -1, "a program on the search path runs");
	snprintf(path, sizeof(path), "rm -rf %s", dir);
	if (system(path))
		return 1;
	return tap_done();
}
