"""The hub's try-out on one account (`make hub` where other accounts cannot run the course's
Python, or `run_hub.py --tryout --one-account`): it starts on loopback, a user logs in with
the shared password over HTTP, their JupyterLab starts and answers, and stopping the hub
leaves no process, no account and no home folder behind. Fast (about ten seconds here), needs
no root and creates no accounts; tests/browser/test_hub.py tests the class on real accounts.
Skipped, saying which, when JupyterHub or configurable-http-proxy is not installed.
"""
from __future__ import annotations

import importlib.util
import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from free_ports import free_port_range

REPO = Path(__file__).resolve().parents[2]
PYTHON = REPO / ".venv" / "bin" / "python"
RUN_HUB = REPO / "hub" / "run_hub.py"
USER = "course-student1"  # a try-out student; on one account it is only a name
START_S = 120  # the longest wait for the hub, then for the user's JupyterLab


def _skip_reason() -> str | None:
    if not (REPO / ".venv" / "bin" / "jupyterhub-singleuser").exists():
        return "JupyterHub is not installed in .venv (make setup)"
    if not (REPO / "hub" / "node_modules" / ".bin" / "configurable-http-proxy").exists() and not shutil.which(
            "configurable-http-proxy"):
        return "configurable-http-proxy is not installed (make setup runs npm ci in hub/)"
    if importlib.util.find_spec("requests") is None:
        return "the requests package is missing (pip install -e '.[dev]')"
    return None


pytestmark = [pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or ""),
              pytest.mark.timeout(300)]


def _run_hub_module():
    spec = importlib.util.spec_from_file_location("run_hub", RUN_HUB)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module




def _listening(ports: range) -> list[str]:
    """Local addresses (hex, as /proc/net/tcp* writes them) listening on ``ports``."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, port = local.rsplit(":", 1)
            if state == "0A" and int(port, 16) in ports:  # 0A: LISTEN
                found.append(address)
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def _pids_under(folder: Path) -> list[int]:
    """Processes whose working directory lies in ``folder`` (the users' servers)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if Path(os.readlink(entry / "cwd")).is_relative_to(folder):
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def test_python_closed_to_others_chooses_one_account():
    """The fallback's trigger: a venv whose interpreter lies behind a folder others cannot
    enter (a pyenv Python under /root) is reported; the same interpreter behind open folders
    is not; --one-account without --tryout is refused."""
    run_hub = _run_hub_module()
    top = Path(tempfile.mkdtemp(prefix="course-hub-python-"))
    try:
        os.chmod(top, 0o755)
        for mode, closed in ((0o700, True), (0o755, False)):
            base = top / f"python-{mode:o}"
            (base / "bin").mkdir(parents=True)
            (base / "bin" / "python3").write_text("")
            (base / "bin" / "python3").chmod(0o755)
            os.chmod(base, mode)
            venv = top / f"venv-{mode:o}"
            (venv / "bin").mkdir(parents=True)
            (venv / "bin" / "python").symlink_to(base / "bin" / "python3")
            reason = run_hub.python_closed(venv)
            if closed:
                assert reason is not None and str(base) in reason, reason
            else:
                assert reason is None, reason
        with pytest.raises(SystemExit):
            run_hub.parse(["--one-account"])
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_tryout_on_one_account_logs_in_and_cleans_up():
    import requests

    top = Path(tempfile.mkdtemp(prefix="course-hub-tryout-test-"))
    port, password = free_port_range(3), "tryout-" + os.urandom(6).hex()
    accounts_before = {entry.pw_name for entry in pwd.getpwall()}
    log_path = top / "hub.log"
    cmd = [str(PYTHON), str(RUN_HUB), "--tryout", "--one-account", "--port", str(port),
           f"--password={password}", "--state", str(top / "state"), "--exchange", str(top / "exchange")]
    proc = None
    try:
        with open(log_path, "w") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + START_S
        while True:
            try:  # the proxy answers first, 503 until the hub has added its route
                if requests.get(f"{base}/hub/api", timeout=2).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, \
                f"the hub did not start: {log_path.read_text()[-3000:]}"
            time.sleep(0.5)
        console = log_path.read_text()
        notice = re.search(r"^run_hub: TRY-OUT ON ONE ACCOUNT .* under (\S+) .*NO isolation", console, re.MULTILINE)
        assert notice, f"no one-account notice on the console:\n{console[:2000]}"
        homes = Path(notice.group(1))
        listening = _listening(range(port, port + 3))
        assert len(listening) == 3 and set(listening) == {"0100007F"}, \
            f"the hub, its API and the proxy's API should listen on 127.0.0.1 only, found {listening}"

        session = requests.Session()
        form = session.get(f"{base}/hub/login", timeout=30)
        xsrf = re.search(r'name="_xsrf" value="([^"]+)"', form.text).group(1)
        wrong = session.post(f"{base}/hub/login?next=", timeout=30,
                             data={"username": USER, "password": password + "x", "_xsrf": xsrf})
        assert "/hub/login" in wrong.url, f"a wrong password got in: {wrong.url}"
        session.post(f"{base}/hub/login?next=", data={"username": USER, "password": password, "_xsrf": xsrf},
                     timeout=30)
        deadline = time.monotonic() + START_S
        while True:  # through the hub's OAuth to the user's JupyterLab, as a browser goes
            lab = session.get(f"{base}/user/{USER}/lab", timeout=30)
            if lab.status_code == 200 and lab.url == f"{base}/user/{USER}/lab":
                break
            assert time.monotonic() < deadline, \
                f"{USER}'s JupyterLab did not start: {lab.status_code} {lab.url}\n{log_path.read_text()[-3000:]}"
            time.sleep(1)
        assert "JupyterLab" in lab.text
        status = session.get(f"{base}/user/{USER}/api/status", timeout=30)
        assert status.status_code == 200 and "started" in status.json(), status.text
        assert (homes / USER).is_dir(), f"{USER}'s home {homes / USER} is missing"
        servers = _pids_under(homes)
        assert servers, f"no process works in {homes}"
        proxy = int((top / "state" / "jupyterhub-proxy.pid").read_text())
    finally:
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # run_hub passes it on; the hub stops servers and proxy
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        console = log_path.read_text()
        shutil.rmtree(top, ignore_errors=True)
    assert proc.returncode == 0, f"run_hub exited with {proc.returncode}:\n{console[-3000:]}"
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in [*servers, proxy]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(pid) for pid in [*servers, proxy]), "a server or the proxy outlived the hub"
    assert not homes.exists(), f"the try-out's homes {homes} were left behind"
    assert {entry.pw_name for entry in pwd.getpwall()} == accounts_before, "the try-out changed the accounts"
    assert not _listening(range(port, port + 3)), "something still listens on the hub's ports"


def _student_environment(name: str) -> dict:
    """The environment the hub's configuration gives a student's server (hub/jupyterhub_config.py
    run as JupyterHub runs it, its pre-spawn hook called on a student)."""
    from types import SimpleNamespace

    from traitlets.config import Config

    path = REPO / "hub" / "jupyterhub_config.py"
    namespace = {"get_config": Config, "__file__": str(path), "__name__": "jupyterhub_config"}
    exec(compile(path.read_text(), str(path), "exec"), namespace)  # noqa: S102 - the course's own config
    spawner = SimpleNamespace(user=SimpleNamespace(name=name, groups=[SimpleNamespace(name="students")]),
                              environment=dict(namespace["c"].Spawner.environment), notebook_dir="")
    namespace["c"].Spawner.pre_spawn_hook(spawner)
    return spawner.environment


def test_two_students_on_one_account_submit_as_themselves(tmp_path, monkeypatch):
    """On a one-account try-out every server runs as the same account: two students who fetch
    and submit an assignment through nbgrader's exchange are still recorded under their own
    hub names (they collided as the account's name before), and each lists only their own."""
    exchange, course = tmp_path / "exchange", tmp_path / "course"
    exchange.mkdir(mode=0o1777)
    monkeypatch.setenv("COURSE_EXCHANGE_ROOT", str(exchange))
    (course / "release" / "a1").mkdir(parents=True)
    (course / "release" / "a1" / "exercises.ipynb").write_text(
        '{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')

    def nbgrader(*args, cwd, env):
        done = subprocess.run([str(PYTHON), "-m", "nbgrader", *args], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stdout[-1500:] + done.stderr[-1500:]
        return done.stdout + done.stderr

    base = {**os.environ, "JUPYTER_CONFIG_PATH": str(REPO / "hub" / "jupyter"), "HOME": str(tmp_path)}
    nbgrader("release_assignment", "a1", f"--CourseDirectory.root={course}", cwd=course, env=base)
    students = ["course-student1", "course-student2"]
    for name in students:
        home = tmp_path / "homes" / name
        home.mkdir(parents=True)
        env = {**os.environ, **_student_environment(name), "HOME": str(home)}
        assert env["COURSE_STUDENT_ID"] == name
        nbgrader("fetch_assignment", "a1", cwd=home, env=env)
        nbgrader("submit", "a1", cwd=home, env=env)
    inbound = sorted(p.name.split("+")[0] for p in (exchange / "gpu-course" / "inbound").iterdir())
    assert inbound == students, inbound
    home = tmp_path / "homes" / students[0]
    listed = nbgrader("list", "--inbound", cwd=home,
                      env={**os.environ, **_student_environment(students[0]), "HOME": str(home)})
    assert students[0] in listed and students[1] not in listed, listed
