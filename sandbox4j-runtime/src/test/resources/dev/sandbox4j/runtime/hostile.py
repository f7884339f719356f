# Escape attempts from inside a sandbox, run as root there (sudo) by HostileSandboxTest.
# Argument: JSON {"device": [major, minor], "hostPids": [...], "hostPaths": [...],
# "secret": "...", "targets": [[label, address, port], ...], "mnt": "/tmp/dir"}.
# Prints one JSON object: attack name -> {"refused": bool, "detail": str}; the test decides.
import ctypes
import errno
import glob
import json
import os
import platform
import socket
import sys

args = json.loads(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
X86 = platform.machine() == "x86_64"
NR = {
    "init_module": 175 if X86 else 105,
    "finit_module": 313 if X86 else 273,
    "bpf": 321 if X86 else 280,
    "keyctl": 250 if X86 else 219,
    "add_key": 248 if X86 else 217,
    "ptrace": 101 if X86 else 117,
    "unshare": 272 if X86 else 97,
    "open_by_handle_at": 304 if X86 else 265,
}
results = {}


def record(name, refused, detail):
    results[name] = {"refused": bool(refused), "detail": str(detail)}


def call(name, *argv):
    """A raw syscall: (return value, errno name)."""
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(NR[name]), *argv)
    e = ctypes.get_errno()
    return r, (errno.errorcode.get(e, str(e)) if r < 0 else "")


def seccomp_refused(name, *argv):
    # The profile answers EPERM; anything else reached the kernel (EINVAL, EFAULT, ...).
    r, e = call(name, *argv)
    record(name, r < 0 and e == "EPERM", "returned %d %s" % (r, e))


# ---- raw devices and mounts ---------------------------------------------------------------
mnt = args["mnt"]
os.makedirs(mnt, exist_ok=True)
major, minor = args["device"]
node = os.path.join(mnt, "..", os.path.basename(mnt) + "-blk")
try:
    os.mknod(node, 0o600 | 0o060000, os.makedev(major, minor))
    try:
        fd = os.open(node, os.O_RDONLY)
        data = os.read(fd, 512)
        os.close(fd)
        record("mknod+open block device", False, "read %d bytes of the host disk" % len(data))
    except OSError as e:
        record("mknod+open block device", True, "mknod ok, open refused: %s" % e)
    os.unlink(node)
except OSError as e:
    record("mknod+open block device", True, "mknod refused: %s" % e)

libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong,
                       ctypes.c_char_p]
for fstype, data in [("proc", None), ("sysfs", None), ("debugfs", None), ("tmpfs", None),
                     ("cgroup", b"memory"), ("cgroup", b"rdma"), ("cgroup2", None),
                     ("securityfs", None), ("bpf", None)]:
    ctypes.set_errno(0)
    r = libc.mount(b"none", mnt.encode(), fstype.encode(), 0, data)
    e = ctypes.get_errno()
    name = "mount " + fstype + ("" if data is None else " -o " + data.decode())
    if r == 0:
        libc.umount2(mnt.encode(), 2)
    record(name, r != 0, "returned %d %s" % (r, errno.errorcode.get(e, e)))

# ---- the cgroup release_agent ---------------------------------------------------------------
agents = glob.glob("/sys/fs/cgroup/release_agent") + glob.glob("/sys/fs/cgroup/*/release_agent")
written = []
for path in agents:
    try:
        with open(path, "w") as f:
            f.write("/tmp/evil")
        written.append(path)
    except OSError:
        pass
record("write release_agent", not written,
       "written: %s (of %d found)" % (written, len(agents)) if written else
       "%d release_agent files, none writable" % len(agents))
notify = []
for path in glob.glob("/sys/fs/cgroup/**/notify_on_release", recursive=True)[:50]:
    try:
        with open(path, "w") as f:
            f.write("1")
        notify.append(path)
    except OSError:
        pass
record("write notify_on_release", not notify, "written: %s" % notify)

# ---- sysctl and sysrq -----------------------------------------------------------------------
for path, value in [("/proc/sys/kernel/core_pattern", "|/tmp/evil"),
                    ("/proc/sys/kernel/modprobe", "/tmp/evil"),
                    ("/proc/sys/vm/drop_caches", "3"),
                    ("/proc/sys/kernel/hostname", "evil"),
                    ("/proc/sys/net/ipv4/ip_forward", "1"),
                    ("/proc/sysrq-trigger", "h")]:
    try:
        with open(path, "w") as f:
            f.write(value)
        record("write " + path, False, "written")
    except OSError as e:
        record("write " + path, True, e)

# ---- module loading, bpf, keyctl, namespaces, handles ----------------------------------------
image = ctypes.create_string_buffer(64)
seccomp_refused("init_module", image, ctypes.c_ulong(64), b"")
fd = os.open("/etc/hostname", os.O_RDONLY)
seccomp_refused("finit_module", ctypes.c_int(fd), b"", ctypes.c_int(0))
os.close(fd)
attr = ctypes.create_string_buffer(128)
seccomp_refused("bpf", ctypes.c_int(0), attr, ctypes.c_uint(128))  # BPF_MAP_CREATE
seccomp_refused("keyctl", ctypes.c_int(0), ctypes.c_int(-3), ctypes.c_int(1))
seccomp_refused("add_key", b"user", b"evil", b"x", ctypes.c_size_t(1), ctypes.c_int(-3))
seccomp_refused("unshare", ctypes.c_ulong(0x10000000))  # CLONE_NEWUSER
handle = ctypes.create_string_buffer(128)
seccomp_refused("open_by_handle_at", ctypes.c_int(-100), handle, ctypes.c_int(0))

# ---- host processes -------------------------------------------------------------------------
visible = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
commands = {}
for pid in visible:
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            commands[pid] = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        pass
record("host processes invisible", True, json.dumps(commands))
for pid in args["hostPids"]:
    r, e = call("ptrace", ctypes.c_long(16), ctypes.c_long(pid), None, None)  # PTRACE_ATTACH
    if r == 0:
        call("ptrace", ctypes.c_long(17), ctypes.c_long(pid), None, None)  # PTRACE_DETACH
    seen = pid in commands
    record("ptrace attach host pid %d" % pid, r < 0 and (seen or e == "ESRCH"),
           "returned %d %s; visible inside as %r" % (r, e, commands.get(pid)))
    try:
        os.kill(pid, 0)
        record("signal host pid %d" % pid, seen, "kill 0 succeeded; inside it is %r"
               % commands.get(pid))
    except OSError as ex:
        record("signal host pid %d" % pid, True, ex)

# ---- host paths -----------------------------------------------------------------------------
leaks = []
for path in args["hostPaths"]:
    for variant in [path, "/proc/1/root" + path, "/proc/self/root/../../.." + path,
                    "/proc/1/cwd/../../.." + path, "/dev/catatonit/.." + path]:
        try:
            with open(variant, "rb") as f:
                if args["secret"].encode() in f.read(1 << 20):
                    leaks.append(variant)
        except OSError:
            pass
record("host files unreachable", not leaks, "read the host's secret through %s" % leaks)

# ---- the network ----------------------------------------------------------------------------
for label, address, port in args["targets"]:
    s = socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect((address, port))
        results["connect " + label] = {"refused": False, "detail": "connected"}
    except OSError as e:
        results["connect " + label] = {"refused": True, "detail": repr(e)}
    finally:
        s.close()

print(json.dumps(results, sort_keys=True))
