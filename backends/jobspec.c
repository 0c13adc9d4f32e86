/* jobspec.c - a job's argv and environment, for every backend (jobspec.h). */
#include "jobspec.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static int buf_str(struct al_buf *b, const char *s)
{
	return al_buf_append(b, s, strlen(s) + 1);
}

/* The name part of "NAME=value", or of a key. */
static size_t name_len(const char *s)
{
	const char *eq = strchr(s, '=');

	return eq ? (size_t)(eq - s) : strlen(s);
}

/* A python job's code runs as "<run_python>" (python3 -c this SCRIPT
 * ARGS...): its tracebacks name it so, with its lines, on every tier, not
 * the descriptor the code came on; sys.argv[0] is "<run_python>", the
 * code's globals are __main__'s, the work directory is on sys.path (its
 * own modules import) and so is the user site, HOME/.local, once it
 * exists: what pip installs there during the job imports after (a finder
 * at the end of sys.meta_path adds the directory when it appears; a plain
 * sys.path entry would be cached as missing by the first failed import), an uncaught exception
 * prints as Python prints it (through the traceback module, which reads the code's lines from
 * linecache; the launcher's frames left out; a sys.excepthook the code set is called instead) and
 * exits 1 (SIGINT for KeyboardInterrupt, as python3 does). The code's lines go into linecache
 * when something first imports it (a finder at the front of sys.meta_path wraps its loading):
 * importing linecache itself (tokenize, re, enum) would cost a print(1) job 12 ms, most of
 * its time beyond a bare python3's. In a warm interpreter that compiled a text ahead
 * (sys._airlock_pre: the text and its code, taken out of sys here) a job whose code is that
 * text runs that code, the same compile's. */
const char al_python_launcher[] =
    "def _airlock_run():\n"
    "    import site, sys\n"
    "    g = sys.modules['__main__'].__dict__\n"
    "    del g['_airlock_run']\n"
    "    usp = site.getusersitepackages()\n"
    "    class UserSite:\n"
    "        @staticmethod\n"
    "        def find_spec(name, path=None, target=None):\n"
    "            import importlib.machinery, os\n"
    "            if path is not None or not os.path.isdir(usp):\n"
    "                return None\n"
    "            sys.meta_path.remove(UserSite)\n"
    "            site.addsitedir(usp)\n"
    "            return importlib.machinery.PathFinder.find_spec(name, [usp], target)\n"
    "    if site.ENABLE_USER_SITE and usp not in sys.path:\n"
    "        sys.meta_path.append(UserSite)\n"
    "    name = '<run_python>'\n"
    "    path = sys.argv.pop(1)\n"
    "    sys.argv[0] = name\n"
    "    with open(path, 'rb') as f:\n"
    "        src = f.read()\n"
    "    entry = (len(src), None, src.decode('utf-8', 'replace').splitlines(True), name)\n"
    "    class Lines:\n"
    "        @staticmethod\n"
    "        def find_spec(mod, path=None, target=None):\n"
    "            if mod != 'linecache':\n"
    "                return None\n"
    "            import importlib.machinery\n"
    "            sys.meta_path.remove(Lines)\n"
    "            spec = importlib.machinery.PathFinder.find_spec(mod, path)\n"
    "            if spec is None or not hasattr(spec.loader, 'exec_module'):\n"
    "                return spec\n"
    "            run = spec.loader.exec_module\n"
    "            def exec_module(m):\n"
    "                run(m)\n"
    "                m.cache[name] = entry\n"
    "            spec.loader.exec_module = exec_module\n"
    "            return spec\n"
    "    if 'linecache' in sys.modules:\n"
    "        sys.modules['linecache'].cache[name] = entry\n"
    "    else:\n"
    "        sys.meta_path.insert(0, Lines)\n"
    "    pre = sys.__dict__.pop('_airlock_pre', None)\n"
    "    try:\n"
    "        exec(pre[1] if pre and pre[0] == src else compile(src, name, 'exec'), g)\n"
    "    except SystemExit:\n"
    "        raise\n"
    "    except BaseException as e:\n"
    "        tb = e.__traceback__\n"
    "        while tb is not None and tb.tb_frame.f_code.co_filename == '<string>':\n"
    "            tb = tb.tb_next\n"
    "        e.with_traceback(tb)\n"
    "        if sys.excepthook is sys.__excepthook__:\n"
    "            import traceback\n"
    "            traceback.print_exception(e)\n"
    "        else:\n"
    "            sys.excepthook(type(e), e, tb)\n"
    "        if isinstance(e, KeyboardInterrupt):\n"
    "            import os, signal\n"
    "            sys.stdout.flush()\n"
    "            sys.stderr.flush()\n"
    "            signal.signal(signal.SIGINT, signal.SIG_DFL)\n"
    "            os.kill(os.getpid(), signal.SIGINT)\n"
    "        sys.exit(1)\n"
    "_airlock_run()\n";

/* The warm interpreter's program (python3 -c it LAUNCHER MODULE...; see
 * jobspec.h). Every name it makes lives in a function that removes itself
 * from __main__, so the job's globals are a fresh -c program's; the two
 * modules it needs for itself (_socket, gc, resource, _ctypes) leave sys.modules again before
 * the job unless a preloaded one imported them. What an import prints goes
 * to /dev/null; an import that fails is skipped. LAUNCHER is compiled now:
 * the first compile() builds the AST types (PyAST_Check: 1-2 ms on a host,
 * ten times that under TCG) and the launcher's own text costs 0.6-0.9 ms
 * more, neither of them the job's. Then 'R' on fd 3 (the other end may
 * have sent its 'G' and closed by then), then what a microVM restored from
 * its pool's template (one snapshot for every VM of the pool) is told
 * before its job, any number of times: 'Z', random (and numpy.random, when
 * a preloaded module imported it) seeded again from os.urandom, which
 * would otherwise draw what every other copy draws; 'Y', rehearse: under
 * emulation a restored VM runs each piece of code slowly the first time
 * (QEMU translates it), so a child of the interpreter goes through a
 * job's path with nothing of any job (descriptors passed on a socket of
 * its own, a memfd of "pass" run by LAUNCHER, the environment and an
 * rlimit set, a collection; no atexit) and exits (killed after 10 s: the
 * interpreter waits on a socket the child's exit closes), and 'H' says it
 * ended. And one 'G' with five or six
 * descriptors back: stdin, stdout, stderr, code (placed at 0-3), a
 * session's port when there is one (placed at 4) and last a memfd of
 * "ARGC\0ENVC\0", the job's argv and environment, and optionally
 * the work directory and the job's rlimits ("AS,CPU,FSIZE,NOFILE": bytes,
 * seconds of CPU beyond what the start-up used, bytes, count), each
 * NUL-ended. Before the job's code the process takes its effective uid as
 * its real one too (the process tier starts it with another real uid: it
 * is not the job's until then) and is made dumpable again, as an
 * exec would have made it (PR_SET_DUMPABLE through _ctypes: its own
 * /proc/self files are then its own). argv is the cold job's (python3 -c
 * LAUNCHER SCRIPT ARGS...): sys.argv becomes what that -c would see, and
 * LAUNCHER runs as that -c's program, named "<string>" (the code compiled
 * before, when it is the same text). A text in /tmp/AL_WARM_PRECOMPILE (the
 * session server's, put there by the microVM's agent) is compiled before
 * the 'R' too, named as LAUNCHER names a job's code, and kept in
 * sys._airlock_pre for LAUNCHER. */
const char al_warm_python[] =
    "def _airlock_warm():\n"
    "    import os, sys\n"
    "    g = sys.modules['__main__'].__dict__\n"
    "    del g['_airlock_warm']\n"
    "    src = os.fsencode(sys.argv[1])\n"
    "    for name in sys.argv[2:]:\n"
    "        try:\n"
    "            __import__(name)\n"
    "        except BaseException:\n"
    "            pass\n"
    "    mine = [m for m in ('_socket', 'gc', 'resource', '_ctypes') if m not in sys.modules]\n"
    "    import _socket, gc, resource\n"
    "    prctl = None\n"
    "    if len(set(os.getresuid())) > 1:\n"
    "        try:\n"
    "            import _ctypes\n"
    "            prctl = _ctypes.dlsym(_ctypes.dlopen(None), 'prctl')\n"
    "        except Exception:\n"
    "            pass\n"
    "    pre = compile(src, '<string>', 'exec')\n"
    "    try:\n"
    "        with open('/tmp/" AL_WARM_PRECOMPILE "', 'rb') as f:\n"
    "            text = f.read()\n"
    "        sys._airlock_pre = (text, compile(text, '<run_python>', 'exec'))\n"
    "    except (OSError, SyntaxError, ValueError):\n"
    "        pass\n"
    "    gc.collect()\n"
    "    gc.freeze()\n"
    "    sys.stdout.flush()\n"
    "    sys.stderr.flush()\n"
    "    ctl = _socket.socket(fileno=3)\n"
    "    try:\n"
    "        ctl.send(b'R')\n"
    "    except OSError:\n"
    "        pass\n"
    "    def reseed():\n"
    "        for m in ('random', 'numpy.random'):\n"
    "            r = sys.modules.get(m)\n"
    "            try:\n"
    "                r is None or r.seed()\n"
    "            except Exception:\n"
    "                pass\n"
    "    def rehearse():\n"
    "        up, down = _socket.socketpair()\n"
    "        pid = os.fork()\n"
    "        if pid:\n"
    "            down.close()\n"
    "            up.settimeout(10)\n"
    "            try:\n"
    "                up.recv(1)\n"
    "            except OSError:\n"
    "                os.kill(pid, 9)\n"
    "            up.close()\n"
    "            os.waitpid(pid, 0)\n"
    "            return\n"
    "        try:\n"
    "            up.close()\n"
    "            a, b = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)\n"
    "            fd = os.memfd_create('rehearsal')\n"
    "            os.write(fd, b'pass\\n')\n"
    "            a.sendmsg([b'G'], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS,\n"
    "                                fd.to_bytes(4, sys.byteorder) * 2)])\n"
    "            m, an, _, _ = b.recvmsg(1, _socket.CMSG_LEN(6 * 4))\n"
    "            for lvl, typ, data in an:\n"
    "                for i in range(0, len(data) - 3, 4):\n"
    "                    os.close(int.from_bytes(data[i:i + 4], sys.byteorder, signed=True))\n"
    "            os.lseek(fd, 0, 0)\n"
    "            os.read(fd, 1 << 20)\n"
    "            os.dup2(fd, 0)\n"
    "            reseed()\n"
    "            os.environ['AIRLOCK_REHEARSAL'] = '1'\n"
    "            resource.setrlimit(resource.RLIMIT_FSIZE,\n"
    "                               resource.getrlimit(resource.RLIMIT_FSIZE))\n"
    "            sys.argv = ['-c', '/proc/self/fd/%d' % fd]\n"
    "            exec(pre, g)\n"
    "            gc.collect()\n"
    "        finally:\n"
    "            os._exit(0)\n"
    "    while True:\n"
    "        msg, anc, _, _ = ctl.recvmsg(1, _socket.CMSG_LEN(6 * 4))\n"
    "        if msg == b'Z':\n"
    "            reseed()\n"
    "        elif msg == b'Y':\n"
    "            try:\n"
    "                rehearse()\n"
    "            except OSError:\n"
    "                pass\n"
    "            try:\n"
    "                ctl.send(b'H')\n"
    "            except OSError:\n"
    "                pass\n"
    "        else:\n"
    "            break\n"
    "    ru = resource.getrusage(resource.RUSAGE_SELF)\n"
    "    try:\n"
    "        ctl.send(b'S%d' % int((ru.ru_utime + ru.ru_stime) * 1e9))\n"
    "    except OSError:\n"
    "        pass\n"
    "    fds = []\n"
    "    for lvl, typ, data in anc:\n"
    "        if lvl == _socket.SOL_SOCKET and typ == _socket.SCM_RIGHTS:\n"
    "            fds += [int.from_bytes(data[i:i + 4], sys.byteorder, signed=True)\n"
    "                    for i in range(0, len(data) - 3, 4)]\n"
    "    ctl.close()\n"
    "    if msg != b'G' or len(fds) not in (5, 6):\n"
    "        os._exit(126)\n"
    "    chunks = []\n"
    "    while True:\n"
    "        b = os.read(fds[-1], 1 << 20)\n"
    "        if not b:\n"
    "            break\n"
    "        chunks.append(b)\n"
    "    n = len(fds) - 1\n"
    "    for i in range(n):\n"
    "        os.dup2(fds[i], i)\n"
    "    for fd in fds:\n"
    "        if fd >= n:\n"
    "            os.close(fd)\n"
    "    f = b''.join(chunks).split(b'\\0')\n"
    "    argc, envc = int(f[0]), int(f[1])\n"
    "    os.environ.clear()\n"
    "    for e in f[2 + argc:2 + argc + envc]:\n"
    "        k, _, v = e.partition(b'=')\n"
    "        if k:\n"
    "            os.environ[os.fsdecode(k)] = os.fsdecode(v)\n"
    "    u = os.getresuid()\n"
    "    if u[0] != u[1]:\n"
    "        os.setresuid(u[1], u[1], u[1])\n"
    "        if prctl:\n"
    "            _ctypes.call_function(prctl, (4, 1, 0, 0, 0))\n"
    "    rest = f[2 + argc + envc:] + [b'', b'']\n"
    "    if rest[0]:\n"
    "        os.chdir(rest[0])\n"
    "    if rest[1]:\n"
    "        as_, cpu, fsize, nofile = (int(x) for x in rest[1].split(b','))\n"
    "        ru = resource.getrusage(resource.RUSAGE_SELF)\n"
    "        cpu += int(ru.ru_utime + ru.ru_stime) + 1\n"
    "        for r, v in ((resource.RLIMIT_AS, (as_, as_)), (resource.RLIMIT_CPU, (cpu, cpu + "
    "1)),\n"
    "                     (resource.RLIMIT_FSIZE, (fsize, fsize)),\n"
    "                     (resource.RLIMIT_NOFILE, (nofile, nofile))):\n"
    "            resource.setrlimit(r, v)\n"
    "    sys.argv = ['-c'] + [os.fsdecode(a) for a in f[5:2 + argc]]\n"
    "    code = pre if f[4] == src else compile(f[4], '<string>', 'exec')\n"
    "    for m in mine:\n"
    "        sys.modules.pop(m, None)\n"
    "    del f, chunks, fds, msg, anc, ctl, pre, src, mine, rest, u, prctl, n, reseed, rehearse\n"
    "    try:\n"
    "        exec(code, g)\n"
    "        code = 0\n"
    "    except SystemExit as e:\n"
    "        code = e.code\n"
    "    if code is None:\n"
    "        code = 0\n"
    "    elif not isinstance(code, int):\n"
    "        try:\n"
    "            print(code, file=sys.stderr)\n"
    "        except Exception:\n"
    "            pass\n"
    "        code = 1\n"
    "    if 'threading' in sys.modules:\n"
    "        sys.modules['threading']._shutdown()\n"
    "    import atexit\n"
    "    atexit._run_exitfuncs()\n"
    "    for k in [k for k in g if k != '__builtins__']:\n"
    "        del g[k]\n"
    "    gc.collect()\n"
    "    for s in (sys.stdout, sys.stderr):\n"
    "        try:\n"
    "            s.flush()\n"
    "        except Exception:\n"
    "            code = 120\n"
    "    os._exit(code & 0xff)\n"
    "_airlock_warm()\n";

/* Variables python3 or a module it preloads reads as it starts (locale,
 * paths, thread pools, backends): a job whose value of one is not the
 * interpreter's runs cold. */
bool al_startup_var(const char *kv)
{
	static const char *const names[] = {"HOME", "LANG", "LANGUAGE", "TZ",	  "TMPDIR",
					    "TEMP", "TMP",  "USER",	"LOGNAME"};
	static const char *const prefixes[] = {
	    "PYTHON", "LC_",  "OPENBLAS", "OMP_", "GOTO",	"MKL_",	   "BLIS_",  "NUMEXPR_",
	    "NUMBA_", "NPY_", "NUMPY_",	  "MPL",  "MATPLOTLIB", "PANDAS_", "SCIPY_", "KMP_"};
	size_t n = strcspn(kv, "=");

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strlen(names[i]) == n && !strncmp(kv, names[i], n))
			return true;
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (!strncmp(kv, prefixes[i], strlen(prefixes[i])))
			return true;
	return false;
}

static bool has_entry(char *const *list, const char *kv)
{
	for (; list && *list; list++)
		if (!strcmp(*list, kv))
			return true;
	return false;
}

/* The first start-up variable that is in one list and not, as it is, in
 * the other; NULL when they agree. */
const char *al_startup_differs(char *const *a, char *const *b)
{
	for (char *const *p = a; p && *p; p++)
		if (al_startup_var(*p) && !has_entry(b, *p))
			return *p;
	for (char *const *p = b; p && *p; p++)
		if (al_startup_var(*p) && !has_entry(a, *p))
			return *p;
	return NULL;
}

int al_command_argv(const struct al_job *job, const char *script, struct al_buf *b, uint32_t *argc)
{
	int bad = 0;

	if (job->runtime == AL_RUNTIME_PYTHON) {
		bad |= buf_str(b, "/usr/bin/python3") | buf_str(b, "-c") |
		       buf_str(b, al_python_launcher) | buf_str(b, script);
		*argc = 4;
	} else if (job->runtime == AL_RUNTIME_SH) {
		bad |= buf_str(b, "/bin/sh") | buf_str(b, script);
		*argc = 2;
	} else {
		*argc = 0;
	}
	for (size_t i = 0; i < job->argc; i++)
		bad |= buf_str(b, job->argv[i]);
	*argc += (uint32_t)job->argc;
	return bad ? -1 : 0;
}

/* The variables TLS clients read their trust store from: OpenSSL (python's
 * ssl, curl, wget), requests, pip, Node (an extra CA file), git, cargo. */
static const char *const ca_vars[] = {"SSL_CERT_FILE",	     "REQUESTS_CA_BUNDLE", "PIP_CERT",
				      "NODE_EXTRA_CA_CERTS", "CURL_CA_BUNDLE",	   "GIT_SSL_CAINFO",
				      "CARGO_HTTP_CAINFO"};
#define NCA_VARS (sizeof(ca_vars) / sizeof(ca_vars[0]))

int al_argv_env(const struct al_run_spec *spec, const char *script, struct al_buf *b,
		uint32_t *argc, uint32_t *envc)
{
	/* the same on every tier: HOME and the cwd are /work (a grading job's
	 * step: its build tree is /work, HOME its own /tmp). pip installs
	 * into HOME/.local (its fallback when the image's site-packages are
	 * not writable, which they never are: PEP 668's marker is waived for
	 * that, nothing of the image can change), its scripts on PATH; no
	 * version check (it would knock on the egress proxy's door). */
	const char *const base[] = {spec->grade_tree ? "PATH=" AL_SEARCH_PATH ":/tmp/.local/bin"
						     : "PATH=" AL_SEARCH_PATH ":/work/.local/bin",
				    spec->grade_tree ? "HOME=/tmp" : "HOME=/work",
				    "TMPDIR=/tmp",
				    "LANG=C.UTF-8",
				    "PYTHONDONTWRITEBYTECODE=1",
				    "PIP_BREAK_SYSTEM_PACKAGES=1",
				    "PIP_DISABLE_PIP_VERSION_CHECK=1"};
	const struct al_job *job = spec->job;
	const size_t nbase = sizeof(base) / sizeof(base[0]);
	static const char *const proxy_names[] = {"HTTP_PROXY",	 "HTTPS_PROXY", "http_proxy",
						  "https_proxy", "ALL_PROXY",	"NO_PROXY"};
	const size_t nproxy = sizeof(proxy_names) / sizeof(proxy_names[0]); /* NO_PROXY last */
	const size_t total = nbase + job->nenv + spec->nenv;
	int bad = al_command_argv(job, script, b, argc);

	*envc = 0;
	for (size_t i = 0; i < total; i++) {
		const struct al_kv *kv = NULL;
		const char *name;
		size_t n;
		bool later = false;

		if (i >= nbase)
			kv = i < nbase + job->nenv ? &job->env[i - nbase]
						   : &spec->env[i - nbase - job->nenv];
		name = kv ? kv->key : base[i];
		n = name_len(name);
		for (size_t j = i + 1; j < total && !later; j++) {
			const char *o;

			if (j < nbase)
				o = base[j];
			else if (j < nbase + job->nenv)
				o = job->env[j - nbase].key;
			else
				o = spec->env[j - nbase - job->nenv].key;
			later = name_len(o) == n && !strncmp(o, name, n);
		}
		for (size_t k = 0; spec->proxy_url && k < nproxy && !later; k++)
			later = strlen(proxy_names[k]) == n && !strncmp(proxy_names[k], name, n);
		if (later)
			continue; /* the proxy's variables are the worker's (below) */
		if (kv)
			bad |= al_buf_append(b, kv->key, strlen(kv->key)) |
			       al_buf_append(b, "=", 1) | buf_str(b, kv->value);
		else
			bad |= buf_str(b, base[i]);
		(*envc)++;
	}
	/* network egress: the only way out is the proxy; NO_PROXY empty */
	for (size_t k = 0; spec->proxy_url && k < nproxy; k++) {
		bad |= al_buf_append(b, proxy_names[k], strlen(proxy_names[k])) |
		       al_buf_append(b, "=", 1) | buf_str(b, k + 1 < nproxy ? spec->proxy_url : "");
		(*envc)++;
	}
	/* egress.ca_file, cache_https: every TLS client's trust store names the bundle in
	 * the job's inputs (the host's CAs and the tier's), unless the job or
	 * the policy names its own */
	for (size_t k = 0; spec->proxy_url && al_spec_ca_bundle(spec) && k < NCA_VARS; k++) {
		bool set = false;

		for (size_t i = 0; i < job->nenv && !set; i++)
			set = !strcmp(job->env[i].key, ca_vars[k]);
		for (size_t i = 0; i < spec->nenv && !set; i++)
			set = !strcmp(spec->env[i].key, ca_vars[k]);
		if (set)
			continue;
		bad |= al_buf_append(b, ca_vars[k], strlen(ca_vars[k])) | al_buf_append(b, "=", 1) |
		       buf_str(b, AL_CA_BUNDLE);
		(*envc)++;
	}
	return bad ? -1 : 0;
}

bool al_find_exec(const char *name, char *out, size_t cap)
{
	static const char *const dirs[] = {"/usr/local/sbin", "/usr/local/bin", "/usr/sbin",
					   "/usr/bin",	      "/sbin",		"/bin"};

	if (strchr(name, '/')) {
		snprintf(out, cap, "%s", name);
		return access(out, X_OK) == 0;
	}
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(out, cap, "%s/%s", dirs[i], name);
		if (access(out, X_OK) == 0)
			return true;
	}
	return false;
}

int al_spawn_wait(const char *const *argv, int *status)
{
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int st = -1;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	if (posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, environ) == 0)
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
	posix_spawn_file_actions_destroy(&fa);
	if (status)
		*status = st;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* The helper's path (into path, size bytes), and the helper opened and
 * checked: the fd, or a negative al_err_code with err. */
static int helper_at(const char *dir, const char *name, char *path, size_t size, struct al_err *err)
{
	struct stat st;
	int fd;

	if (dir) {
		if (al_pathf(path, size, "%s/%s", dir, name))
			return al_err_set(err, AL_ESANDBOX, "helper directory %s: path too long",
					  dir);
	} else {
		ssize_t n = readlink("/proc/self/exe", path, size - 64);
		char *slash;

		if (n <= 0)
			return al_err_sys(err, "find the worker's executable");
		path[n] = '\0';
		slash = strrchr(path, '/');
		snprintf(slash ? slash + 1 : path, 64, "%s", name);
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return al_err_sys(err, "%s (built with the worker: make)", path);
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || !(st.st_mode & S_IXUSR)) {
		close(fd);
		return al_err_set(err, AL_ESANDBOX, "%s is not an executable file", path);
	}
	if (st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH))) {
		close(fd);
		return al_err_set(err, AL_ESANDBOX,
				  "%s must be owned by root and writable by no one else", path);
	}
	return fd;
}

int al_open_helper(const char *dir, const char *name, struct al_err *err)
{
	char path[PATH_MAX];

	return helper_at(dir, name, path, sizeof(path), err);
}

int al_find_helper(const char *dir, const char *name, char *path, size_t size, struct al_err *err)
{
	int fd = helper_at(dir, name, path, size, err);

	if (fd < 0)
		return fd;
	close(fd);
	return AL_OK;
}

void al_pidfd_kill_wait(int pidfd, bool kill)
{
	siginfo_t si;

	if (kill)
		syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
	while (waitid(P_PIDFD, (id_t)pidfd, &si, WEXITED) < 0 && errno == EINTR)
		;
}

uint64_t al_fsize_limit(const struct al_limits *l)
{
	return l->disk_bytes;
}

unsigned al_job_cpus(uint64_t cpu_millis)
{
	static int host; /* read once: get_nprocs() reads a sysfs file each call */
	unsigned n = (unsigned)((cpu_millis + 999) / 1000);

	if (!host)
		host = get_nprocs();

	if (!cpu_millis || n > 256)
		return 0;
	return host > 0 && n > (unsigned)host ? (unsigned)host : n;
}

/* clone3's argument block (linux/sched.h clashes with sched.h). */
struct clone_args_v2 {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid,
	    set_tid_size, cgroup;
};

pid_t al_clone_pidfd(uint64_t flags, int *pidfd)
{
	struct clone_args_v2 args = {0};

	args.flags = flags | 0x00001000; /* CLONE_PIDFD */
	args.pidfd = (uint64_t)(uintptr_t)pidfd;
	args.exit_signal = SIGCHLD;
	return (pid_t)syscall(SYS_clone3, &args, sizeof(args));
}
