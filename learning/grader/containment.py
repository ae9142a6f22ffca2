"""Keep what the learner's code starts inside the check, and keep it away from the grader.

A process that runs the learner's code (a worker, the GPU compile check) is split in two on
Linux: a guard, which never runs the learner's code, and its child, which does. The guard is a
child subreaper: a process the learner's code starts that leaves its session or process group,
or whose parent exits (a double fork), is still adopted by the guard, never by init. When the
child exits, or the grader asks (SIGTERM, or the guard's parent dies), the guard kills every
process below it, found in /proc, until none is left, and then exits as its child did, so the
grader reads the child's exit status or signal from the guard.

Before the learner's module is imported, the child also locks itself down with a seccomp
filter, which it and everything it starts keep for good: no signal may reach the grader's
processes (the guard, the warm process, the check) or their groups, no stop signal any process
but the caller itself (a thread of the check, which kill() also takes, would stop it), no
process may be traced or have its memory read, no limit raised, no Unix socket made (so none
can impersonate the warm process or ask the desktop's service manager to start a process
outside the check), no io_uring set up, no keystrokes pushed into a terminal, and no
scheduling changed but the caller's own: no scheduling policy set at all (a real-time one
would starve the grader on the same core), and no niceness, I/O priority or set of cores
given to another process, a process group or a user's processes (a warm process's would be
every later worker's, a shell's every later check's). Where the
filter cannot be had (another architecture, a kernel without seccomp), the guard still ends
every process it adopted; the grader's waits are bounded either way.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import platform
import select
import signal
import struct
import sys
import time

# prctl(2) options
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_SECCOMP = 22
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
SECCOMP_MODE_FILTER = 2
# How long the guard goes on killing what it finds below it before it gives up (a process in
# uninterruptible sleep cannot die at once; a fork loop is outrun within milliseconds).
SWEEP_SECONDS = 30.0
# Processes (threads count too) the learner's code may add to its user's: a fork bomb stops
# there, where the guard can still end it. Room for a thread per core in a few processes.
EXTRA_TASKS = 512 + 4 * (os.cpu_count() or 8)
# Set to 0, the worker runs without the guard and the filter (to compare, or to debug).
SWITCH = "LEARNING_CONTAINMENT"

_libc = None


def _prctl(option: int, value: int = 0, a: int = 0, b: int = 0, c: int = 0) -> bool:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    args = [ctypes.c_ulong(x) for x in (value, a, b, c)]
    return _libc.prctl(ctypes.c_int(option), *args) == 0


def prctl_flag(option: int, value: int) -> bool:
    """Set one of the prctl(2) options above on this process; False where it cannot."""
    try:
        return _prctl(option, value)
    except (OSError, AttributeError):
        return False


def protect_grader() -> None:
    """Make this grader's process not dumpable, so that a process of the same user (the
    learner's) cannot open its memory or descriptors under /proc. Linux only; harmless again."""
    if sys.platform.startswith("linux"):
        prctl_flag(PR_SET_DUMPABLE, 0)


def available() -> bool:
    """Whether the guard can run here: Linux (child subreapers came with Linux 3.4), with
    /proc to find what is below it, and not switched off."""
    return (sys.platform.startswith("linux") and hasattr(os, "fork")
            and os.path.isdir("/proc/self/task") and os.environ.get(SWITCH, "1") != "0")


# --- finding and ending what is below a process ------------------------------------------------

def parents() -> dict[int, int]:
    """{pid: parent pid} of every process /proc shows now."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                text = handle.read()
        except OSError:
            continue  # it has just exited
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses; the last ")" ends it
        fields = text[text.rfind(b")") + 2:].split()
        if len(fields) > 1:
            found[int(name)] = int(fields[1])
    return found


def stopped(pid: int, below: bool = True) -> bool:
    """Whether ``pid`` (or, with ``below``, a process below it) is stopped (by SIGSTOP, say):
    it answers nothing until continued."""
    for each in [pid, *(descendants(pid) if below else [])]:
        try:
            with open(f"/proc/{each}/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state in (b"T", b"t"):
            return True
    return False


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``, children first."""
    children: dict[int, list[int]] = {}
    for child, parent in parents().items():
        children.setdefault(parent, []).append(child)
    found, queue = [], list(children.get(pid, []))
    while queue:
        child = queue.pop(0)
        found.append(child)
        queue.extend(children.get(child, []))
    return found


def kill_below(pid: int, seconds: float = SWEEP_SECONDS,
               reaped: dict[int, int] | None = None) -> int:
    """SIGKILL every process below ``pid`` until none is left or ``seconds`` pass. Given
    ``reaped`` (``pid`` is this process, a subreaper), the exits of its children, adopted ones
    included, are collected into it. A process killed cannot fork again, and what it forked
    meanwhile is adopted by the subreaper and found on the next round. Returns how many
    processes were killed."""
    killed = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if reaped is not None:
            reaped.update(_reap_all())
        found = descendants(pid)
        if not found:
            return killed
        for child in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(child, signal.SIGKILL)
                killed += 1
        time.sleep(0.005)
    return killed


def _reap_all() -> dict[int, int]:
    """Collect every child that has exited: {pid: wait status}."""
    statuses = {}
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return statuses
        if pid == 0:
            return statuses
        statuses[pid] = status


# --- the guard --------------------------------------------------------------------------------

def run_guarded(work) -> int:
    """Run ``work()`` (which returns an exit status) in a child of this process, which becomes
    its guard (see the module's docstring). Returns only in the child, with ``work``'s status
    given to the caller to exit with; the guard itself never returns, it exits as the child
    did. Where the guard cannot run, ``work`` runs here."""
    if not available():
        return work()
    parent = os.getppid()
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    # Blocked before the fork, so that a request to stop between the fork and the handlers
    # below is kept for the guard instead of killing it with nothing swept.
    watched = {signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGUSR1}
    signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    child = os.fork()
    if child == 0:
        os.close(read_end)
        os.close(write_end)
        for number in watched:
            signal.signal(number, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, watched)
        _prctl(PR_SET_DUMPABLE, 1)  # a warm process that forked it was made not dumpable
        os.setsid()  # its own group: a signal to "my group" from the learner's code skips the guard
        return work()
    os._exit(_guard(child, parent, read_end, write_end, watched))


def _guard(child: int, parent: int, read_end: int, write_end: int, watched: set) -> int:
    """The guard's life: wait for the child to exit or for a request to stop, end everything
    below, and return the exit status to leave with (a signal is raised on itself instead)."""
    _prctl(PR_SET_DUMPABLE, 0)  # its memory and descriptors are out of the learner's reach
    stop = {"asked": False}

    def asked(number, frame):
        stop["asked"] = True

    def forward(number, frame):  # the grader asks for the child's stack (learning.grader.stuck)
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, number)

    signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda number, frame: None)
    for number in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(number, asked)
    signal.signal(signal.SIGUSR1, forward)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)  # the grader's process died: stop
    if os.getppid() != parent:
        stop["asked"] = True  # it died before the line above
    signal.pthread_sigmask(signal.SIG_UNBLOCK, watched)
    status = None
    while status is None and not stop["asked"]:
        with contextlib.suppress(InterruptedError):
            select.select([read_end], [], [], 1.0)
        with contextlib.suppress(OSError):
            os.read(read_end, 4096)
        status = _reap_all().get(child, status)
    if status is None:  # asked to stop: the child goes first
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)
    for number in watched:
        signal.signal(number, signal.SIG_IGN if number != signal.SIGCHLD else signal.SIG_DFL)
    reaped: dict[int, int] = {}
    kill_below(os.getpid(), reaped=reaped)
    return _leave_as(status if status is not None else reaped.get(child))


def _leave_as(status: int | None) -> int:
    """Exit as the child did: the same exit code, or killed by the same signal."""
    if status is None:
        return 1
    code = os.waitstatus_to_exitcode(status)
    if code >= 0:
        return code
    number = -code
    with contextlib.suppress(ImportError, OSError, ValueError):
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the child's core, if any, is made
    with contextlib.suppress(OSError, ValueError):  # SIGKILL and SIGSTOP take no handler
        signal.signal(number, signal.SIG_DFL)
    with contextlib.suppress(OSError, ValueError):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {number})
        os.kill(os.getpid(), number)
    return 128 + number


# --- the filter -------------------------------------------------------------------------------

# Architectures the filter knows: their audit number and the syscalls it looks at.
_SYSCALLS = {
    "x86_64": (0xC000003E, dict(
        kill=62, tkill=200, tgkill=234, rt_sigqueueinfo=129, rt_tgsigqueueinfo=297,
        pidfd_open=434, pidfd_send_signal=424, pidfd_getfd=438, ptrace=101,
        process_vm_readv=310, process_vm_writev=311, setrlimit=160, prlimit64=302, socket=41,
        ioctl=16, fcntl=72,
        io_uring_setup=425, io_uring_enter=426, io_uring_register=427,
        setpriority=141, ioprio_set=251, sched_setaffinity=203, sched_setparam=142,
        sched_setscheduler=144, sched_setattr=314)),
    "aarch64": (0xC00000B7, dict(
        kill=129, tkill=130, tgkill=131, rt_sigqueueinfo=138, rt_tgsigqueueinfo=240,
        pidfd_open=434, pidfd_send_signal=424, pidfd_getfd=438, ptrace=117,
        process_vm_readv=270, process_vm_writev=271, setrlimit=164, prlimit64=261, socket=198,
        ioctl=29, fcntl=25,
        io_uring_setup=425, io_uring_enter=426, io_uring_register=427,
        setpriority=140, ioprio_set=30, sched_setaffinity=122, sched_setparam=118,
        sched_setscheduler=119, sched_setattr=274)),
}
_X32_BIT = 0x40000000  # x86-64's x32 numbering: another door to the same calls
AF_UNIX = 1
# ioctls that reach beyond the process: push keystrokes into a terminal (a shell would run
# them after the check), signal a terminal's foreground group, take over console output, or
# route a socket's signals to another process
_IOCTLS = {"TIOCSTI": 0x5412, "TIOCSIG": 0x40045436, "TIOCLINUX": 0x541C, "TIOCCONS": 0x541D,
           "FIOSETOWN": 0x8901, "SIOCSPGRP": 0x8902}
_FCNTLS = {"F_SETOWN": 8, "F_SETOWN_EX": 15}  # signals for I/O, sent to a process named
# Calls refused whatever their arguments
# (io_uring makes sockets and opens files without the calls the filter sees)
_REFUSED = ("tkill", "pidfd_send_signal", "pidfd_getfd", "ptrace", "process_vm_readv",
            "process_vm_writev", "setrlimit", "io_uring_setup", "io_uring_enter",
            "io_uring_register", "sched_setparam", "sched_setscheduler", "sched_setattr")
# Scheduling calls refused unless they name the caller itself (0, or its own id), and, where
# their first argument says whom (``_WHOM``), one process: a group or a user reaches the
# grader's processes too. setpriority: PRIO_PROCESS is 0; ioprio_set: IOPRIO_WHO_PROCESS 1.
_WHOM = {"setpriority": 0, "ioprio_set": 1}
_SCHEDULING = ("setpriority", "ioprio_set", "sched_setaffinity")
# Calls refused when their first argument names a protected process
_BY_TARGET = ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open")

# Where the signal number is among a signalling call's arguments, and the signals that stop
_SIGNAL_ARG = {"kill": 1, "tgkill": 2, "rt_sigqueueinfo": 1, "rt_tgsigqueueinfo": 2}
_STOPS = tuple(int(getattr(signal, name)) for name in ("SIGSTOP", "SIGTSTP", "SIGTTIN", "SIGTTOU")
               if hasattr(signal, name))  # Windows has none: the filter is Linux's anyway

# Classic BPF, as seccomp reads it
_LD_W_ABS, _JEQ, _JGE, _RET = 0x20, 0x15, 0x35, 0x06
_ALLOW = 0x7FFF0000
_DENY = 0x00050000 | errno.EPERM  # SECCOMP_RET_ERRNO: the call fails with EPERM
_ARCH, _NR = 4, 0


def _arg(index: int, high: bool = False) -> int:
    """The offset in seccomp_data of a syscall argument's low (or high) 32 bits."""
    return 16 + 8 * index + (4 if high else 0)


def machine() -> str:
    return platform.machine().lower().replace("arm64", "aarch64").replace("amd64", "x86_64")


def filter_program(protected: set[int], groups: set[int] = frozenset()
                   ) -> list[tuple[int, int, int, int]]:
    """The filter's instructions, (code, jump if true, jump if false, k), for this machine:
    signals to the ``protected`` processes, to the process groups they lead or are in
    (``groups``), or to every process, are refused, and the other calls the module's
    docstring names."""
    arch, numbers = _SYSCALLS[machine()]
    own = os.getpid() & 0xFFFFFFFF
    targets = sorted({p & 0xFFFFFFFF for p in protected if p > 0}
                     | {(-p) & 0xFFFFFFFF for p in set(protected) | set(groups) if p > 0}
                     | {0xFFFFFFFF})
    # Each handler: instructions with symbolic jumps "ALLOW" / "DENY" resolved below.
    handlers: dict[str, list] = {}
    for name in _REFUSED:
        handlers[name] = [("ret", "DENY")]
    # Stop signals go nowhere but to the caller's own group or itself: a thread id of the
    # check, which kill() takes too and which no list made here could foresee, stops it whole.
    for name in _BY_TARGET:
        handlers[name] = [(_LD_W_ABS, _arg(0))] + \
            [(_JEQ, value, "DENY", None) for value in targets]
        if name in _SIGNAL_ARG:
            handlers[name] += [(_JEQ, 0, "ALLOW", None), (_JEQ, own, "ALLOW", None),
                               (_LD_W_ABS, _arg(_SIGNAL_ARG[name]))] + \
                [(_JEQ, number, "DENY", None) for number in _STOPS]
        handlers[name].append(("ret", "ALLOW"))
    # prlimit64(pid, resource, new, old): reading a limit passes NULL as new
    handlers["prlimit64"] = [(_LD_W_ABS, _arg(2)), (_JEQ, 0, None, "DENY"),
                             (_LD_W_ABS, _arg(2, high=True)), (_JEQ, 0, "ALLOW", "DENY")]
    # the scheduling calls: the process named is their first argument, or their second after
    # whom it names
    for name in _SCHEDULING:
        whom = [(_LD_W_ABS, _arg(0)), (_JEQ, _WHOM[name], None, "DENY")] \
            if name in _WHOM else []
        named = _arg(1 if name in _WHOM else 0)
        handlers[name] = whom + [(_LD_W_ABS, named), (_JEQ, 0, "ALLOW", None),
                                 (_JEQ, own, "ALLOW", "DENY")]
    handlers["socket"] = [(_LD_W_ABS, _arg(0)), (_JEQ, AF_UNIX, "DENY", None), ("ret", "ALLOW")]
    handlers["ioctl"] = [(_LD_W_ABS, _arg(1))] + \
        [(_JEQ, value, "DENY", None) for value in _IOCTLS.values()] + [("ret", "ALLOW")]
    handlers["fcntl"] = [(_LD_W_ABS, _arg(1))] + \
        [(_JEQ, value, "DENY", None) for value in _FCNTLS.values()] + [("ret", "ALLOW")]
    names = list(handlers)
    head = [(_LD_W_ABS, _ARCH), (_JEQ, arch, None, "DENY"), (_LD_W_ABS, _NR)]
    if machine() == "x86_64":
        head.append((_JGE, _X32_BIT, "DENY", None))
    dispatch = [(_JEQ, numbers[name], f"H:{name}", None) for name in names] + [("ret", "ALLOW")]
    body = head + dispatch
    starts = {}
    for name in names:
        starts[f"H:{name}"] = len(body)
        body += handlers[name]
    starts["ALLOW"] = len(body)
    body.append(("ret", "ALLOW"))
    starts["DENY"] = len(body)
    body.append(("ret", "DENY"))
    program = []
    for index, item in enumerate(body):
        if item[0] == "ret":
            program.append((_RET, 0, 0, _ALLOW if item[1] == "ALLOW" else _DENY))
        elif item[0] == _LD_W_ABS:
            program.append((_LD_W_ABS, 0, 0, item[1]))
        else:
            code, value, true, false = item
            jumps = []
            for label in (true, false):
                offset = 0 if label is None else starts[label] - index - 1
                if not 0 <= offset <= 255:
                    raise ValueError("the filter grew past a conditional jump's reach")
                jumps.append(offset)
            program.append((code, jumps[0], jumps[1], value))
    return program


def lock_down(protected: set[int]) -> str:
    """Install the filter in this process for good (see the module's docstring); "" when it
    is in place, else why not (the process then runs without it)."""
    if machine() not in _SYSCALLS:
        return f"no seccomp filter for {machine()}"
    if os.environ.get(SWITCH, "1") == "0":
        return f"{SWITCH}=0"
    groups = set()
    for pid in protected:
        with contextlib.suppress(OSError):
            groups.add(os.getpgid(pid))
    groups.discard(os.getpgrp())  # its own group stays its own to signal
    program = filter_program(protected, groups)
    packed = b"".join(struct.pack("HBBI", *instruction) for instruction in program)
    buffer = ctypes.create_string_buffer(packed, len(packed))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(program), ctypes.cast(buffer, ctypes.c_void_p))
    if not _prctl(PR_SET_NO_NEW_PRIVS, 1):
        return f"prctl(PR_SET_NO_NEW_PRIVS) failed: {os.strerror(ctypes.get_errno())}"
    global _libc
    result = _libc.prctl(ctypes.c_int(PR_SET_SECCOMP), ctypes.c_ulong(SECCOMP_MODE_FILTER),
                         ctypes.byref(fprog), ctypes.c_ulong(0), ctypes.c_ulong(0))
    if result != 0:
        return f"the kernel refused the seccomp filter: {os.strerror(ctypes.get_errno())}"
    return ""


def limit_tasks(extra: int = EXTRA_TASKS) -> bool:
    """Let this process and what it starts add at most ``extra`` processes and threads to what
    its user runs now (RLIMIT_NPROC counts them per user; root is exempt)."""
    try:
        import resource

        uid, running = os.getuid(), 0
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            with contextlib.suppress(OSError, ValueError):
                with open(f"/proc/{name}/status", encoding="ascii", errors="replace") as handle:
                    fields = dict(line.split(":", 1) for line in handle if ":" in line)
                if int(fields["Uid"].split()[0]) == uid:
                    running += int(fields["Threads"])
        limit = running + extra
        soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_NPROC, (limit, limit))
    except (ImportError, OSError, ValueError, KeyError):
        return False
    return True


def grader_processes(grader_pid: int | None) -> set[int]:
    """The processes the learner's code must not signal, seen from the learner's process
    (the guard's child): the guard, the process that started it (the check, or the warm
    process that forked it) and the check itself."""
    guard = os.getppid()
    found = {guard, grader_pid or 0}
    with contextlib.suppress(OSError, ValueError, IndexError):
        found.add(parents().get(guard, 0))
    return {p for p in found if p > 1}
