"""The code base stays within ruff's checks, as pyproject.toml's [tool.ruff] configures them
(pycodestyle, pyflakes, import order, bugbear; lines of at most 120 characters), and that
configuration is not loosened on the quiet. A second or so: ruff checks the whole tree."""
import re
import subprocess
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:   # Python 3.10: pytest's own TOML reader
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
RUFF = Path(sys.executable).parent / "ruff"   # the pinned ruff of this environment's dev extra
LINE_LENGTH = 120
RULE_FAMILIES = {"E", "F", "W", "I", "B"}


def test_ruff_finds_nothing_in_the_repository():
    assert RUFF.is_file(), f"no {RUFF}: install the dev extra (pip install -e '.[dev]', which make test runs)"
    done = subprocess.run([str(RUFF), "check", "--no-cache", "--output-format", "concise", "."], cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"ruff check (fix these, or run `{RUFF} check .`):\n{done.stdout}{done.stderr}"


def test_the_ruff_configuration_keeps_its_line_length_and_rule_families():
    ruff = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["ruff"]
    assert ruff["line-length"] == LINE_LENGTH, ruff
    lint = ruff.get("lint", {})
    assert RULE_FAMILIES <= set(lint.get("select", [])), lint
    # single rules may be ignored (each with its reason in pyproject.toml), never a whole family or group
    families = [code for code in lint.get("ignore", []) + lint.get("extend-ignore", [])
                if not re.fullmatch(r"[A-Z]+\d{3,4}", code)]
    assert not families, f"ignored wholesale in pyproject.toml: {families}"
