"""The worker's seccomp filter: a classic-BPF program, assembled here, that bubblewrap installs (``--seccomp FD``).

The sandbox already drops every capability and runs the worker as an unprivileged uid in a user namespace
(``sandbox``), so most of what is denied here would fail anyway; the filter is the second wall, and the one
that stops what an unprivileged process may still do: make a user namespace of its own (where it holds
capabilities again), ``ptrace`` or read another process's memory, load BPF programs, use the kernel keyring,
open the perf counters, or register a ``userfaultfd``.  Denied calls fail with ``EPERM`` (the caller sees an
ordinary error, and kictl judges what it then does); a call of another architecture's ABI (x32 on x86-64, or
a foreign ``AUDIT_ARCH``) kills the process, since the numbers below mean nothing there.

``clone`` is denied only when its flags ask for a new namespace (threads and processes stay possible: torch
and JIT compilers need them; processes are counted by the parent at every call); ``clone3``, whose flags a
classic-BPF program cannot read (they are behind a pointer), fails with ``ENOSYS``, so that the C library falls
back to ``clone``.

No dependency: the program is 8-byte ``struct sock_filter`` entries packed with ``struct``.
"""

from __future__ import annotations

import fcntl
import os
import platform
import struct

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]
_NR, _ARCH, _ARG0_LOW = 0, 4, 16

# classic BPF opcodes
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K

RET_ALLOW = 0x7FFF0000
RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000
EPERM = 1
ENOSYS = 38

#: CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET
#: | CLONE_NEWTIME
CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x80

#: What the worker may not call (EPERM), by name: mounting and namespaces, tracing and other processes' memory,
#: kernel modules and keyrings, BPF and perf, the clocks, devices and the machine's state.
DENIED = (
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "unshare",
    "setns",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "pidfd_getfd",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "quotactl",
    "mknod",
    "mknodat",
    "open_by_handle_at",
    "name_to_handle_at",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "sethostname",
    "setdomainname",
    "iopl",
    "ioperm",
    "lookup_dcookie",
)

#: Syscall numbers per architecture (the kernel's tables; x86-64 and aarch64's generic table).
_X86_64 = {
    "mount": 165,
    "umount2": 166,
    "pivot_root": 155,
    "chroot": 161,
    "unshare": 272,
    "setns": 308,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "mount_setattr": 442,
    "ptrace": 101,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "kcmp": 312,
    "pidfd_getfd": 438,
    "bpf": 321,
    "perf_event_open": 298,
    "userfaultfd": 323,
    "keyctl": 250,
    "add_key": 248,
    "request_key": 249,
    "init_module": 175,
    "finit_module": 313,
    "delete_module": 176,
    "kexec_load": 246,
    "kexec_file_load": 320,
    "reboot": 169,
    "swapon": 167,
    "swapoff": 168,
    "acct": 163,
    "quotactl": 179,
    "mknod": 133,
    "mknodat": 259,
    "open_by_handle_at": 304,
    "name_to_handle_at": 303,
    "settimeofday": 164,
    "clock_settime": 227,
    "clock_adjtime": 305,
    "adjtimex": 159,
    "sethostname": 170,
    "setdomainname": 171,
    "iopl": 172,
    "ioperm": 173,
    "lookup_dcookie": 212,
    "clone": 56,
    "clone3": 435,
}
_AARCH64 = {
    "mount": 40,
    "umount2": 39,
    "pivot_root": 41,
    "chroot": 51,
    "unshare": 97,
    "setns": 268,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "mount_setattr": 442,
    "ptrace": 117,
    "process_vm_readv": 270,
    "process_vm_writev": 271,
    "kcmp": 272,
    "pidfd_getfd": 438,
    "bpf": 280,
    "perf_event_open": 241,
    "userfaultfd": 282,
    "keyctl": 219,
    "add_key": 217,
    "request_key": 218,
    "init_module": 105,
    "finit_module": 273,
    "delete_module": 106,
    "kexec_load": 104,
    "kexec_file_load": 294,
    "reboot": 142,
    "swapon": 224,
    "swapoff": 225,
    "acct": 89,
    "quotactl": 60,
    "mknodat": 33,
    "open_by_handle_at": 265,
    "name_to_handle_at": 264,
    "settimeofday": 170,
    "clock_settime": 112,
    "clock_adjtime": 266,
    "adjtimex": 171,
    "sethostname": 161,
    "setdomainname": 162,
    "lookup_dcookie": 18,
    "clone": 220,
    "clone3": 435,
}
#: machine -> (AUDIT_ARCH value, syscall table, lowest number of a foreign ABI sharing the arch or None)
ARCHES = {
    "x86_64": (0xC000003E, _X86_64, 0x40000000),  # the x32 ABI's numbers carry bit 30
    "aarch64": (0xC00000B7, _AARCH64, None),
}


class Unsupported(Exception):
    """No filter for this machine's architecture."""


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k & 0xFFFFFFFF)


def program(machine: str | None = None) -> bytes:
    """The filter for ``machine`` (``platform.machine()`` by default) as bytes of ``struct sock_filter``."""
    machine = machine or platform.machine()
    if machine not in ARCHES:
        raise Unsupported(f"no seccomp filter for {machine}")
    arch, table, foreign = ARCHES[machine]
    denied = [table[name] for name in DENIED if name in table]
    ops: list[bytes] = [
        _op(_LD_W_ABS, _ARCH),
        _op(_JEQ_K, arch, jt=1, jf=0),
        _op(_RET_K, RET_KILL_PROCESS),
        _op(_LD_W_ABS, _NR),
    ]
    if foreign is not None:
        ops += [_op(_JGE_K, foreign, jt=0, jf=1), _op(_RET_K, RET_KILL_PROCESS)]
    # clone: its flags (args[0], the low word) must ask for no namespace; clone3: ENOSYS (libc then uses clone)
    ops += [
        _op(_JEQ_K, table["clone3"], jt=0, jf=1),
        _op(_RET_K, RET_ERRNO | ENOSYS),
        _op(_JEQ_K, table["clone"], jt=0, jf=4),
        _op(_LD_W_ABS, _ARG0_LOW),
        _op(_JSET_K, CLONE_NAMESPACES, jt=0, jf=1),
        _op(_RET_K, RET_ERRNO | EPERM),
        _op(_RET_K, RET_ALLOW),
    ]
    # each denied number jumps to the EPERM at the end; the last instruction before it allows
    for n, number in enumerate(denied):
        ops.append(_op(_JEQ_K, number, jt=len(denied) - n, jf=0))
    ops += [_op(_RET_K, RET_ALLOW), _op(_RET_K, RET_ERRNO | EPERM)]
    return b"".join(ops)


def memfd(machine: str | None = None) -> int:
    """A file descriptor (sealed memfd, read position 0) holding the filter, for ``bwrap --seccomp FD``."""
    data = program(machine)
    fd = os.memfd_create("kictl-seccomp", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.write(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)

        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE)
    except BaseException:
        os.close(fd)
        raise
    return fd
