#!/usr/bin/python3
"""Snapshots (docs/snapshots.md) through a real redis-server, scheduler,
workers and QEMU (TCG here): a microVM session with a variable, an import
and a file is paused (the record says paused, its VM is gone, its slot
free) and its next call resumes it with all three; an explicit resume too;
a second worker that shares the tier's snapshot_dir resumes a session the
first paused; a snapshot with one byte changed is refused and the session
ends with the reason; fork(3) makes three sessions with the parent's
variables, independent afterwards, each drawing its own os.urandom and
random; a session paused past paused_max_s ends with its file; a tenant
at max_paused_per_tenant is refused; a pause into a full snapshot_dir
fails saying so and its session goes on; a worker SIGKILLed while it pauses
never restores half a snapshot; a session paused past paused_max_s ends
even when its worker is gone, its file removed when that worker is back; a process tier's pause is unsupported,
said so; a tier whose idle sessions pause pauses one, and its worker's
drain pauses another; docs/snapshots.md's example, the CLI's and the
gateway's pause; a pool's first warm VM becomes its template, from which
its VMs start, each job drawing its own random numbers, and a session
there is served by the VM's warm interpreter; with --vm-template-share
the copies map the template's memory, sealed (a copy's VMM cannot write
it), and a session in a copy pauses and resumes."""
import errno
import glob
import json
import mmap
import os
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "client", "python"))
from altest import BUILD, Tap, flip_byte, live_pids_of, need_root, raises  # noqa: E402
from cluster import Cluster  # noqa: E402
from gwclient import Api, free_port, key_file, start_gateway  # noqa: E402
from policies import DEFAULTS, policy, tier_def  # noqa: E402

import airlock  # noqa: E402

t = Tap()
need_root("the microVM backend")

UID = 72000  # VMM uids 72256-72767, and +1000 ... +3000: no other suite's
IMAGES = os.environ.get("AIRLOCK_IMAGES", "/var/lib/airlock/images")
SHARED = "/var/tmp/airlock-snap-shared-%d" % os.getpid()
SMALL = "/var/tmp/airlock-snap-small-%d" % os.getpid()  # a 16 MiB tmpfs: a pause finds it full
VM = dict(DEFAULTS, wall_ms=20000, memory_bytes=128 << 20)
SESS = {"max_per_tenant": 8, "idle_s": 600, "max_life_s": 3600, "max_paused_per_tenant": 6}
POLICY = policy(
    tier_def("vm", "microvm", image="python", defaults=VM, sessions=SESS),
    tier_def("vmshared", "microvm", image="python", defaults=VM, snapshot_dir=SHARED,
             sessions=dict(SESS, on_idle="pause")),
    tier_def("vmbrief", "microvm", image="python", defaults=VM,
             sessions=dict(SESS, paused_max_s=3, max_paused_per_tenant=1)),
    tier_def("vmidle", "microvm", image="python", defaults=VM,
             sessions=dict(SESS, idle_s=2, on_idle="pause")),
    tier_def("vmgone", "microvm", image="python", defaults=VM,
             sessions=dict(SESS, paused_max_s=2)),
    tier_def("vmfull", "microvm", image="python", defaults=VM, snapshot_dir=SMALL,
             sessions=SESS),
    tier_def("proc", "process", defaults=DEFAULTS, sessions=SESS),
    # (256 MiB: with pandas preloaded a 128 MiB VM sits near the warm
    # interpreter's rule, at most half the job's memory; there both
    # sessions of 13 once ran cold)
    tier_def("vmpool", "microvm", image="python", defaults=dict(VM, memory_bytes=256 << 20),
             sessions=SESS, pool=1),
    lease_ms=3000)
VM_WORKER = ["--images", IMAGES, "--vm-accel", "tcg"]


def vmm_pids_of(uid_base):
    """The VMMs of a worker of this uid base (their uids: base + 256 ...)."""
    return sorted(int(p) for p in live_pids_of(set(range(uid_base + 256, uid_base + 768))))


def record(c, sid, *names):
    """Fields of the session's record (state by default)."""
    return {n: c.rcli("HGET", "al:sess:" + sid, n).strip() for n in names or ("state", "reason")}


def snaps(d):
    return sorted(glob.glob(os.path.join(d, "*.snap*")))


os.makedirs(SMALL)
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m,mode=0700", "tmpfs", SMALL], check=True)
c = Cluster(policy=POLICY)
try:
    c.scheduler()
    # a fork's parent and its three copies run at once
    c.worker("snap1", uid_base=UID, slots=5, tiers="vm,vmshared,vmbrief,vmidle,vmfull,proc",
             extra=VM_WORKER)
    cl = airlock.Client(redis=c.url, tier="vm")
    own_dir = os.path.join(c.dir, "state", "snapshots", "snap1")

    # ---- pause, then the next call resumes ----
    s = cl.session(tier="vm")
    s.run_python("import json, random\nx = 41\nseq = [random.random() for _ in range(3)]")
    s.put("kept.txt", b"a file in the guest")
    s.exec("mkdir -p sub && cd sub && pwd > ../where.txt")
    vms_before = vmm_pids_of(UID)
    p = s.pause()
    rec = record(c, s.id)
    info = s.info()
    again = s.pause()  # paused already: its record answers, nothing resumes
    gone = not (set(vmm_pids_of(UID)) & set(vms_before)) and not record(c, s.id, "resumes")[
        "resumes"]
    files = snaps(own_dir)
    mode = oct(os.stat(files[0]).st_mode & 0o777) if files else None
    t0 = time.monotonic()
    r = s.run_python("print(x + 1, json.dumps([1]), open('kept.txt').read(), "
                     "open('where.txt').read().strip().endswith('/sub'))")
    resume_s = time.monotonic() - t0
    info2 = s.info()
    t.ok(p["state"] == "paused" and p["snapshot_bytes"] > 0 and rec.get("state") == "paused" and
         info["state"] == "paused" and gone and again["state"] == "paused" and
         again["snapshot_bytes"] == p["snapshot_bytes"] and len(files) == 1 and mode == "0o600" and
         r.status == "ok" and r.stdout == b'42 [1] a file in the guest True\n' and
         info2["state"] == "open" and record(c, s.id).get("state") == "open" and
         not snaps(own_dir),
         "1: a microVM session paused (%d bytes in %d ms, a 0600 file; the record and info "
         "say paused, the VM is gone; a second pause is answered from the record, nothing "
         "resumed) and resumed by its next call in %.2f s with its "
         "variable, import, file and directory" % (p["snapshot_bytes"], p["pause_ms"], resume_s),
         (p, rec, info, gone, files, mode, r, info2))

    # ---- explicit resume; a call sent again after it runs no second time ----
    once = s.run_python("x += 1\nprint(x)", call_id="inc-1")
    s.pause()
    ri = s.resume()
    again = s.run_python("x += 1\nprint(x)", call_id="inc-1")
    rec2 = record(c, s.id, "seen")
    r2 = s.run_python("x -= 1\nprint(x)")
    t.ok(ri["state"] == "open" and once.stdout == again.stdout == b"42\n" and
         r2.stdout == b"41\n" and rec2 == {"seen": ""},
         "2: an explicit resume brings it back; its info says open; a call sent again with "
         "the id of one answered before the pause runs no second time (its answer is the "
         "first's), and the record keeps no list of ids once open", (ri, once, again, r2, rec2))

    # ---- a snapshot with one byte changed is refused ----
    s4 = s
    s4.run_python("y = 1")
    s4.pause()
    path = record(c, s4.id, "snapshot")["snapshot"]
    flip_byte(path)
    r4 = s4.run_python("print(y)")
    e4 = raises(lambda: s4.run_python("print(y)"), airlock.SessionEnded)
    t.ok(r4.status == "sandbox_error" and path in (r4.error or "") and
         "refused" in (r4.error or "") and isinstance(e4, airlock.SessionEnded) and
         e4.reason == "snapshot_refused" and not os.path.exists(path) and
         record(c, s4.id)["reason"] == "snapshot_refused",
         "3: a snapshot with one byte changed is refused (sandbox_error naming it), never "
         "restored; the session ends snapshot_refused, the file goes", (r4, e4))

    # ---- fork(3): copies of the memory and files, each its own from there ----
    s5 = cl.session(tier="vm")
    # (OpenSSL's generator, drawn from first, holds its state in the process,
    # the same in every copy: it reseeds itself after a fork, a new pid, only)
    s5.run_python("import os, random, ssl\nsecret = 7\nssl.RAND_bytes(8)")
    s5.put("f.txt", b"parent's")
    kids = s5.fork(3)
    paused_kids = [record(c, k.id)["state"] for k in kids]
    outs = [k.run_python("print(secret, open('f.txt').read(), os.urandom(16).hex(), "
                         "random.random(), ssl.RAND_bytes(16).hex())").stdout.split()
            for k in kids]
    kids[0].run_python("secret = 100")
    kids[0].put("f.txt", b"changed")
    after = [k.run_python("print(secret, open('f.txt').read())").stdout for k in kids]
    parent = s5.run_python("print(secret, open('f.txt').read(), os.urandom(16).hex(), "
                           "random.random(), ssl.RAND_bytes(16).hex())").stdout.split()
    t.ok(paused_kids == ["paused"] * 3 and len({k.id for k in kids} | {s5.id}) == 4 and
         all(o[:2] == [b"7", b"parent's"] for o in outs) and
         len({o[2] for o in outs} | {parent[2]}) == 4 and
         len({o[3] for o in outs} | {parent[3]}) == 4 and
         len({o[4] for o in outs} | {parent[4]}) == 4 and
         after == [b"100 changed\n", b"7 parent's\n", b"7 parent's\n"] and
         parent[:2] == [b"7", b"parent's"],
         "4: fork(3): three new sessions (paused until their first call) with the parent's "
         "variables and files, independent afterwards; os.urandom, random and OpenSSL's "
         "RAND_bytes (TLS keys) differ in each copy and the parent", (paused_kids, outs, after, parent))
    for k in kids:
        k.close()

    # ---- a record naming a file outside the snapshot directories ----
    s5.pause()
    decoy = "/var/tmp/airlock-decoy-%d.snap" % os.getpid()
    with open(decoy, "wb") as f:
        f.write(b"not the worker's to open or remove")
    c.rcli("HSET", "al:sess:" + s5.id, "snapshot", decoy)
    mon = socket.socket(socket.AF_UNIX)  # MONITOR: the commands in order, scripts' too
    mon.connect(c.sock)
    mon.sendall(b"MONITOR\r\n")
    rd = s5.run_python("print(secret)")
    kept = os.path.exists(decoy)
    os.unlink(decoy)
    time.sleep(0.3)
    mon.settimeout(0.2)
    got, until = b"", time.monotonic() + 1  # the heartbeats go on: read for a second
    try:
        while time.monotonic() < until:
            got += mon.recv(1 << 16)
    except socket.timeout:
        pass
    mon.close()
    seen = got.decode(errors="replace").splitlines()
    answered = [i for i, l in enumerate(seen) if '"SET" "al:res:%s/' % s5.id in l]
    ended = [i for i, l in enumerate(seen)
             if '"HSET" "al:sess:%s" "state" "ended"' % s5.id in l]
    t.ok(rd.status == "sandbox_error" and "cannot be restored here" in (rd.error or "") and
         kept and record(c, s5.id)["reason"] == "broken",
         "4b: a record whose snapshot names a file outside the tier's snapshot directory: "
         "not restored, and that file neither opened nor removed", (rd, kept, record(c, s5.id)))
    t.ok(len(answered) == 1 and len(ended) == 1 and answered[0] < ended[0],
         "4c: the call held for a session that cannot resume is answered before its record "
         "says ended (a client that sees ended finds the answer there)", (answered, ended))

    # ---- quota, and paused past paused_max_s ----
    a = cl.session(tier="vmbrief")
    bb = cl.session(tier="vmbrief")
    a.run_python("z = 1")
    a.pause()
    a_path = record(c, a.id, "snapshot")["snapshot"]
    eq = raises(lambda: bb.pause(), airlock.QuotaExceeded)
    rb = bb.run_python("print('still open')")
    ok_wait = c.wait_for(lambda: record(c, a.id)["state"] == "ended", timeout=15)
    ea = raises(lambda: a.run_python("print(z)"), airlock.SessionEnded)
    t.ok(isinstance(eq, airlock.QuotaExceeded) and "max_paused_per_tenant 1" in str(eq) and
         rb.stdout == b"still open\n" and ok_wait and
         record(c, a.id)["reason"] == "paused_expired" and not os.path.exists(a_path) and
         isinstance(ea, airlock.SessionEnded) and ea.reason == "paused_expired",
         "5: a second pause past max_paused_per_tenant is refused (quota) and its session "
         "goes on; a session paused past paused_max_s ends (paused_expired) with its file",
         (eq, rb, ok_wait, record(c, a.id), ea))
    bb.close()

    # ---- no room for the snapshot ----
    with cl.session(tier="vmfull") as fs:
        fs.run_python("kept = 'still here'")
        fs.put("f.txt", b"and this")
        ef = raises(lambda: fs.pause(), airlock.AirlockError)
        rf = fs.run_python("print(kept, open('f.txt').read())")
        left = os.listdir(SMALL)
        state_f = record(c, fs.id)["state"]
    t.ok(ef is not None and "No space left on device" in str(ef) and
         "goes on" in str(ef) and rf.stdout == b"still here and this\n" and
         left == [] and state_f == "open",
         "5b: a pause whose snapshot_dir is full fails saying so (no space left), leaves no "
         "part of a file, and the session goes on with its variables and files",
         (ef, rf, left, state_f))

    # ---- the process tier cannot ----
    with cl.session(tier="proc") as ps:
        ps.run_python("q = 5")
        ep = raises(lambda: ps.pause(), airlock.AirlockError)
        rp = ps.run_python("print(q)")
    t.ok(ep is not None and "unsupported" in str(ep) and "CRIU" in str(ep) and
         rp.stdout == b"5\n",
         "6: a process tier's pause is unsupported, said why; the session goes on", (ep, rp))

    # ---- on_idle: pause ----
    si = cl.session(tier="vmidle")
    si.run_python("w = 'idle'")
    ok_idle = c.wait_for(lambda: record(c, si.id)["state"] == "paused", timeout=20)
    ri = si.run_python("print(w)")
    t.ok(ok_idle and ri.stdout == b"idle\n",
         "7: a tier with on_idle: pause pauses an idle session; its next call resumes it",
         (ok_idle, ri))
    si.close()

    # ---- docs/snapshots.md's example, as written ----
    doc = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs",
                            "snapshots.md")).read()
    example = doc.split("```python\n", 1)[1].split("```", 1)[0]
    ex = subprocess.run(["/usr/bin/python3", "-c", example], capture_output=True, text=True,
                        timeout=300, env=dict(os.environ, AIRLOCK_REDIS=c.url, AIRLOCK_TIER="vm",
                                              PYTHONPATH=os.path.join(
                                                  os.path.dirname(__file__), "..", "..",
                                                  "client", "python")))
    t.ok(ex.returncode == 0 and ex.stdout.splitlines() == [
        "paused paused", "6 kept while paused", "b'4\\n' b'3\\n'"],
         "8: docs/snapshots.md's example runs as written: pause, info, the call that "
         "resumes, a fork of two", (ex.stdout, ex.stderr[-2000:]))

    # ---- the CLI, the gateway ----
    def cli(*a):
        p = c.cli("session", *a, timeout=120)
        return p.returncode, p.stdout.decode(), p.stderr.decode()
    _, csid, _ = cli("open", "--tier", "vm")
    csid = csid.strip()
    steps = [cli("py", csid, "-c", "k = 'cli'"), cli("pause", csid), cli("pause", csid),
             cli("info", csid), cli("resume", csid), cli("py", csid, "-c", "print(k)"),
             cli("fork", csid, "2"), cli("fork", csid, "99")]
    kids_cli = json.loads(steps[6][1] or "{}").get("sessions", [])
    keys = {"acme": "ak-" + os.urandom(8).hex()}
    port = free_port()
    start_gateway(c, port, key_file(os.path.join(c.dir, "keys"), keys))
    api = Api(port)
    gcl = airlock.Client(gateway="http://127.0.0.1:%d" % port, token=keys["acme"], tier="vm")
    gs = gcl.session(tier="vm")
    gs.run_python("g = 'gw'")
    gp = gs.pause()
    gp2 = gs.pause()  # paused already: answered from its record
    st, ginfo = api.call("GET", "/v1/sessions/" + gs.id, key=keys["acme"])
    gr = gs.run_python("print(g)")
    t.ok([rc for rc, _, _ in steps] == [0, 0, 0, 0, 0, 0, 0, 2] and
         json.loads(steps[1][1])["state"] == "paused" and
         json.loads(steps[2][1])["state"] == "paused" and
         json.loads(steps[3][1])["state"] == "paused" and
         json.loads(steps[4][1])["state"] == "open" and steps[5][1] == "cli\n" and
         len(kids_cli) == 2 and gp["state"] == "paused" and gp2.get("state") == "paused" and
         gp2.get("snapshot_bytes") == gp["snapshot_bytes"] and st == 200 and
         ginfo.get("state") == "paused" and gr.stdout == b"gw\n",
         "9: the CLI's session pause (twice: the second answered by the record), info "
         "(paused), resume, fork 2 (fork 99: a usage error); the gateway's pause (twice), GET "
         "of a paused session, and the call that resumes it", (steps, gp2, st, ginfo, gr))
    for sid in kids_cli + [csid]:
        cli("close", sid)
    gs.close()

    # ---- a second worker sharing the tier's snapshot_dir resumes it ----
    sh = cl.session(tier="vmshared")
    sh.run_python("v = 'from sw1'")
    sh.pause()
    sh2 = cl.session(tier="vmshared")
    sh2.run_python("v = 'open at the drain'")
    c.signal("snap1", signal.SIGTERM)  # its idle session on a tier that pauses them: paused
    c.wait_exit("snap1")
    drained = record(c, sh2.id)
    c.worker("snap2", uid_base=UID + 1000, slots=2, tiers="vmshared", extra=VM_WORKER)
    rs = sh.run_python("print(v)")
    rs2 = sh2.run_python("print(v)")
    t.ok(rs.stdout == b"from sw1\n" and record(c, sh.id, "worker")["worker"] == "snap2" and
         drained["state"] == "paused" and rs2.stdout == b"open at the drain\n" and
         not snaps(SHARED),
         "10: a session paused on one worker, and one its drain paused (on_idle: pause), are "
         "resumed by another that shares the tier's snapshot_dir",
         (rs, rs2, drained, record(c, sh.id, "worker", "state")))
    sh.close()
    sh2.close()
    c.signal("snap2", signal.SIGTERM)
    c.wait_exit("snap2")

    # ---- a worker SIGKILLed while it pauses ----
    c.worker("snap3", uid_base=UID + 2000, slots=1, tiers="vm", extra=VM_WORKER)
    k3 = cl.session(tier="vm")
    k3.run_python("u = 3")
    dir3 = os.path.join(c.dir, "state", "snapshots", "snap3")
    cid = k3.client._via.session_call(k3.id, {"op": "pause"})
    saw_part = c.wait_for(lambda: any(p.endswith(".part") for p in snaps(dir3)), timeout=20,
                          step=0.005)
    c.signal("snap3", signal.SIGKILL)
    c.wait_exit("snap3")
    left_part = [p for p in snaps(dir3) if p.endswith(".part")]
    c.worker("snap3", uid_base=UID + 2000, slots=1, tiers="vm", extra=VM_WORKER)
    swept = c.wait_for(lambda: not [p for p in snaps(dir3) if p.endswith(".part")], timeout=20)
    ended = c.wait_for(lambda: record(c, k3.id)["state"] in ("ended", "paused"), timeout=20)
    st = record(c, k3.id)
    ek = raises(lambda: k3.run_python("print(u)"), airlock.SessionEnded)
    t.ok(saw_part and left_part and swept and ended and
         st == {"state": "ended", "reason": "worker_lost"} and
         isinstance(ek, airlock.SessionEnded) and ek.reason == "worker_lost",
         "11: a worker SIGKILLed while writing a snapshot leaves a half file no record names, "
         "removed when it starts again; the session is lost (worker_lost), nothing half "
         "restored", (saw_part, left_part, swept, st, ek, cid))
    c.signal("snap3", signal.SIGTERM)
    c.wait_exit("snap3")

    # ---- paused past paused_max_s while its worker is gone ----
    c.worker("snap6", uid_base=UID + 4000, slots=1, tiers="vmgone", extra=VM_WORKER)
    g = cl.session(tier="vmgone")
    g.run_python("g = 1")
    g.pause()
    g_path = record(c, g.id, "snapshot")["snapshot"]
    tenant_paused = lambda: int(c.rcli("HGET", "al:tenant:default", "paused").strip() or 0)
    before = tenant_paused()
    c.signal("snap6", signal.SIGKILL)
    c.wait_exit("snap6")
    expired = c.wait_for(lambda: record(c, g.id)["state"] == "ended", timeout=30)
    gst, after = record(c, g.id), tenant_paused()
    eg = raises(lambda: g.run_python("print(g)"), airlock.SessionEnded)
    kept = os.path.exists(g_path)
    c.worker("snap6", uid_base=UID + 4000, slots=1, tiers="vmgone", extra=VM_WORKER)
    swept_g = c.wait_for(lambda: not os.path.exists(g_path), timeout=20)
    c.signal("snap6", signal.SIGTERM)
    c.wait_exit("snap6")
    t.ok(expired and gst == {"state": "ended", "reason": "paused_expired"} and
         after == before - 1 and isinstance(eg, airlock.SessionEnded) and
         eg.reason == "paused_expired" and kept and swept_g,
         "11b: a session paused past paused_max_s whose worker is gone ends all the same "
         "(paused_expired, by the scheduler: the tenant's paused count down); its file, on "
         "that worker's disk, goes when the worker starts again",
         (expired, gst, before, after, eg, kept, swept_g))

    # ---- a pool's VMs start from its template, each made unique ----
    # (with a smaller code cache under TCG: denser, slower; docs/snapshots.md)
    c.worker("snap4", uid_base=UID + 3000, slots=2, tiers="vmpool",
             extra=VM_WORKER + ["--vm-tcg-cache-mib", "32"])
    tmpl = os.path.join(c.dir, "state", "microvm-templates", "snap4", "vmpool.snap")
    made = c.wait_for(lambda: "event=microvm_template tier=vmpool bytes=" in c.log("snap4"),
                      timeout=120)
    pcl = airlock.Client(redis=c.url, tier="vmpool")
    draw = ("import os, random, ssl, sys\nprint(os.urandom(16).hex(), random.random(), "
            "'AIRLOCK_REHEARSAL' not in os.environ, sys.argv, ssl.RAND_bytes(16).hex())")
    jobs = []
    for _ in range(3):
        jobs.append(pcl.run(draw))
        time.sleep(2)  # the pool's next VM restored and rehearsed
    tmode = oct(os.stat(tmpl).st_mode & 0o777) if os.path.exists(tmpl) else None
    t.ok(made and tmode == "0o600" and all(j.status == "ok" for j in jobs) and
         all(len({j.stdout.split()[i] for j in jobs}) == 3 for i in (0, 1, 4)) and
         all(j.stdout.split()[2:4] == [b"True", b"['<run_python>']"] for j in jobs) and
         all(j.info.get("boot") == "warm" and int(j.info.get("boot_ms", 99999)) < 2000
             for j in jobs[1:]),
         "12: a pool's first warm VM becomes its template (0600); the pool's VMs start from "
         "it (boot_ms %s), each job draws its own os.urandom, random and OpenSSL's RAND_bytes, "
         "and none sees what "
         "the VM's rehearsal set (the environment and argv a cold job's)" %
         [j.info.get("boot_ms") for j in jobs], ([(j.status, j.info, j.stdout) for j in jobs],
                                                 tmode))
    # a session's server starts in a pool VM's warm interpreter: its
    # modules there already; each session its own draws
    wss = [pcl.session() for _ in range(2)]
    wout = [s.run_python("import sys, random\nv = random.random()\n"
                         "print('pandas' in sys.modules)").stdout for s in wss]
    wout += [s.run_python("print(v)").stdout for s in wss]
    for s in wss:
        s.close()
    t.ok(wout[:2] == [b"True\n"] * 2 and wout[2] != wout[3] and
         all(float(x) < 1 for x in wout[2:]),
         "13: a session on a pool tier is served by a warm interpreter (its preloaded "
         "pandas imported), keeps its variables, and draws its own random", wout)
    vmm_args = [open("/proc/%d/cmdline" % p, "rb").read() for p in vmm_pids_of(UID + 3000)]
    bad = subprocess.run([os.path.join(BUILD, "airlock-worker"), "--vm-tcg-cache-mib", "4"],
                         capture_output=True, text=True)
    t.ok(vmm_args and all(b"tcg,tb-size=32\0" in a for a in vmm_args) and
         bad.returncode == 2 and "--vm-tcg-cache-mib" in bad.stderr and "8..1024" in bad.stderr,
         "13b: --vm-tcg-cache-mib 32 gives each of the worker's VMs a 32 MiB code cache under "
         "TCG (its pool and sessions ran above); 4 is refused (exit 2, the range said)",
         ([a[:200] for a in vmm_args], bad.returncode, bad.stderr))
    c.signal("snap4", signal.SIGTERM)
    c.wait_exit("snap4")
    t.ok(not os.path.exists(tmpl), "14: the template is removed when its worker stops", tmpl)
    # ---- --vm-template-share: the copies map the template's memory ----
    c.worker("snap5", uid_base=UID + 3000, slots=2, tiers="vmpool",
             extra=VM_WORKER + ["--vm-template-share"])
    made = c.wait_for(lambda: "event=microvm_template tier=vmpool" in c.log("snap5"),
                      timeout=120)
    tmpl = os.path.join(c.dir, "state", "microvm-templates", "snap5", "vmpool.snap")
    tbytes = os.path.getsize(tmpl) if os.path.exists(tmpl) else None
    jobs = []
    for _ in range(2):
        jobs.append(pcl.run(draw))
        time.sleep(2)
    # a copy's VMM (an escape from its guest, standing in: root here) cannot
    # write the template it maps: the memfd is sealed
    tried = []
    for pid in vmm_pids_of(UID + 3000):
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                if not os.readlink("/proc/%d/fd/%s" % (pid, fd)).startswith("/memfd:airlock-"):
                    continue
                w = os.open("/proc/%d/fd/%s" % (pid, fd), os.O_RDWR)
            except OSError:
                continue
            for what, act in (("write", lambda: os.pwrite(w, b"x", 4096)),
                              ("map", lambda: mmap.mmap(w, 4096, mmap.MAP_SHARED,
                                                        mmap.PROT_READ | mmap.PROT_WRITE)),
                              ("truncate", lambda: os.ftruncate(w, 4096))):
                try:
                    act()
                    tried.append((what, "done"))
                except OSError as ex:
                    tried.append((what, ex.errno))
            os.close(w)
    t.ok(made and "shared=1" in c.log("snap5") and tbytes is not None and tbytes < (1 << 20) and
         all(j.status == "ok" for j in jobs) and len({j.stdout for j in jobs}) == 2 and
         all(j.info.get("boot") in ("warm", "restored") for j in jobs) and tried and
         all(e == errno.EPERM for _, e in tried),
         "15: --vm-template-share: the template's file holds only its devices (%s bytes: its "
         "memory stays in a sealed memfd its copies map copy-on-write); jobs run in copies, "
         "each its own os.urandom; the memfd, opened from a copy's VMM, refuses a write, a "
         "shared writable mapping and a truncate (EPERM)" % tbytes,
         (made, tbytes, [(j.status, j.info, j.stdout) for j in jobs], tried))
    # a session in a copy pauses and resumes (its VM's RAM not the template's
    # any more: read whole from its snapshot)
    ws = pcl.session()
    ws.run_python("z = 'copied'\nimport json")
    wp = ws.pause()
    wr = ws.run_python("print(z, json.dumps([1]))")
    ws.close()
    t.ok(wp.get("state") == "paused" and wr.stdout == b"copied [1]\n",
         "16: a session in a template's copy pauses and resumes with its variables and "
         "imports", (wp, wr))
    c.signal("snap5", signal.SIGTERM)
    c.wait_exit("snap5")
except BaseException:
    for name in list(c.procs):
        if name.startswith("snap"):
            print("# --- %s's log, its end ---\n# " % name +
                  "\n# ".join(c.log(name).splitlines()[-60:]))
    raise

finally:
    c.close()
    subprocess.run(["rm", "-rf", SHARED])
    subprocess.run(["umount", SMALL])
    os.rmdir(SMALL)
t.done()
