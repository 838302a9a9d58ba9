import shutil
import subprocess
import sys

import pytest

from course_tools import loopback


def test_loopback_works_here():
    assert loopback.loopback_works()
    assert loopback.ensure_loopback()


@pytest.mark.skipif(not shutil.which("unshare"), reason="unshare not available")
def test_brings_loopback_up_in_a_namespace_without_network():
    probe = ("from course_tools import loopback; before = loopback.loopback_works(); "
             "print(before, loopback.ensure_loopback())")
    done = subprocess.run(["unshare", "-n", sys.executable, "-c", probe], capture_output=True,
                          text=True, timeout=60)
    if done.returncode != 0:
        pytest.skip(f"cannot create a network namespace here: {done.stderr.strip()[:200]}")
    assert done.stdout.strip().splitlines()[-1] == "False True"
