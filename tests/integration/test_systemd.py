#!/usr/bin/python3
"""deploy/systemd/: the units `make install` puts in place, checked by
systemd's own tools, and the three daemons run the way the units run them.

This machine's PID 1 is not systemd, so no unit is started by systemd here.
What is checked instead:
- deploy/install.sh installs the programs, the units (naming its PREFIX),
  the example settings and the client library (libairlock.a, headers,
  airlock.pc: a program builds with pkg-config alone); `systemd-analyze verify` accepts the installed units
  (and refuses one whose program is missing: the check can fail);
- `systemd-analyze security --offline=yes` rates the gateway's and the
  scheduler's hardening "OK" (exposure at most 2.0);
- each example environment file names only options its daemon has;
- the daemons started from the units' ExecStart lines, with the settings
  from an environment file as systemd passes them (AIRLOCK_*, the Redis URL
  with each daemon's own ACL user and password), under the kernel settings
  the units ask for and that a process can be given without systemd:
  the gateway and the scheduler as an unprivileged user with no capability
  at all and no_new_privs (DynamicUser=, CapabilityBoundingSet=,
  NoNewPrivileges=), the worker as root with no_new_privs and exactly the
  bounding set its unit leaves. A job then goes through the gateway on the
  process, container and microVM tiers, and no password shows on a command
  line."""
import os
import re
import secrets
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import BUILD, Tap, need_root, skip_unless  # noqa: E402
from cluster import Cluster  # noqa: E402
from gwclient import Api, free_port, key_file  # noqa: E402

t = Tap()
need_root("the worker's backends")
skip_unless(shutil.which("systemd-analyze") and shutil.which("setpriv"),
            "systemd-analyze or setpriv missing (deploy/install-deps.sh)")
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
IMAGES = os.environ.get("AIRLOCK_IMAGES", "/var/lib/airlock/images")
NOBODY = 65534
PW = {u: secrets.token_hex(12) for u in ("gateway", "scheduler", "worker", "operator")}

POLICY = """\
result_ttl_s: 600
lease_ms: 30000
tiers:
  trusted:
    backend: process
    max_attempts: 1
  internal:
    backend: container
    max_attempts: 1
  untrusted:
    backend: microvm
    max_attempts: 1
    image: python
"""


def unit(path):
    """[Service] settings: name -> list of values, in order."""
    out, section = {}, None
    for line in open(path):
        line = line.strip()
        if line.startswith("["):
            section = line
        elif section == "[Service]" and "=" in line and not line.startswith("#"):
            k, v = line.split("=", 1)
            out.setdefault(k, []).append(v)
    return out


def env_file(path, **override):
    """KEY=VALUE lines, as systemd's EnvironmentFile= reads them."""
    env = {}
    for line in open(path):
        line = line.strip()
        if line and not line.startswith("#"):
            k, v = line.split("=", 1)
            env[k] = v
    env.update(override)
    return env


def options(prog):
    """The AIRLOCK_* names of a daemon's long options, from its --help."""
    h = subprocess.run([prog, "--help"], capture_output=True, text=True).stdout
    return {"AIRLOCK_" + o.upper().replace("-", "_") for o in re.findall(r"--([a-z][a-z-]+)", h)}


def exec_start(u):
    """ExecStart's words."""
    return u["ExecStart"][0].split()


def gw_line(line, rt, src):
    """One of the gateway unit's command lines, its words: "+" (run as
    root) dropped, its runtime directory and key file the test's."""
    return [a.replace("/run/airlock-gateway", rt).replace("/etc/airlock/gateway.keys", src)
            .replace("$MAINPID", str(gw_pid[0])) for a in line.lstrip("+").split()]


gw_pid = [0]


def _health(api):
    try:
        return api.call("GET", "/healthz", timeout=2)[0] == 200
    except OSError:
        return False


c = None
try:
    c = Cluster(policy=POLICY, start_redis=False, sockperm="777")
    os.chmod(c.policy, 0o644)
    prefix = os.path.join(c.dir, "prefix")
    p = subprocess.run(["bash", os.path.join(ROOT, "deploy", "install.sh")], capture_output=True,
                       text=True, env=dict(os.environ, BUILD=BUILD, PREFIX=prefix))
    units = os.path.join(prefix, "lib", "systemd", "system")
    share = os.path.join(prefix, "share", "airlock")
    names = ["airlock-gateway", "airlock-scheduler", "airlock-worker"]
    U = {n: unit(os.path.join(units, n + ".service")) for n in names} if p.returncode == 0 else {}
    t.ok(p.returncode == 0 and all(os.access(os.path.join(prefix, "bin", b), os.X_OK)
                                   for b in names + ["airlock", "airlock-sandbox-init"]) and
         all(U[n]["ExecStart"][0].startswith(os.path.join(prefix, "bin", n)) for n in U) and
         all(os.path.exists(os.path.join(share, f)) for f in
             ("gateway.env.example", "scheduler.env.example", "worker.env.example")),
         "install.sh: the programs, the units naming $PREFIX/bin, the example settings",
         p.stderr)

    # the client library: a program built with `pkg-config airlock` only
    prog = os.path.join(c.dir, "prog.c")
    with open(prog, "w") as f:
        f.write('#include <airlock/client/client.h>\n#include <stdio.h>\n'
                'int main(void) { struct al_err e = {0}; struct al_client *c = '
                'al_client_connect("unix:///nonexistent/r.sock", &e);\n'
                'puts(c ? "connected" : e.msg); return c != NULL; }\n')
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(prefix, "lib", "pkgconfig"))
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "airlock"], capture_output=True,
                           text=True, env=env)
    cc = subprocess.run(["cc", "-o", os.path.join(c.dir, "prog"), prog] + flags.stdout.split(),
                        capture_output=True, text=True)
    run = subprocess.run([os.path.join(c.dir, "prog")], capture_output=True, text=True) \
        if cc.returncode == 0 else None
    t.ok(flags.returncode == 0 and cc.returncode == 0 and run and "nonexistent" in run.stdout,
         "make install's libairlock.a, headers and airlock.pc build a client program with "
         "`pkg-config airlock` alone", (flags.stderr, cc.stderr[-600:]))

    p = subprocess.run(["systemd-analyze", "verify"] +
                       [os.path.join(units, n + ".service") for n in names],
                       capture_output=True, text=True)
    t.ok(p.returncode == 0 and not p.stderr.strip() and not p.stdout.strip(),
         "systemd-analyze verify accepts the three units", p.stderr)
    bad = os.path.join(c.dir, "airlock-broken.service")
    with open(bad, "w") as f:
        f.write(open(os.path.join(units, "airlock-gateway.service")).read().replace(
            "/bin/airlock-gateway", "/bin/airlock-missing"))
    p = subprocess.run(["systemd-analyze", "verify", bad], capture_output=True, text=True)
    t.ok(p.returncode != 0 and "airlock-missing" in p.stderr,
         "... and refuses a unit whose program is missing", p.stderr)

    for n in ("airlock-gateway", "airlock-scheduler"):
        p = subprocess.run(["systemd-analyze", "security", "--offline=yes",
                            os.path.join(units, n + ".service")], capture_output=True, text=True)
        m = re.search(r"Overall exposure level for \S+: ([0-9.]+) (\w+)", p.stdout)
        t.ok(m and float(m.group(1)) <= 2.0 and m.group(2) == "OK",
             "%s: systemd-analyze security rates it OK (%s)" % (n, m and m.group(1)),
             p.stdout[-1500:] + p.stderr)
        u = U[n]
        t.ok(u.get("DynamicUser") == ["yes"] and u.get("CapabilityBoundingSet") == [""] and
             u.get("NoNewPrivileges") == ["yes"],
             "%s: a dynamic user, no capabilities, no new privileges" % n, u)

    for n, f in (("airlock-gateway", "gateway"), ("airlock-scheduler", "scheduler"),
                 ("airlock-worker", "worker")):
        names_in = set(env_file(os.path.join(share, f + ".env.example")))
        unknown = names_in - options(os.path.join(BUILD, n))
        t.ok(names_in and not unknown,
             "%s.env.example names only options %s has" % (f, n), sorted(unknown))

    p = subprocess.run([os.path.join(BUILD, "airlock-gateway")], capture_output=True, text=True,
                       env=dict(os.environ, AIRLOCK_REDIS="unix:///x", AIRLOCK_KEYS="/x",
                                AIRLOCK_MAX_BODY="3MB"))
    t.ok(p.returncode == 2 and '--max-body: expected a whole number in 1..1073741824, got "3MB"'
         in p.stderr,
         "a bad AIRLOCK_<OPTION> value is refused as its flag would be", p.stderr)

    # Redis with each daemon's ACL user (deploy/redis-acl.sh), as in production
    acl = os.path.join(c.dir, "users.acl")
    p = subprocess.run([os.path.join(ROOT, "deploy", "redis-acl.sh")], capture_output=True,
                       text=True, env=dict(os.environ, **{"AIRLOCK_%s_PASSWORD" % u.upper(): PW[u]
                                                          for u in PW}))
    with open(acl, "w") as f:
        f.write(p.stdout + "user airlock-test on >t ~* &* +@all\n")
    c.cli_auth = ["--user", "airlock-test", "--pass", "t"]
    c.redis_args = ["--aclfile", acl]
    c.start_redis()

    def url(user):
        return "unix://%s?user=airlock-%s&password=%s" % (c.sock, user, PW[user])

    def unprivileged(u):
        """DynamicUser=yes, CapabilityBoundingSet= (empty), NoNewPrivileges=yes"""
        assert u["CapabilityBoundingSet"] == [""]
        return ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups",
                "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]

    share_env = lambda f, **kw: dict(env_file(os.path.join(share, f + ".env.example"), **kw),  # noqa
                                     PATH=os.environ["PATH"])
    sport = free_port()
    c._start("sched", unprivileged(U["airlock-scheduler"]) +
             exec_start(U["airlock-scheduler"]),
             env=share_env("scheduler", AIRLOCK_REDIS=url("scheduler"), AIRLOCK_POLICY=c.policy,
                           AIRLOCK_LISTEN="127.0.0.1:%d" % sport))

    wu = U["airlock-worker"]
    drop = wu["CapabilityBoundingSet"][0]
    t.ok(drop.startswith("~") and "CAP_SYS_MODULE" in drop and wu["NoNewPrivileges"] == ["yes"],
         "airlock-worker: root with no new privileges and a reduced bounding set", wu)
    caps = ",".join("-" + x[4:].lower() for x in drop[1:].split())
    c._start("worker", ["setpriv", "--no-new-privs", "--bounding-set=" + caps] +
             exec_start(wu),
             env=share_env("worker", AIRLOCK_REDIS=url("worker"), AIRLOCK_POLICY=c.policy,
                           AIRLOCK_SLOTS="1", AIRLOCK_UID_BASE="63900",
                           AIRLOCK_STATE_DIR=os.path.join(c.dir, "state"),
                           AIRLOCK_IMAGES=IMAGES, AIRLOCK_WORKER_ID="systemd-w"))
    c.workers.append("systemd-w")

    key = "k-" + secrets.token_hex(16)
    gu = U["airlock-gateway"]
    # RuntimeDirectory=airlock-gateway, RuntimeDirectoryMode=0700: the
    # service's user's; the operator's key file: root's, 0600
    rt = os.path.join(c.dir, "run-airlock-gateway")
    os.mkdir(rt, 0o700)
    os.chown(rt, NOBODY, NOBODY)
    src = os.path.join(c.dir, "gateway.keys")
    key_file(src, {"acme": key})
    os.chmod(src, 0o600)
    pre = subprocess.run(gw_line(gu["ExecStartPre"][0], rt, src), capture_output=True, text=True)
    gport = free_port()
    gw = c._start("gw", unprivileged(gu) + gw_line(gu["ExecStart"][0], rt, src),
                  env=share_env("gateway", AIRLOCK_REDIS=url("gateway"),
                                AIRLOCK_LISTEN="127.0.0.1:%d" % gport))
    gw_pid[0] = gw.pid
    api = Api(gport)
    t.ok(pre.returncode == 0 and c.wait_for(lambda: _health(api), timeout=20),
         "the gateway, its key file copied by its unit's ExecStartPre (as root) into its "
         "runtime directory and started from its ExecStart as an unprivileged user, is up",
         (pre.stderr, c.log("gw")[-800:]))

    for tier, b in (("trusted", "process"), ("internal", "container"), ("untrusted", "microvm")):
        st, body = api.call("POST", "/v1/run", {"tier": tier, "runtime": "python",
                                                "code": "print('via %s')" % b}, key=key,
                            timeout=300)
        r = body.get("result", {})
        t.ok(st == 200 and r.get("status") == "ok" and r.get("stdout") == "via %s\n" % b,
             "%s tier: a job through the gateway, run by the worker under its unit's "
             "no_new_privs and bounding set" % b, (st, body, c.log("worker")[-1500:]))

    leaked = []
    for name in ("sched", "worker", "gw"):
        pid = c.procs[name].pid
        for q in [pid] + [int(x) for x in os.listdir("/proc") if x.isdigit()]:
            try:
                if q != pid and open("/proc/%d/stat" % q).read().split()[3] != str(pid):
                    continue
                if any(pw.encode() in open("/proc/%d/cmdline" % q, "rb").read()
                       for pw in PW.values()):
                    leaked.append(name)
            except OSError:
                pass
    t.ok(not leaked, "no Redis password on a daemon's command line (they come from the "
         "environment file)", leaked)

    # systemctl reload airlock-gateway: its ExecReload lines, in order
    key2 = "k-" + secrets.token_hex(16)
    key_file(src, {"bravo": key2})
    os.chmod(src, 0o600)
    rl = [subprocess.run(gw_line(line, rt, src), capture_output=True, text=True).returncode
          for line in gu["ExecReload"]]
    new_ok = c.wait_for(lambda: api.call("GET", "/v1/jobs/nosuch", key=key2)[0] == 404, timeout=10)
    t.ok(rl == [0, 0] and new_ok and api.call("GET", "/v1/jobs/nosuch", key=key)[0] == 401 and
         gw.poll() is None and "keys_reload" in c.log("gw"),
         "the unit's ExecReload (systemctl reload): the key file copied again and SIGHUP: a "
         "new key works, the one removed is 401, the gateway runs on", (rl, c.log("gw")[-800:]))
    st = open("/proc/%d/status" % gw.pid).read()
    t.ok(re.search(r"^Uid:\s+%d\b" % NOBODY, st, re.M) and
         re.search(r"^CapBnd:\s+0+$", st, re.M) and re.search(r"^NoNewPrivs:\s+1$", st, re.M),
         "the gateway runs with no uid 0, no capability and no_new_privs", st[:600])
    log = c.rcli("ACL", "LOG")
    t.ok(log.strip() == "", "no daemon's command was refused by its ACL user", log[:1500])
finally:
    if c:
        c.close()
sys.exit(t.done())
