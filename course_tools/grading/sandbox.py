"""Running untrusted notebook code in a sandbox: a Jupyter kernel inside bubblewrap.

The grader (outside) talks to a kernel (inside) over Unix-domain ZeroMQ sockets in a folder
both can see, so the kernel needs no network at all. Inside the sandbox the kernel sees:

* read-only: the system (``/usr``, ``/etc``), the Python installation and virtualenv, and
  the course files it needs (``course_lib/``, ``data/``);
* writable: ``/submission`` (a scratch copy of one student's folder) and ``/tmp`` (a scratch
  folder on disk), both owned by an unprivileged user id;
* nothing else: no other submission, no gradebook, no source notebooks, no hidden tests,
  no network (``--unshare-net``), its own process tree (``--unshare-pid``).

Resource limits (rlimits, per process) cap address space (bytes), CPU time (seconds), the
number of processes and threads of the sandbox's user id, and file size (bytes). Wall-clock
limits per cell and per notebook are enforced by the grader, which interrupts or kills the
kernel. When the grader runs as root, each sandbox runs as its own unprivileged user id, so
the process limit counts only that sandbox's processes.
"""
from __future__ import annotations

import os
import queue
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from ..paths import DATA, LIBRARY

INSIDE_SUBMISSION = "/submission"
SANDBOX_UID_BASE = 61000  # sandbox user ids when the grader runs as root (see sandbox_uid)


def sandbox_uid(slot: int) -> int | None:
    """The unprivileged user a sandbox runs as when the grader is root, else None.

    Distinct per grading process and worker slot: the process limit (RLIMIT_NPROC) counts every
    process of a user on the machine, so two graders running at once must not share users."""
    if os.geteuid() != 0:
        return None
    return SANDBOX_UID_BASE + (os.getpid() % 4096) * 64 + slot % 64


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or cannot create namespaces on this machine."""


@dataclass
class Limits:
    """What one submission may use. Sizes in bytes, times in seconds."""

    memory_bytes: int = 4 * 2**30      # address space per process (RLIMIT_AS)
    cpu_seconds: int = 600             # CPU time per process (RLIMIT_CPU)
    processes: int = 4608              # processes + threads of the sandbox user (RLIMIT_NPROC);
    #                                    the Numba CUDA simulator runs one thread per CUDA thread
    file_bytes: int = 256 * 2**20      # largest file it may write (RLIMIT_FSIZE)
    open_files: int = 1024             # RLIMIT_NOFILE
    cell_seconds: float = 120.0        # wall clock per cell
    notebook_seconds: float = 900.0    # wall clock for the whole notebook
    output_bytes: int = 200_000        # kept outputs per cell; the rest is dropped
    startup_seconds: float = 60.0      # kernel start


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
    """The rlimits applied to the sandbox, as {resource constant: (soft, hard)}."""
    return {
        resource.RLIMIT_AS: (limits.memory_bytes, limits.memory_bytes),
        resource.RLIMIT_CPU: (limits.cpu_seconds, limits.cpu_seconds + 5),
        resource.RLIMIT_NPROC: (limits.processes, limits.processes),
        resource.RLIMIT_FSIZE: (limits.file_bytes, limits.file_bytes),
        resource.RLIMIT_NOFILE: (limits.open_files, limits.open_files),
        resource.RLIMIT_CORE: (0, 0),
    }


def _apply_rlimits(limits: Limits) -> None:
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


def _read_only_paths() -> list[Path]:
    """Folders the kernel needs read-only: Python, the venv, course code and data."""
    paths = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(),
             LIBRARY, DATA}
    exe = Path(sys.executable)
    paths.add(exe.resolve().parent.parent)
    return sorted(p for p in paths if p.exists())


def sandbox_argv(command: list[str], submission: Path, tmp: Path, conn_dir: Path,
                 uid: int | None) -> list[str]:
    """The bubblewrap command line that runs ``command`` as described in this module."""
    bwrap = bubblewrap()
    if not bwrap:
        raise SandboxUnavailable(why_no_sandbox())
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
    for path in _read_only_paths():
        for parent in reversed(path.parents):
            if str(parent) != "/" and parent not in made and not str(parent).startswith(("/usr", "/etc")):
                argv += ["--perms", "0755", "--dir", str(parent)]
                made.add(parent)
        argv += ["--ro-bind", str(path), str(path)]
    for parent in reversed(conn_dir.parents):
        if str(parent) != "/" and parent not in made:
            argv += ["--perms", "0755", "--dir", str(parent)]
            made.add(parent)
    argv += ["--bind", str(conn_dir), str(conn_dir),
             "--bind", str(submission), INSIDE_SUBMISSION,
             "--dev", "/dev", "--proc", "/proc", "--chdir", INSIDE_SUBMISSION,
             "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
             "--unshare-cgroup-try", "--die-with-parent", "--new-session",
             "--hostname", "grading"]
    if uid is not None:  # root: become an unprivileged user inside, then drop every capability
        argv += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--",
                 shutil.which("setpriv") or "/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}",
                 "--clear-groups", "--no-new-privs", "--inh-caps=-all"]
    else:
        argv += ["--"]
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


class SandboxKernel:
    """An IPython kernel for one submission, in bubblewrap (or, if ``sandbox`` is False,
    in a plain subprocess with the same rlimits: only for code the grader trusts)."""

    def __init__(self, submission: Path, limits: Limits, slot: int = 0, sandbox: bool = True):
        self.submission = Path(submission)
        self.limits = limits
        self.sandbox = sandbox
        self.uid = sandbox_uid(slot) if sandbox else None
        self.work = Path(tempfile.mkdtemp(prefix="course-kernel-"))
        self.proc: subprocess.Popen | None = None
        self.client = None

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        from jupyter_client import BlockingKernelClient
        from jupyter_client.connect import write_connection_file

        conn_dir = self.work / f"conn{int(time.time() * 1000) % 10**8}"
        tmp = self.work / "tmp"
        conn_dir.mkdir()
        tmp.mkdir(exist_ok=True)
        for folder in (conn_dir, tmp):
            os.chmod(folder, 0o700)
            if self.uid is not None:
                os.chown(folder, self.uid, self.uid)
        conn_file, _ = write_connection_file(str(conn_dir / "kernel.json"), ip=str(conn_dir / "k"),
                                             transport="ipc")
        if self.uid is not None:
            os.chown(conn_file, self.uid, self.uid)
        venv_bin = Path(sys.executable).parent
        kernel = [str(venv_bin / "python"), "-m", "ipykernel_launcher", "-f", conn_file,
                  "--HistoryManager.enabled=False", "--IPKernelApp.matplotlib=inline"]
        limits = self.limits
        if self.sandbox:
            argv = sandbox_argv(kernel, self.submission, tmp, conn_dir, self.uid)
            limits_for_fork = limits
            if self.uid is None:  # not root: the process limit counts all our processes
                limits_for_fork = Limits(**{**limits.__dict__, "processes": limits.processes + _own_process_count()})
            pre = lambda: (os.setsid(), _apply_rlimits(limits_for_fork))  # noqa: E731
            env = sandbox_env(venv_bin)
            cwd = None
        else:
            argv = kernel
            limits_for_fork = Limits(**{**limits.__dict__, "processes": limits.processes + _own_process_count()})
            pre = lambda: (os.setsid(), _apply_rlimits(limits_for_fork))  # noqa: E731
            env = {**os.environ, **{k: v for k, v in sandbox_env(venv_bin).items() if k not in ("HOME", "PATH")}}
            cwd = self.submission
        self.proc = subprocess.Popen(argv, preexec_fn=pre, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.client = BlockingKernelClient()
        self.client.load_connection_file(conn_file)
        self.client.start_channels()
        deadline = time.monotonic() + limits.startup_seconds
        while True:  # wait for the kernel to answer kernel_info
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode(errors="replace")[-1500:]
                raise RuntimeError(f"the kernel did not start (exit code {self.proc.returncode}): {err}")
            try:
                self.client.wait_for_ready(timeout=2)
                break
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the kernel did not start in time") from None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        """Kill the kernel and everything it started; remove its scratch folders."""
        if self.client is not None:
            try:
                self.client.stop_channels()
            except Exception:  # noqa: BLE001 - already gone
                pass
            self.client = None
        if self.proc is not None:
            if self.proc.poll() is None:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)  # --new-session / setsid: own group
                except (ProcessLookupError, PermissionError):
                    pass
                self.proc.kill()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            if self.proc.stderr:
                self.proc.stderr.close()
            self.proc = None
        shutil.rmtree(self.work, ignore_errors=True)
        self.work = Path(tempfile.mkdtemp(prefix="course-kernel-"))

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.work, ignore_errors=True)

    def interrupt(self) -> None:
        """SIGINT to the kernel (a KeyboardInterrupt in the running cell)."""
        if not self.alive():
            return
        if self.sandbox:  # the kernel is the only python in its pid namespace's session
            for pid in _children(self.proc.pid):
                try:
                    os.kill(pid, signal.SIGINT)
                except (ProcessLookupError, PermissionError):
                    pass
        else:
            self.proc.send_signal(signal.SIGINT)

    # -- execution ---------------------------------------------------------------------
    def execute(self, code: str, timeout: float) -> CellRun:
        """Run ``code``; collect outputs (capped) and the execute_reply's status.

        The status comes from the kernel's reply on the shell channel, not from what the
        cell displayed, so hiding tracebacks does not hide a failure."""
        kc = self.client
        msg_id = kc.execute(code, store_history=False, allow_stdin=False, stop_on_error=False)
        run = CellRun(status="pending")
        kept = 0
        reply = None
        idle = False
        deadline = time.monotonic() + timeout
        while reply is None or not idle:
            if time.monotonic() > deadline:
                run.status = "timeout"
                return run
            if not self.alive():
                run.status, run.exit_code = "died", self.proc.returncode
                return run
            try:
                msg = kc.get_iopub_msg(timeout=0.05)
            except queue.Empty:
                msg = None
            if msg is not None and msg.get("parent_header", {}).get("msg_id") == msg_id:
                kept = self._collect(run, msg, kept)
                if msg["msg_type"] == "status" and msg["content"].get("execution_state") == "idle":
                    idle = True
            if reply is None:
                try:
                    shell = kc.get_shell_msg(timeout=0 if msg is not None else 0.02)
                except queue.Empty:
                    shell = None
                if shell is not None and shell.get("parent_header", {}).get("msg_id") == msg_id:
                    reply = shell["content"]
        run.status = "ok" if reply.get("status") == "ok" else "error"
        if run.status == "error":
            run.ename = run.ename or str(reply.get("ename", ""))
            run.evalue = run.evalue or str(reply.get("evalue", ""))
        return run

    def _collect(self, run: CellRun, msg: dict, kept: int) -> int:
        kind, content = msg["msg_type"], msg["content"]
        if kind == "error":
            run.ename, run.evalue = str(content.get("ename", "")), str(content.get("evalue", ""))
        if kind not in ("stream", "display_data", "execute_result", "error"):
            return kept
        size = len(repr(content))
        if kept + size > self.limits.output_bytes:
            run.truncated = True
            return kept
        if kind == "stream":
            if run.outputs and run.outputs[-1].get("output_type") == "stream" and run.outputs[-1]["name"] == content["name"]:
                run.outputs[-1]["text"] += content["text"]
            else:
                run.outputs.append({"output_type": "stream", "name": content["name"], "text": content["text"]})
        elif kind == "error":
            run.outputs.append({"output_type": "error", "ename": content.get("ename", ""),
                                "evalue": content.get("evalue", ""),
                                "traceback": list(content.get("traceback", []))[:50]})
        else:
            out = {"output_type": kind, "data": content.get("data", {}), "metadata": content.get("metadata", {})}
            if kind == "execute_result":
                out["execution_count"] = content.get("execution_count")
            run.outputs.append(out)
        return kept + size


def _own_process_count() -> int:
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


def _children(pid: int) -> list[int]:
    """All descendants of ``pid`` (from /proc), deepest last."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return [p for p in found if _is_python(p)]


def _is_python(pid: int) -> bool:
    try:
        return (Path(f"/proc/{pid}/comm").read_text().startswith("python")
                and b"ipykernel" in Path(f"/proc/{pid}/cmdline").read_bytes())
    except OSError:
        return False
