"""A private libvirt for tests: virtlogd and libvirtd started here, by PID,
inside a network namespace made here (`ip netns add`), with every state
directory of theirs (/etc/libvirt, /run/libvirt, /var/lib/libvirt,
/var/log/libvirt, /var/cache/libvirt) bound from a temporary folder in their
own mount namespace. A libvirt network with a bridge and dnsmasq (DHCP) is
created in that namespace, so the bridge, dnsmasq and every VM address exist
only there. close() destroys the domains, stops the daemons and removes the
namespace and the folder.

Clients connect with URI qemu:///system?socket=<dir>/run/libvirt-sock; they
must run inside the namespace (`ip netns exec NS ...`, see wrap()) to reach
the VMs' addresses."""
import os
import shutil
import subprocess
import tempfile
import time

QEMU_CONF = """\
# QEMU as libvirt-qemu (made by deploy/install-deps.sh), no host
# security module here.
security_driver = "none"
"""
START = r"""
set -e
D=$1
for d in /etc/libvirt /run/libvirt /var/lib/libvirt /var/log/libvirt /var/cache/libvirt; do
	mkdir -p "$d"
done
mount --bind "$D/etc" /etc/libvirt
mount --bind "$D/run" /run/libvirt
mount --bind "$D/lib" /var/lib/libvirt
mount --bind "$D/log" /var/log/libvirt
mount --bind "$D/cache" /var/cache/libvirt
# A /dev/kvm that cannot make a VM (a nested host without virtualisation
# extensions) makes libvirt re-probe QEMU before every start (it finds the
# device usable, QEMU does not): about 30 s each. Make it unusable for the
# QEMU user then (libvirt checks access as that user).
if [ "$2" = hide-kvm ]; then
	: >"$D/nokvm"
	chmod 000 "$D/nokvm"
	mount --bind "$D/nokvm" /dev/kvm
fi
virtlogd -p "$D/virtlogd.pid" &
exec libvirtd -p "$D/libvirtd.pid"
"""


class LibvirtNS:
    def __init__(self, subnet="192.168.213", net="airlock", egress=False):
        self.ns = "airlock-lv-%d" % os.getpid()
        self.dir = tempfile.mkdtemp(prefix="airlock-libvirt-", dir="/var/tmp")
        with open("/proc/cpuinfo") as f:
            flags = f.read()
        self.hide_kvm = os.path.exists("/dev/kvm") and " vmx" not in flags and " svm" not in flags
        os.chmod(self.dir, 0o755)
        for d in ("etc", "run", "lib", "log", "cache"):
            os.makedirs(os.path.join(self.dir, d))
        with open(os.path.join(self.dir, "etc", "qemu.conf"), "w") as f:
            f.write(QEMU_CONF)
            if self.hide_kvm:
                # libvirt's private /dev for QEMU cannot carry the hidden node
                f.write("namespaces = []\n")
        self.uri = "qemu:///system?socket=%s/run/libvirt-sock" % self.dir
        self.subnet, self.net = subnet, net
        self.gateway = subnet + ".1"
        self.daemon = None
        subprocess.run(["ip", "netns", "add", self.ns], check=True)
        subprocess.run(["ip", "-n", self.ns, "link", "set", "lo", "up"], check=True)
        self.daemon = subprocess.Popen(
            ["ip", "netns", "exec", self.ns, "sh", "-c", START, "start", self.dir,
             "hide-kvm" if self.hide_kvm else "-"],
            stdout=open(os.path.join(self.dir, "libvirtd.log"), "ab"), stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL)
        for _ in range(300):  # the QEMU capability probe takes ~5-6 s
            if self.virsh("list", check=False).returncode == 0:
                break
            time.sleep(0.1)
        else:
            raise RuntimeError("libvirtd did not start: %s" % self.log()[-2000:])
        # An isolated network (no <forward>): nothing routes out of it.
        xml = os.path.join(self.dir, "net.xml")
        with open(xml, "w") as f:
            f.write("<network><name>%s</name><bridge name='alvbr%d' stp='off'/>"
                    "<ip address='%s' netmask='255.255.255.0'><dhcp>"
                    "<range start='%s.10' end='%s.250'/></dhcp></ip></network>"
                    % (net, os.getpid() % 1000, self.gateway, subnet, subnet))
        self.virsh("net-create", xml)

    def virsh(self, *args, check=True):
        return subprocess.run(["virsh", "-q", "-c", self.uri, *args], capture_output=True,
                              text=True, timeout=120, check=check)

    def wrap(self, argv):
        """argv run inside the namespace."""
        return ["ip", "netns", "exec", self.ns, *argv]

    def log(self):
        with open(os.path.join(self.dir, "libvirtd.log"), errors="replace") as f:
            return f.read()

    def domains(self):
        p = self.virsh("list", "--all", "--name", check=False)
        return [n for n in p.stdout.split() if n]

    def _pid(self, name):
        try:
            with open(os.path.join(self.dir, name)) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    def close(self):
        try:
            for d in self.domains():
                self.virsh("destroy", d, check=False)
            self.virsh("net-destroy", self.net, check=False)  # and its dnsmasq
        except Exception:
            pass
        for pidfile in ("libvirtd.pid", "virtlogd.pid"):
            pid = self._pid(pidfile)
            if pid:
                try:
                    os.kill(pid, 15)
                except OSError:
                    pass
        if self.daemon:
            try:
                self.daemon.wait(10)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
                self.daemon.wait()
        pid = self._pid("virtlogd.pid")
        for _ in range(50):
            if not pid or not os.path.exists("/proc/%d" % pid):
                break
            time.sleep(0.1)
        else:
            os.kill(pid, 9)
        subprocess.run(["ip", "netns", "del", self.ns])
        shutil.rmtree(self.dir, ignore_errors=True)


def serve(envfile):
    """For the demo: a private libvirt until SIGTERM; envfile gets NS=, URI=
    and GATEWAY= (shell syntax) once it is up."""
    import signal
    lv = LibvirtNS()
    stop = []
    signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
    try:
        with open(envfile + ".new", "w") as f:
            f.write("NS=%s\nURI='%s'\nGATEWAY=%s\n" % (lv.ns, lv.uri, lv.gateway))
        os.rename(envfile + ".new", envfile)
        while not stop:
            time.sleep(0.2)
    finally:
        lv.close()


if __name__ == "__main__":
    import sys
    if len(sys.argv) == 3 and sys.argv[1] == "serve":
        serve(sys.argv[2])
    else:
        sys.stderr.write("usage: libvirtns.py serve ENVFILE\n")
        sys.exit(2)
