"""Start the course's JupyterHub on this machine (`sudo make hub`): check what it needs, create
the nbgrader exchange, then run JupyterHub with hub/jupyterhub_config.py.

    sudo .venv/bin/python hub/run_hub.py --tryout
        try-out on http://127.0.0.1:8000: one shared password (printed), the repository's
        owner as instructor, two student accounts course-student1 and course-student2
        (created when missing). When the course's Python cannot be run by other accounts (a
        pyenv Python under /root), it falls back to a try-out on ONE account (--one-account).
    .venv/bin/python hub/run_hub.py --tryout --one-account
        try-out without root and without accounts: every user's server runs as you, each
        with its own home in a temporary folder (removed when the hub stops). No isolation
        between users: for trying the course out only.
    sudo .venv/bin/python hub/run_hub.py --instructors alice --students bob,carol
        a class: the machine's accounts, passwords checked by PAM.

Run it as root (the hub starts every user's server as that user) from a clone of the course
that the instructor owns: the instructor's server works in it (release/, submitted/,
gradebook.db). Everything else only needs to be readable by the students. A one-account
try-out runs as the clone's owner instead, root or not.
"""
from __future__ import annotations

import argparse
import ipaddress
import os
import pwd
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

HUB = Path(__file__).resolve().parent
REPO = HUB.parent
TRYOUT_STUDENTS = "course-student1,course-student2"
ONE_ACCOUNT_INSTRUCTOR = "course-instructor"  # the try-out instructor's name when run as root


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="run_hub.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--tryout", action="store_true",
                   help="shared password, loopback only, student accounts created when missing")
    p.add_argument("--instructors", help="comma-separated accounts (default: the repository's owner)")
    p.add_argument("--students", help=f"comma-separated accounts (try-out default: {TRYOUT_STUDENTS})")
    p.add_argument("--create-users", action="store_true", help="create listed accounts that do not exist")
    p.add_argument("--one-account", action="store_true",
                   help="with --tryout: run every user's server as you, each with a home in a temporary "
                        "folder, and create no accounts (no isolation between users). Chosen by itself when "
                        "other accounts cannot run the course's Python")
    p.add_argument("--auth", choices=["pam", "shared-password"], help="default: pam; shared-password with --tryout")
    p.add_argument("--password", help="the shared password (default: COURSE_HUB_PASSWORD, else a random one)")
    p.add_argument("--ip", default="127.0.0.1", help="address the hub listens on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="its port; the next two are used internally")
    p.add_argument("--exchange", default="/srv/nbgrader/exchange", help="nbgrader exchange root")
    p.add_argument("--course-id", default="gpu-course", help="nbgrader course id")
    p.add_argument("--state", default=str(REPO / "build" / "hub"), help="hub database, cookie secret, proxy pid")
    p.add_argument("--venv", default=str(REPO / ".venv"), help="the course's environment for every server")
    args = p.parse_args(argv)
    if args.one_account and not args.tryout:
        p.error("--one-account is for try-outs only: add --tryout")
    if args.tryout:
        args.auth = args.auth or "shared-password"
        args.students = args.students or TRYOUT_STUDENTS
        args.create_users = True
    args.auth = args.auth or "pam"
    return args


def _names(text: str | None) -> list[str]:
    return [n.strip() for n in (text or "").split(",") if n.strip()]


def _exists(user: str) -> bool:
    try:
        pwd.getpwnam(user)
        return True
    except KeyError:
        return False


def create_user(user: str) -> None:
    """A local account with a private home folder (mode 0700) and no password."""
    subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", user], check=True)
    os.chmod(pwd.getpwnam(user).pw_dir, 0o700)
    print(f"run_hub: created the account {user} (remove it with: userdel -r {user})")


def _closed_folder(path: Path) -> str | None:
    """The first folder on the way to ``path`` that other users cannot enter, if any."""
    for folder in [*reversed(path.parents), path]:
        if not folder.stat().st_mode & stat.S_IXOTH:
            return str(folder)
    return None


def python_closed(venv: Path) -> str | None:
    """Why other accounts cannot run the interpreter ``venv`` was built on (None when they can,
    or when ``venv`` has no Python at all, which problems() reports)."""
    python = (venv / "bin" / "python").resolve()
    if not python.exists():
        return None
    blocked = _closed_folder(python.parent)
    return f"other accounts cannot run {python} ({blocked} is closed to them)" if blocked else None


def problems(args, instructors: list[str], students: list[str]) -> list[str]:
    """What stops the hub from working here, in plain words (empty when nothing does)."""
    found = []
    venv = Path(args.venv)
    if args.one_account:
        if os.geteuid() != REPO.stat().st_uid:
            owner = pwd.getpwuid(REPO.stat().st_uid).pw_name
            found.append(f"a one-account try-out runs every server as you, in {REPO}: start it as the "
                         f"owner of that clone, {owner}")
    elif os.geteuid() != 0:
        found.append("JupyterHub must run as root to start servers as other users: sudo make hub")
    for tool in ("jupyterhub", "jupyterhub-singleuser"):
        if not (venv / "bin" / tool).exists():
            found.append(f"{venv}/bin/{tool} is missing: run `make setup` (jupyterhub is a course dependency)")
    if not (HUB / "node_modules" / ".bin" / "configurable-http-proxy").exists() and not shutil.which(
            "configurable-http-proxy"):
        found.append("configurable-http-proxy is missing: run `make setup` (npm ci in hub/)")
    if args.auth == "shared-password" and not ipaddress.ip_address(args.ip).is_loopback:
        found.append("the shared password is for try-outs on 127.0.0.1 only; use --auth pam for a class")
    if args.one_account and not ipaddress.ip_address(args.ip).is_loopback:
        found.append("a one-account try-out keeps no user apart from another: 127.0.0.1 only")
    if not instructors:
        found.append("no instructor: pass --instructors NAME (the owner of this clone of the course)")
    if not students:
        found.append("no students: pass --students NAMES (or --tryout)")
    if args.one_account:  # the names are only names: every server runs as the one account
        return found
    for user in instructors + students:
        if not _exists(user) and not args.create_users:
            found.append(f"no account {user} on this machine (create it, or pass --create-users)")
    owner = REPO.stat().st_uid
    for user in instructors:
        if _exists(user) and pwd.getpwnam(user).pw_uid != owner:
            found.append(f"instructor {user} does not own {REPO}: the instructor's server releases, collects "
                         f"and grades in it. Clone the course as {user} (or chown -R {user} {REPO}).")
    for needed in (venv, REPO / "course_lib", REPO / "data"):
        blocked = _closed_folder(needed)
        if blocked:
            found.append(f"students cannot enter {blocked}, on the way to {needed} (chmod o+rx)")
    closed = python_closed(venv)
    if closed:
        found.append(f"{closed}: build .venv on a Python every account can run (installed outside /root, "
                     "e.g. under /opt or /usr/local)")
    return found


def make_exchange(root: Path, one_account: bool = False) -> None:
    """nbgrader's exchange: readable parents, the root itself world-writable and sticky (on one
    account, where every server is the same user, the parents need not be open)."""
    root.mkdir(parents=True, exist_ok=True)
    for folder in [*reversed(root.parents)][1:]:
        if not one_account and not folder.stat().st_mode & stat.S_IXOTH:
            raise SystemExit(f"run_hub: students cannot enter {folder}, on the way to the exchange {root}")
    os.chmod(root, 0o1777)


def _stop_leftovers(homes: Path, proxy_pid_file: Path) -> list[int]:
    """Stop what a hub stopped half-way through starting can leave running: its proxy (the pid
    JupyterHub wrote and removes on a clean stop) and servers working in the try-out's homes.
    Returns their pids (empty after a clean stop)."""
    pids = []
    try:
        pid = int(proxy_pid_file.read_text())
        if "configurable-http-proxy" in Path(f"/proc/{pid}/cmdline").read_text():
            pids.append(pid)
    except (OSError, ValueError):
        pass
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        try:
            if entry.name.isdigit() and Path(os.readlink(entry / "cwd")).is_relative_to(homes):
                pids.append(int(entry.name))
        except OSError:
            continue
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    return pids


def run_until_stopped(argv: list[str], env: dict[str, str], homes: Path, state: Path) -> int:
    """Run JupyterHub as a child (not exec: its users' homes are removed when it stops),
    passing on the signals that stop it; JupyterHub then stops the servers and its proxy."""
    hub = subprocess.Popen(argv, env=env, start_new_session=True)  # Ctrl-C reaches it once, from here

    def forward(signum, _frame):
        hub.send_signal(signum)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, forward)
    try:
        return hub.wait()
    finally:
        stopped = _stop_leftovers(homes, state / "jupyterhub-proxy.pid")
        if stopped:
            print(f"run_hub: stopped what the hub left running: pids {stopped}")
        shutil.rmtree(homes, ignore_errors=True)
        print(f"run_hub: the try-out stopped; removed its homes {homes}")


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    closed = python_closed(Path(args.venv))
    if args.tryout and closed and not args.one_account:
        args.one_account = True
    why_one_account = closed or "--one-account was given"
    if args.one_account:
        args.create_users = False
    instructors = _names(args.instructors)
    me = pwd.getpwuid(os.geteuid()).pw_name
    if not instructors and args.one_account:
        instructors = [ONE_ACCOUNT_INSTRUCTOR if os.geteuid() == 0 else me]
    elif not instructors and REPO.stat().st_uid != 0:
        instructors = [pwd.getpwuid(REPO.stat().st_uid).pw_name]
    students = _names(args.students)
    found = problems(args, instructors, students)
    if found:
        print("run_hub: the hub cannot start here:\n  - " + "\n  - ".join(found), file=sys.stderr)
        return 2
    if not args.one_account:
        for user in instructors + students:
            if not _exists(user):
                create_user(user)
    exchange = Path(args.exchange).resolve()
    make_exchange(exchange, one_account=args.one_account)
    state = Path(args.state).resolve()
    state.mkdir(parents=True, exist_ok=True)
    os.chmod(state, 0o700)
    env = {**os.environ,
           "COURSE_HUB_VENV": str(Path(args.venv)), "COURSE_HUB_STATE": str(state),
           "COURSE_HUB_IP": args.ip, "COURSE_HUB_PORT": str(args.port), "COURSE_HUB_AUTH": args.auth,
           "COURSE_HUB_INSTRUCTORS": ",".join(instructors), "COURSE_HUB_STUDENTS": ",".join(students),
           "COURSE_ID": args.course_id, "COURSE_EXCHANGE_ROOT": str(exchange)}
    if args.auth == "shared-password":
        env["COURSE_HUB_PASSWORD"] = args.password or os.environ.get("COURSE_HUB_PASSWORD") or secrets.token_urlsafe(12)
    homes = None
    if args.one_account:
        homes = Path(tempfile.mkdtemp(prefix="course-hub-tryout-homes-"))
        env["COURSE_HUB_ONE_ACCOUNT_HOMES"] = str(homes)
        print(f"run_hub: TRY-OUT ON ONE ACCOUNT because {why_one_account}: every user's server runs as {me}, each "
              f"with its own home under {homes} (removed when the hub stops), so there is NO isolation between "
              f"users (each can read and change the others' files, with {me}'s rights): for a try-out only. For a "
              "class, build .venv on a Python every account can run (hub/README.md).")
    print(f"run_hub: http://{args.ip}:{args.port}/  instructors: {', '.join(instructors)}  "
          f"students: {', '.join(students)}  exchange: {exchange} (course {args.course_id})")
    if args.auth == "shared-password":
        print(f"run_hub: TRY-OUT login: any of those names, password {env['COURSE_HUB_PASSWORD']} "
              "(anyone with it can log in as any of them; loopback only)")
    hub = Path(args.venv) / "bin" / "jupyterhub"
    os.chdir(state)
    if homes is not None:
        return run_until_stopped([str(hub), "-f", str(HUB / "jupyterhub_config.py")], env, homes, state)
    os.execve(str(hub), [str(hub), "-f", str(HUB / "jupyterhub_config.py")], env)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
