"""Warm kernels: Jupyter kernels for notebook runs outside the grader (``course build``'s lectures,
the lecture tests, nbval's exercises, tests/notebooks/test_exercise_failures.py), each forked from
a template process that has already imported ipykernel, torch, NumPy and pyplot.

A kernel started the ordinary way (``python -m ipykernel_launcher -f conn.json``) spends about
3.3 s of CPU on those imports on the course's 2-core machine (torch 2.0, NumPy with pyplot 0.8,
ipykernel 0.5). Measured on a loaded machine, a notebook that imports the three cost 5.4 CPU-s
in a kernel started the ordinary way and 0.7 CPU-s in a forked one (ipykernel's own start: its
shell and channels), after the template's one start (about the cost of one ordinary kernel).
The template runs no notebook code and no torch operation (so no thread pool exists when it
forks: it has one thread); each kernel is a fresh process that starts from the state the
template reached after its imports, and never sees anything of another notebook's kernel.

Use ``WarmKernelManager`` (or ``AsyncWarmKernelManager``) wherever a ``jupyter_client`` kernel
manager is made; its provisioner forks a kernel when the launch is the ordinary one
(``<this python> -m ipykernel_launcher ...``) and launches it the ordinary way otherwise, or when
``COURSE_WARM_KERNELS=0`` is set. What a forked kernel gets, as the ordinary launch gives it:

* its own session and process group (interrupts and kills reach the kernel's children), its
  working folder, stdin/stdout/stderr (passed over the control socket), ``sys.argv`` and
  ``sys.path`` (the launcher's, with the template's own folder removed), and exactly the
  environment the launch asked for (``JPY_PARENT_PID`` names the template: ipykernel's parent
  poller then ends the kernel when the template goes);
* ipykernel's inline matplotlib backend: the template imports pyplot with ``MPLBACKEND`` set as
  ipykernel sets it, and never imports the backend itself (it hooks into the kernel's shell when
  the first figure is drawn);
* NumPy's global random state and torch's CPU generator reseeded from the OS (each import seeds
  them so: a fork would repeat the template's); Python's ``random`` reseeds itself at a fork. (The
  one thing shared is the interpreter's hash seed.)

Templates are keyed by the interpreter and the launch's environment (the variables the preloaded
modules read at import, e.g. ``OMP_NUM_THREADS`` or ``MPLBACKEND``, are then the same as in an
ordinary launch); one process keeps at most ``MAX_TEMPLATES``. A template exits, killing its
kernels, when its owner's end of the control socket closes (the owner exited or died); each
kernel gets SIGKILL when its template dies (``PR_SET_PDEATHSIG``). The owner polls, signals and
kills a kernel through a pidfd and the process group; the template reaps it and reports its exit
code. A child forked from the owner (``multiprocessing`` with fork) drops the owner's templates.

The template is ``warm_template.py``, run by path.
"""
from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from typing import Any

from jupyter_client.manager import AsyncKernelManager, KernelManager
from jupyter_client.provisioning import LocalProvisioner
from traitlets import DottedObjectName, Type

from . import warm_template
from .warm_template import MAX_MESSAGE

# environment that differs between launches (pytest's names the test that runs) and that no
# preloaded module reads at import: not part of a template's key (the kernel still gets it)
PER_LAUNCH = ("JPY_PARENT_PID", "JPY_SESSION_NAME", "PYTEST_CURRENT_TEST")
MAX_TEMPLATES = 2          # templates (distinct environments) one process keeps
START_SECONDS = 120.0      # for a template's imports, on a loaded 2-core machine
REPLY_SECONDS = 30.0       # for a fork's answer and for an ended kernel's exit code


class TemplateError(RuntimeError):
    """A template did not start or stopped answering."""


class Template:
    """One template process, for launches with one interpreter and one environment."""

    def __init__(self, python: str, env: dict):
        self.python, self.env = python, env
        self.lock = threading.RLock()
        self.ended: dict = {}   # pid -> exit code, for kernels the template reaped
        self.next_id = 0
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen([python, os.path.abspath(warm_template.__file__)], stdin=theirs, env=env,
                                         stdout=subprocess.DEVNULL, start_new_session=True)
        finally:
            theirs.close()
        ready = self._until(lambda m: m.get("op") == "ready", START_SECONDS)
        if ready is None:
            self.close()
            raise TemplateError("the kernel template did not start")
        self.pid = ready["pid"]

    def _receive(self, timeout: float) -> dict | None:
        """The next message (``ended`` ones are recorded), or None: none in time, or the template is gone."""
        if self.sock.fileno() < 0:
            raise TemplateError("the kernel template was closed")
        if not select.select([self.sock], [], [], max(timeout, 0))[0]:
            return None
        try:
            data = self.sock.recv(MAX_MESSAGE)
        except OSError:
            data = b""
        if not data:
            raise TemplateError("the kernel template ended")
        msg = json.loads(data)
        if msg.get("op") == "ended":
            self.ended[msg["pid"]] = msg["code"]
        return msg

    def _until(self, wanted, timeout: float) -> dict | None:
        deadline = time.monotonic() + timeout
        with self.lock:
            while (left := deadline - time.monotonic()) > 0:
                try:
                    msg = self._receive(left)
                except TemplateError:
                    return None
                if msg is not None and wanted(msg):
                    return msg
        return None

    def alive(self) -> bool:
        return self.proc.poll() is None

    def fork(self, argv: list, orig_argv: list, cwd: str, env: dict, fds: list) -> ForkedKernel:
        """A kernel forked from this template; ``fds``: its stdin, stdout and stderr."""
        with self.lock:
            self.next_id += 1
            ident = self.next_id
            req = {"op": "fork", "id": ident, "template": self.pid, "argv": argv, "orig_argv": orig_argv,
                   "cwd": cwd, "env": env}
            try:
                socket.send_fds(self.sock, [json.dumps(req).encode()], fds)
            except OSError as exc:
                raise TemplateError(f"the kernel template is gone: {exc}") from exc
            answer = self._until(lambda m: m.get("id") == ident, REPLY_SECONDS)
        if answer is None or answer.get("op") != "forked":
            raise TemplateError((answer or {}).get("error", "the kernel template did not answer"))
        return ForkedKernel(self, answer["pid"])

    def exit_code(self, pid: int, timeout: float) -> int | None:
        """The ended kernel ``pid``'s exit code, once the template reaped it (None: not in time)."""
        if pid not in self.ended:
            self._until(lambda m: m.get("op") == "ended" and m.get("pid") == pid, timeout)
        return self.ended.pop(pid, None)

    def close(self) -> None:
        """Close the control socket: the template kills its kernels and exits."""
        self.sock.close()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class ForkedKernel:
    """What ``LocalProvisioner`` keeps of a ``subprocess.Popen``, for a kernel forked from a
    template: ``pid``, ``poll``, ``wait``, ``send_signal``, ``kill``, ``terminate``."""

    stdin = stdout = stderr = None

    def __init__(self, template: Template, pid: int):
        self.template, self.pid, self.returncode = template, pid, None
        try:
            self.pidfd = os.pidfd_open(pid)
        except OSError:   # gone already (it is not reaped before the template reads the socket)
            self.pidfd = None

    def poll(self) -> int | None:
        if self.returncode is None and (self.pidfd is None or select.select([self.pidfd], [], [], 0)[0]):
            code = self.template.exit_code(self.pid, REPLY_SECONDS)
            # no answer: the template is gone, and its kernel was killed with it (PR_SET_PDEATHSIG)
            self.returncode = -signal.SIGKILL if code is None else code
            if self.pidfd is not None:
                os.close(self.pidfd)
                self.pidfd = None
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None and self.pidfd is not None:
            if not select.select([self.pidfd], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(f"kernel {self.pid}", timeout)
        return self.poll()

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            signal.pidfd_send_signal(self.pidfd, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


_TEMPLATES: list = []   # this process's templates, the most recently used last
_LOCK = threading.Lock()


def _forget_after_fork() -> None:
    """In a child forked from the owner: the templates are the parent's."""
    for template in _TEMPLATES:
        try:
            os.close(template.sock.detach())
        except OSError:
            pass
    _TEMPLATES.clear()


def close_templates() -> None:
    """End this process's templates (and any kernel they still run)."""
    with _LOCK:
        while _TEMPLATES:
            _TEMPLATES.pop().close()


os.register_at_fork(after_in_child=_forget_after_fork)


def template_for(python: str, env: dict) -> Template:
    """This process's template for ``python`` and ``env`` (started now if there is none)."""
    key = {k: v for k, v in env.items() if k not in PER_LAUNCH}
    with _LOCK:
        for template in _TEMPLATES:
            if template.python == python and template.env == key and template.alive():
                _TEMPLATES.remove(template)
                _TEMPLATES.append(template)
                return template
        for template in [t for t in _TEMPLATES if not t.alive()]:
            _TEMPLATES.remove(template)
            template.close()
        while len(_TEMPLATES) >= MAX_TEMPLATES:
            _TEMPLATES.pop(0).close()
        template = Template(python, key)
        _TEMPLATES.append(template)
        return template


def _fd(stream: Any, default: int) -> int | None:
    """A launch's stdout or stderr as a file descriptor (None: a pipe or something else to leave
    to an ordinary launch)."""
    if stream is None:
        return default
    if stream == subprocess.DEVNULL:
        return os.open(os.devnull, os.O_WRONLY)
    if isinstance(stream, int) and stream >= 0:
        return stream
    if hasattr(stream, "fileno"):
        try:
            return stream.fileno()
        except (OSError, ValueError):
            return None
    return None


def warm_enabled() -> bool:
    return os.environ.get("COURSE_WARM_KERNELS", "1") != "0"


class WarmProvisioner(LocalProvisioner):
    """``LocalProvisioner`` whose ordinary ipykernel launches are forks of a template."""

    async def launch_kernel(self, cmd: list, **kwargs: Any):
        forked = self._fork(cmd, kwargs) if warm_enabled() else None
        if forked is None:
            return await super().launch_kernel(cmd, **kwargs)
        self.process, self.pid, self.pgid = forked, forked.pid, forked.pid   # the kernel leads its group
        self.cwd = kwargs.get("cwd") or os.getcwd()
        return self.connection_info

    def _fork(self, cmd: list, kwargs: dict) -> ForkedKernel | None:
        """The kernel forked from a template, or None where the launch is not an ordinary one."""
        import importlib.util

        extra = set(kwargs) - {"env", "cwd", "stdin", "stdout", "stderr", "kernel_id", "extra_arguments",
                               "independent"}
        if (extra or kwargs.get("independent") or kwargs.get("stdin") is not None or len(cmd) < 3
                or cmd[0] != sys.executable or cmd[1:3] != ["-m", "ipykernel_launcher"]):
            return None
        out, err = _fd(kwargs.get("stdout"), 1), _fd(kwargs.get("stderr"), 2)
        if out is None or err is None:
            return None
        env = dict(kwargs.get("env") or os.environ)
        spec = importlib.util.find_spec("ipykernel_launcher")
        stdin_r, stdin_w = os.pipe()   # as the launcher gives it: a pipe whose other end is closed
        os.close(stdin_w)
        try:
            template = template_for(sys.executable, env)
            return template.fork([spec.origin, *cmd[3:]], list(cmd),
                                 os.path.abspath(kwargs.get("cwd") or os.getcwd()), env, [stdin_r, out, err])
        except TemplateError as exc:
            self.log.warning("kernel launched the ordinary way: %s", exc)
            return None
        finally:
            os.close(stdin_r)
            for fd, given in ((out, kwargs.get("stdout")), (err, kwargs.get("stderr"))):
                if given == subprocess.DEVNULL:
                    os.close(fd)


class _Warm:
    async def _async_pre_start_kernel(self, **kw: Any):
        if self.provisioner is None:
            self.kernel_id = self.kernel_id or kw.pop("kernel_id", str(uuid.uuid4()))
            self.provisioner = WarmProvisioner(kernel_id=self.kernel_id, kernel_spec=self.kernel_spec, parent=self)
        return await super()._async_pre_start_kernel(**kw)


class WarmKernelManager(_Warm, KernelManager):
    """``jupyter_client.KernelManager`` whose kernels are forked from a template (module docstring)."""


class AsyncWarmKernelManager(_Warm, AsyncKernelManager):
    """``jupyter_client.AsyncKernelManager`` whose kernels are forked from a template; its clients
    poll their channels in slices (``kernel_client.SlicedPollKernelClient``)."""

    client_class = DottedObjectName("course_tools.kernel_client.SlicedPollKernelClient")
    client_factory = Type(klass="course_tools.kernel_client.SlicedPollKernelClient", config=True)
