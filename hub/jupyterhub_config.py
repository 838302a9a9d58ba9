"""JupyterHub for the course on one machine: local users, the course's .venv, nbgrader's exchange.

Start it with `sudo make hub` (hub/run_hub.py), which checks the machine, creates the exchange
and sets the COURSE_HUB_* variables read below; `jupyterhub -f hub/jupyterhub_config.py`
with the same variables does the same. It must run as root: the hub starts each user's
server as that user (JupyterHub's LocalProcessSpawner).

- Users are the machine's own accounts. COURSE_HUB_AUTH=pam (the default) checks their
  passwords with PAM, for a real class. COURSE_HUB_AUTH=shared-password is for TRY-OUTS ONLY:
  everyone logs in with one password (COURSE_HUB_PASSWORD) and can log in as any other
  listed user, so the hub then refuses to listen anywhere but 127.0.0.1.
- Groups: `instructors` (COURSE_HUB_INSTRUCTORS) and `students` (COURSE_HUB_STUDENTS),
  comma-separated user names. Only listed users may log in.
- Every server runs the course's environment (COURSE_HUB_VENV, default the repository's
  .venv): JupyterLab with the nbgrader extension, RISE, torch, course_lib, `course`.
  Instructors open the course repository, which is the nbgrader course directory
  (nbgrader_config.py at its root) and must be theirs to write. Students open their home
  folder; the formgrader, course list and assignment-creation tools are switched off for them.
- COURSE_HUB_ONE_ACCOUNT_HOMES (set by `run_hub.py --tryout` when other accounts cannot run the
  course's Python, or with --one-account): TRY-OUT ON ONE ACCOUNT. Every user's server runs
  as the account that started the hub (JupyterHub's SimpleLocalProcessSpawner), with its own
  home COURSE_HUB_ONE_ACCOUNT_HOMES/<name>; no accounts are needed and no isolation is given.
  Loopback only, like the shared password.
- The nbgrader exchange is COURSE_EXCHANGE_ROOT (default /srv/nbgrader/exchange) for the
  course COURSE_ID (default gpu-course), read by hub/jupyter/nbgrader_config.py.
"""
import ipaddress
import os
from pathlib import Path

from jupyterhub.spawner import (
    LocalProcessSpawner,
    SimpleLocalProcessSpawner,
    set_user_setuid,
)

HUB = Path(__file__).resolve().parent
REPO = HUB.parent
VENV = Path(os.environ.get("COURSE_HUB_VENV", REPO / ".venv"))
STATE = Path(os.environ.get("COURSE_HUB_STATE", REPO / "build" / "hub"))
IP = os.environ.get("COURSE_HUB_IP", "127.0.0.1")
PORT = int(os.environ.get("COURSE_HUB_PORT", "8000"))
AUTH = os.environ.get("COURSE_HUB_AUTH", "pam")
COURSE_ID = os.environ.get("COURSE_ID", "gpu-course")
EXCHANGE = os.environ.get("COURSE_EXCHANGE_ROOT", "/srv/nbgrader/exchange")
CONFIG = HUB / "jupyter"                   # nbgrader_config.py for everyone
STUDENT_CONFIG = CONFIG / "students"       # extensions switched off for students
ONE_ACCOUNT_HOMES = os.environ.get("COURSE_HUB_ONE_ACCOUNT_HOMES", "")


def _names(variable: str) -> list[str]:
    return [n.strip() for n in os.environ.get(variable, "").split(",") if n.strip()]


INSTRUCTORS = _names("COURSE_HUB_INSTRUCTORS")
STUDENTS = _names("COURSE_HUB_STUDENTS")

c = get_config()  # noqa: F821 - provided by JupyterHub

# -- network: the public proxy, the hub and the proxy's API, each on its own port -------------
c.JupyterHub.ip = IP
c.JupyterHub.port = PORT
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = int(os.environ.get("COURSE_HUB_INTERNAL_PORT", PORT + 1))
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{os.environ.get('COURSE_HUB_PROXY_API_PORT', PORT + 2)}"
chp = HUB / "node_modules" / ".bin" / "configurable-http-proxy"  # hub/package.json, `npm ci`
if chp.exists():
    c.ConfigurableHTTPProxy.command = [str(chp)]
c.ConfigurableHTTPProxy.pid_file = str(STATE / "jupyterhub-proxy.pid")
c.JupyterHub.db_url = f"sqlite:///{STATE / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(STATE / "jupyterhub_cookie_secret")

# -- who may log in, and how --------------------------------------------------------------
if AUTH == "shared-password":
    if not ipaddress.ip_address(IP).is_loopback:
        raise SystemExit("COURSE_HUB_AUTH=shared-password is for try-outs on 127.0.0.1 only: "
                         "anyone with the password can log in as any listed user. Use pam.")
    c.JupyterHub.authenticator_class = "shared-password"
    c.SharedPasswordAuthenticator.user_password = os.environ["COURSE_HUB_PASSWORD"]
elif AUTH == "pam":
    c.JupyterHub.authenticator_class = "pam"
else:
    raise SystemExit(f"COURSE_HUB_AUTH must be pam or shared-password, not {AUTH!r}")
c.Authenticator.allowed_users = set(INSTRUCTORS) | set(STUDENTS)
c.JupyterHub.load_groups = {"instructors": {"users": INSTRUCTORS}, "students": {"users": STUDENTS}}
# instructors see who is logged in and may open a student's server to help (their own
# nbgrader work needs no hub permission: it happens in their server and the exchange)
c.JupyterHub.load_roles = [{
    "name": "course-instructor",
    "description": "Instructors of the course: list students, open their servers",
    "groups": ["instructors"],
    "scopes": ["admin-ui", "list:users", "read:users", "read:groups", "access:servers!group=students"],
}]

# -- each user's server: the course's environment -------------------------------------------
class CourseSpawner(LocalProcessSpawner):
    """JupyterHub's LocalProcessSpawner, except that the server starts in the folder it opens
    (not always the home folder): nbgrader's formgrader reads nbgrader_config.py from the
    server's working directory, and the course directory's says `root = "."`."""

    def make_preexec_fn(self, name):
        become = set_user_setuid(name, chdir=False)
        start_in = os.path.expanduser(f"~{name}") if self.notebook_dir in ("", "~") else self.notebook_dir

        def preexec():
            become()
            os.chdir(start_in)

        return preexec


class OneAccountSpawner(SimpleLocalProcessSpawner):
    """TRY-OUT ONLY: JupyterHub's SimpleLocalProcessSpawner (every server runs as the hub's own
    account, HOME is ONE_ACCOUNT_HOMES/<name>), starting in the folder it opens like
    CourseSpawner, and failing loudly where the simple one only logs a folder it cannot make."""

    def make_preexec_fn(self, name):
        home = self.home_dir
        start_in = home if self.notebook_dir in ("", "~") else self.notebook_dir

        def preexec():
            os.makedirs(home, 0o700, exist_ok=True)
            os.chdir(start_in)

        return preexec


server_args = ["--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
if ONE_ACCOUNT_HOMES:
    if not ipaddress.ip_address(IP).is_loopback:
        raise SystemExit("COURSE_HUB_ONE_ACCOUNT_HOMES (every server on one account) is for try-outs on "
                         "127.0.0.1 only: users are not kept apart.")
    c.JupyterHub.spawner_class = OneAccountSpawner
    c.SimpleLocalProcessSpawner.home_dir_template = os.path.join(ONE_ACCOUNT_HOMES, "{username}")
    if os.geteuid() == 0:  # Jupyter Server refuses root unless told
        server_args.append("--ServerApp.allow_root=True")
else:
    c.JupyterHub.spawner_class = CourseSpawner
c.Spawner.cmd = [str(VENV / "bin" / "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
c.Spawner.args = server_args
# a JupyterLab with torch in the environment takes a while on a small, busy machine
c.Spawner.start_timeout = 300
c.Spawner.http_timeout = 300
c.Spawner.environment = {
    "PATH": f"{VENV / 'bin'}:/usr/local/bin:/usr/bin:/bin",
    "COURSE_ID": COURSE_ID,
    "COURSE_EXCHANGE_ROOT": EXCHANGE,
}


def _per_role(spawner):
    """Instructors open the course repository (the nbgrader course directory); students their
    home, with the formgrader switched off (config folders listed first take precedence) and
    their hub name as nbgrader's student id."""
    groups = {g.name for g in spawner.user.groups}
    if "instructors" in groups:
        spawner.notebook_dir = str(REPO)
        spawner.environment["JUPYTER_CONFIG_PATH"] = str(CONFIG)
    else:
        spawner.notebook_dir = "~"
        spawner.environment["JUPYTER_CONFIG_PATH"] = os.pathsep.join([str(STUDENT_CONFIG), str(CONFIG)])
        # nbgrader records the hub's name, not the server's account (the same for every student
        # of a one-account try-out): see hub/jupyter/nbgrader_config.py
        spawner.environment["COURSE_STUDENT_ID"] = spawner.user.name


c.Spawner.pre_spawn_hook = _per_role
