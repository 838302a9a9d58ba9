"""Running untrusted code in a sandbox: bubblewrap, rlimits and a per-sandbox watchdog.

Two kinds of process run sandboxed for each submission: the student's Jupyter kernel
(``kernel.SandboxKernel``) and the trusted checker (``checker``), which never runs student code
but is sandboxed all the same. The grader (outside) talks to the kernel over Unix-domain ZeroMQ
sockets in a folder both can see and to the checker over pipes, so neither needs a network.
Inside, a sandbox sees:

* read-only: the system (``/usr``, ``/etc``), the Python installation and virtualenv, and
  the course files it needs (``course_lib/``, ``data/``; the checker also its own code);
* writable: ``/submission`` (a scratch copy of one student's folder; the kernel only) and
  ``/tmp`` (a scratch folder), both owned by an unprivileged user id;
* nothing else: no other submission, no gradebook, no source notebooks, no hidden tests,
  no network (``--unshare-net``), its own process tree (``--unshare-pid``), no GPU unless the
  grader passes ``gpu=True`` (then ``/dev/nvidia*`` are bound in).

Limits. Where systemd can start transient scopes (cgroups v2), each sandbox runs in its own
scope with ``MemoryMax`` and ``TasksMax``: memory and processes are bounded per sandbox by the
kernel. Elsewhere (containers without systemd, like the course's CI machine) these hold:
rlimits per process (address space, CPU seconds, file size, open files; no core files); the
process limit per sandbox user (RLIMIT_NPROC counts every process of a user id, and as root each
sandbox has its own user id); and the grader's watchdog (``usage``), which sums the resident
memory and counts the processes of the whole sandbox and the bytes in its writable folders
several times a second and kills the sandbox past ``memory_bytes``, ``processes`` or
``disk_bytes``. Outputs are capped per cell and per notebook by the grader. On a GPU
(``gpu=True``) the address-space rlimit is not set, because CUDA reserves far more virtual
memory than it uses; memory is then bounded by the scope or the watchdog alone.
"""
from __future__ import annotations

import fcntl
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from ..paths import DATA, LIBRARY

INSIDE_SUBMISSION = "/submission"
# sandbox user ids when the grader runs as root (see sandbox_uid): 4096 blocks of 64 from here,
# far above login users, system users, nobody (65534), systemd's dynamic users (61184-65519) and
# the usual subordinate-id ranges of rootless containers (100000 + 65536 per user), because a
# slot's next sandbox kills whatever still runs under its user id (clear_user)
SANDBOX_UID_BASE = 1_800_000_000

SLOTS = 32  # submissions one grader process grades at once: slot N's kernel runs as user N of
#             the process's block, its checker as user N + SLOTS


def sandbox_uid(slot: int) -> int | None:
    """The unprivileged user a sandbox runs as when the grader is root, else None.

    Distinct per grading process and worker slot: the process limit (RLIMIT_NPROC) counts every
    process of a user on the machine, and a slot's next sandbox kills what is left under its
    user (``clear_user``), so two graders running at once must never share users. Each process
    reserves its own block of 64 users (``_user_block``)."""
    if os.geteuid() != 0:
        return None
    return SANDBOX_UID_BASE + _user_block() * 64 + slot % 64


_USER_BLOCKS = 4096
# one place for every grader on the machine, whatever its TMPDIR (graders with different
# temporary folders would otherwise not see each other's blocks); only root reserves blocks
USER_BLOCK_LOCKS = Path("/run/course-sandbox-users")
_reserved: dict = {}  # pid -> (block, the open lock file that holds it)


def _user_block() -> int:
    """This process's block of sandbox users: an exclusive flock on one lock file per block,
    held until the process ends (the kernel releases it then, however the process dies)."""
    pid = os.getpid()
    if pid in _reserved:
        return _reserved[pid][0]
    folder = USER_BLOCK_LOCKS
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
    except OSError:  # no writable /run (a minimal container): the fixed folder in /tmp
        folder = Path("/tmp/course-sandbox-users")
        folder.mkdir(mode=0o700, exist_ok=True)
    for step in range(_USER_BLOCKS):
        block = (pid + step) % _USER_BLOCKS
        handle = open(folder / f"{block}.lock", "a")  # noqa: SIM115 - held for the process's life
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue
        _reserved[pid] = (block, handle)
        return block
    raise RuntimeError(f"all {_USER_BLOCKS} blocks of sandbox users are taken by running graders")


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or cannot create namespaces on this machine."""


@dataclass
class Limits:
    """What one submission may use. Sizes in bytes, times in seconds."""

    memory_bytes: int = 4 * 2**30      # per sandbox (scope or watchdog) and per process (RLIMIT_AS)
    cpu_seconds: int = 600             # CPU time per process (RLIMIT_CPU)
    processes: int = 4608              # processes + threads per sandbox (RLIMIT_NPROC, scope, watchdog);
    #                                    the Numba CUDA simulator runs one thread per CUDA thread
    file_bytes: int = 256 * 2**20      # largest file it may write (RLIMIT_FSIZE)
    disk_bytes: int = 512 * 2**20      # all files in its writable folders together (watchdog)
    open_files: int = 1024             # RLIMIT_NOFILE
    cell_seconds: float = 120.0        # wall clock per cell
    notebook_seconds: float = 900.0    # wall clock for the whole notebook
    output_bytes: int = 200_000        # kept outputs per cell; the rest is dropped
    notebook_output_bytes: int = 2_000_000  # kept outputs per notebook
    startup_seconds: float = 60.0      # kernel start
    gpu: bool = False                  # bind /dev/nvidia* in; no address-space rlimit


@dataclass
class CellRun:
    """What happened when one piece of code ran in the kernel."""

    status: str                  # "ok", "error", "timeout", "died"
    outputs: list = field(default_factory=list)
    ename: str = ""
    evalue: str = ""
    truncated: bool = False
    exit_code: int | None = None  # of the kernel, when status == "died"


def rlimit_values(limits: Limits) -> dict:
    """The rlimits applied to the sandbox, as {resource constant: (soft, hard)}. No
    address-space limit with ``gpu``: CUDA reserves huge virtual ranges it never touches."""
    values = {
        resource.RLIMIT_CPU: (limits.cpu_seconds, limits.cpu_seconds + 5),
        resource.RLIMIT_NPROC: (limits.processes, limits.processes),
        resource.RLIMIT_FSIZE: (limits.file_bytes, limits.file_bytes),
        resource.RLIMIT_NOFILE: (limits.open_files, limits.open_files),
        resource.RLIMIT_CORE: (0, 0),
    }
    if not limits.gpu:
        values[resource.RLIMIT_AS] = (limits.memory_bytes, limits.memory_bytes)
    return values


def apply_rlimits(limits: Limits) -> None:
    """Set the rlimits (never above the hard limits this process already has)."""
    for res, (soft, hard) in rlimit_values(limits).items():
        current = resource.getrlimit(res)[1]
        if current != resource.RLIM_INFINITY:
            soft, hard = min(soft, current), min(hard, current)
        resource.setrlimit(res, (soft, hard))


@lru_cache(maxsize=None)
def bubblewrap() -> str | None:
    """Path of a bubblewrap that can create the namespaces we need here, else None."""
    bwrap = shutil.which("bwrap")
    if not bwrap:
        return None
    probe = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
             "--unshare-net", "--unshare-pid", "--unshare-ipc", "--die-with-parent", "true"]
    try:
        ok = subprocess.run(probe, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    return bwrap if ok else None


def why_no_sandbox() -> str:
    """A sentence saying why sandboxing is unavailable and how to fix it."""
    if not shutil.which("bwrap"):
        return ("bubblewrap (bwrap) is not installed. Install it (Debian/Ubuntu: "
                "`apt-get install bubblewrap`; `make setup` does this when run as root).")
    return ("bubblewrap is installed but cannot create namespaces here (unprivileged user "
            "namespaces may be disabled: sysctl kernel.unprivileged_userns_clone=1).")


@lru_cache(maxsize=None)
def systemd_scope() -> str | None:
    """Path of a systemd-run that can start a transient scope with cgroup limits, else None."""
    tool = shutil.which("systemd-run")
    if not tool:
        return None
    try:
        done = subprocess.run([tool, "--scope", "--quiet", "-p", "MemoryMax=64M", "-p", "TasksMax=8", "true"],
                              capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return tool if done.returncode == 0 else None


def limits_in_force() -> str:
    """One sentence: how memory, processes and the CPUs are bounded per sandbox on this machine."""
    if systemd_scope():
        return ("per sandbox by a systemd scope (cgroups: MemoryMax, TasksMax, an equal CPUWeight) and per "
                "process by rlimits")
    from .cpu_share import describe
    return ("per sandbox by the grader's watchdog (total resident memory, processes, disk; systemd cannot "
            f"start scopes here) and per process by rlimits; CPUs shared {describe()}")


def gpu_devices() -> list[str]:
    """The NVIDIA device files of this machine (bound into a sandbox with ``gpu``)."""
    return sorted(str(p) for p in Path("/dev").glob("nvidia*") if not p.is_dir())


def _read_only_paths(extra=()) -> list[Path]:
    """Folders a sandbox needs read-only: Python, the venv, course code and data."""
    paths = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(),
             LIBRARY, DATA, *(Path(p) for p in extra)}
    exe = Path(sys.executable)
    paths.add(exe.resolve().parent.parent)
    return sorted(p for p in paths if p.exists())


def sandbox_argv(command: list[str], submission: Path | None, tmp: Path, conn_dir: Path | None,
                 uid: int | None, read_only=(), limits: Limits | None = None) -> list[str]:
    """The command line that runs ``command`` as described in this module (in a systemd scope
    where one can be had)."""
    bwrap = bubblewrap()
    if not bwrap:
        raise SandboxUnavailable(why_no_sandbox())
    limits = limits or Limits()
    argv = [bwrap, "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
    for name in ("bin", "lib", "lib32", "lib64", "sbin"):
        target = Path("/") / name
        if target.is_symlink():
            argv += ["--symlink", os.readlink(target), str(target)]
        elif target.is_dir():
            argv += ["--ro-bind", str(target), str(target)]
    # the scratch /tmp first: the read-only folders below may lie under /tmp (a clone there)
    argv += ["--bind", str(tmp), "/tmp"]
    made = {Path("/tmp")}
    for path in _read_only_paths(read_only):
        for parent in reversed(path.parents):
            if str(parent) != "/" and parent not in made and not str(parent).startswith(("/usr", "/etc")):
                argv += ["--perms", "0755", "--dir", str(parent)]
                made.add(parent)
        argv += ["--ro-bind", str(path), str(path)]
    if conn_dir is not None:
        for parent in reversed(conn_dir.parents):
            if str(parent) != "/" and parent not in made:
                argv += ["--perms", "0755", "--dir", str(parent)]
                made.add(parent)
        argv += ["--bind", str(conn_dir), str(conn_dir)]
    if submission is not None:
        argv += ["--bind", str(submission), INSIDE_SUBMISSION, "--chdir", INSIDE_SUBMISSION]
    else:
        argv += ["--chdir", "/tmp"]
    argv += ["--dev", "/dev", "--proc", "/proc"]
    if limits.gpu:
        for dev in gpu_devices():
            argv += ["--dev-bind", dev, dev]
    argv += ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
             "--unshare-cgroup-try", "--die-with-parent", "--new-session", "--hostname", "grading"]
    if uid is not None:  # root: become an unprivileged user inside, then drop every capability
        argv += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--",
                 shutil.which("setpriv") or "/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}",
                 "--clear-groups", "--no-new-privs", "--inh-caps=-all"]
    else:
        argv += ["--"]
    scope = systemd_scope()
    if scope:
        argv = [scope, "--scope", "--quiet", "-p", f"MemoryMax={limits.memory_bytes}",
                "-p", f"TasksMax={limits.processes}", "-p", "CPUWeight=100", "--", *argv]  # equal CPU shares
    return argv + command


def sandbox_env(venv_bin: Path) -> dict:
    """Environment of the kernel: nothing inherited but what it needs."""
    return {
        "PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp", "IPYTHONDIR": "/tmp/.ipython", "MPLCONFIGDIR": "/tmp/.matplotlib",
        "JUPYTER_RUNTIME_DIR": "/tmp/.jupyter", "NUMBA_CACHE_DIR": "/tmp/.numba",
        "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
        "MALLOC_ARENA_MAX": "2", "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1", "TQDM_DISABLE": "1",
    }


def own_process_count() -> int:
    """Processes and threads of this user id now (RLIMIT_NPROC counts them all)."""
    uid = os.getuid()
    count = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    count += len(list((entry / "task").iterdir()))
            except OSError:
                continue
    return count


def clear_user(uid: int, seconds: float = 10.0) -> int:
    """Kill what runs as the sandbox user ``uid`` (the slot's last sandbox's remnants, e.g. a fork bomb's,
    count against the next one's RLIMIT_NPROC) until gone, at most ``seconds``; return how many are left."""
    return kill_until_gone(lambda: [int(n) for n in os.listdir("/proc") if n.isdigit() and _owner(n) == uid], seconds)


def _owner(pid: str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def kill_until_gone(find, seconds: float) -> int:
    """SIGKILL what ``find()`` lists until it lists none, at most ``seconds``; how many it listed last."""
    deadline = time.monotonic() + seconds
    while True:
        left = find()
        if not left or time.monotonic() > deadline:
            return len(left)
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.02)


def _process_table() -> dict[int, tuple[int, int, int]]:
    """{pid: (parent pid, resident bytes, threads)} of every process, from /proc."""
    table = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as fh:
                    fields = fh.read().rsplit(b")", 1)[1].split()
                table[int(entry.name)] = (int(fields[1]), int(fields[21]) * page, int(fields[17]))
            except (OSError, ValueError, IndexError):
                continue
    return table


def descendants(pid: int, table: dict | None = None) -> list[int]:
    """All descendants of ``pid`` (from /proc)."""
    table = _process_table() if table is None else table
    children: dict[int, list[int]] = {}
    for child, (parent, _, _) in table.items():
        children.setdefault(parent, []).append(child)
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _pss(pid: int) -> int:
    """Proportional set size in bytes (shared pages split between their users), 0 if gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as fh:
            for line in fh:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def usage(pid: int, limit: int | None = None) -> tuple[int, int]:
    """(memory bytes, threads) of the process ``pid`` and all its descendants together. Memory
    is the sum of resident sizes, or, when that passes ``limit``, of proportional set sizes
    (forked processes share their parent's pages; resident sizes would count them again)."""
    table = _process_table()
    tree = [p for p in (pid, *descendants(pid, table)) if p in table]
    rss = sum(table[p][1] for p in tree)
    if limit is not None and rss > limit:
        rss = sum(_pss(p) for p in tree)
    return rss, sum(table[p][2] for p in tree)


def folder_bytes(folder: Path, cap: int) -> int:
    """Bytes of the files under ``folder`` (stops counting past ``cap``)."""
    total = 0
    for root, dirs, files in os.walk(folder):
        for name in files + dirs:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                continue
            if total > cap:
                return total
    return total


def is_kernel_python(pid: int) -> bool:
    try:
        return (Path(f"/proc/{pid}/comm").read_text().startswith("python")
                and b"ipykernel" in Path(f"/proc/{pid}/cmdline").read_bytes())
    except OSError:
        return False
