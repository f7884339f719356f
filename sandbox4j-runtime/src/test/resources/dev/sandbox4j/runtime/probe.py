# What confines this process and every process of the sandbox, as the kernel reports it; run by
# HostileSandboxTest. Arguments: a marker (so the host finds this process) and a file to wait for
# (so the host can read this process's cgroups while it lives). Prints one JSON object.
import ctypes
import json
import os
import sys
import time

KEYS = ("Seccomp", "Seccomp_filters", "NoNewPrivs", "CapInh", "CapPrm", "CapEff", "CapBnd",
        "CapAmb")


def status(pid):
    out = {}
    with open("/proc/%s/status" % pid) as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in KEYS or key == "Name":
                out[key] = value.strip()
    return out


def mapping(pid, name):
    with open("/proc/%s/%s" % (pid, name)) as f:
        return " ".join(f.read().split())


# First wait until the host has read this process's cgroups and made the file (with an exec of
# its own, ended by then): so no exec is being set up while the processes are listed.
go = sys.argv[2]
deadline = time.time() + 120
while not os.path.exists(go) and time.time() < deadline:
    time.sleep(0.005)
processes = {}
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            p = status(pid)
            p["uid_map"] = mapping(pid, "uid_map")
            p["gid_map"] = mapping(pid, "gid_map")
            processes[pid] = p
        except OSError:
            pass  # ended meanwhile
me = status("self")
del me["Name"]
# gVisor's status has no NoNewPrivs line; the system call answers on every kernel
libc = ctypes.CDLL(None, use_errno=True)
me["NoNewPrivs (prctl)"] = str(libc.prctl(39, 0, 0, 0, 0))  # PR_GET_NO_NEW_PRIVS
print(json.dumps({"self": me, "uid_map": mapping("self", "uid_map"),
                  "gid_map": mapping("self", "gid_map"), "processes": processes}))
