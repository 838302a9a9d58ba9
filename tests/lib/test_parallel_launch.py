"""The launcher: results by rank, source shipping (also of the grader's stand-ins), results
read as plain data only, and bounded failure (dead or hung worker)."""
import inspect
import os
import pickle
import socket
import subprocess
import sys
import textwrap
import time

import psutil
import pytest
import torch

from course_lib.parallel import fork_server
from course_lib.parallel.launch import (
    PerRank,
    WorkerFailed,
    WorkerKilled,
    WorkerResultRefused,
    WorkerTimeout,
    ephemeral_ports,
    free_port,
    job_for,
    launch,
    worker_preload,
    workers_store,
)


def report_rank(offset):
    import os
    return int(os.environ["RANK"]) + offset


def die_on_rank_one():
    import os
    import sys
    import time
    if os.environ["RANK"] == "1":
        print("rank 1 gives up", flush=True)
        sys.exit(3)
    time.sleep(60)


def hang_in_collective():
    import torch
    import torch.distributed as dist

    from course_lib.parallel.launch import init_process_group
    rank, _, _ = init_process_group("gloo", timeout=120)
    if rank == 0:
        dist.recv(torch.zeros(1), src=1)  # rank 1 never sends
    else:
        import time
        time.sleep(120)


def reduce_and_leave_the_group_alive():
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    total = torch.ones(1000) * (dist.get_rank() + 1)
    for _ in range(3):
        dist.all_reduce(total)
    return float(total[0])   # no destroy_process_group: the launcher's exit must cope


def plain_result():
    import torch
    return {"rank": int(torch.distributed.is_available()), "values": [1.5, None, "text", (2, 3)],
            "tensor": torch.arange(3.0), "device": torch.device("cpu"), "dtype": torch.float64}


def object_result():
    from fractions import Fraction
    return Fraction(1, 3)  # picklable, but not plain data


def crafted_result(marker):
    """What a student's code could do in a worker: leave a pickle that runs code when unpickled
    as this rank's result, and end before the launcher writes the real one."""
    import os
    import pickle
    import sys

    class Payload:
        def __reduce__(self):
            return (eval, (f"__import__('pathlib').Path({marker!r}).touch()",))
    for name in (f"result{os.environ['RANK']}.pt", f"result{os.environ['RANK']}.pkl"):
        with open(os.path.join(sys.argv[1], name), "wb") as fh:
            pickle.dump(Payload(), fh)
    sys.stdout.flush()
    os._exit(0)


class _Payload:
    """The payload of :func:`crafted_result`, built here to show that it runs when unpickled."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (eval, (f"__import__('pathlib').Path({self.path!r}).touch()",))


def leave_without_result():
    import os
    os._exit(0)


class StandIn:
    """What the grader's checker holds for a notebook function: no code, only its source text."""

    def __init__(self, name, source):
        self.__name__, self.__course_source__ = name, source

    def __call__(self, *args):
        raise AssertionError("a stand-in is never called in this process")


def _children(before=()):
    """Live child processes of this test process that were not there ``before`` (pids), the
    launcher's fork server aside: other tests in the same worker may leave helpers of their
    own (e.g. torch.compile's worker pool)."""
    server = fork_server.running()
    return [p for p in psutil.Process().children(recursive=True) if p.is_running()
            and p.status() != psutil.STATUS_ZOMBIE and p.pid not in before
            and not (server and p.pid == server.proc.pid)]


def _pids():
    return {p.pid for p in psutil.Process().children(recursive=True)}


def test_free_port_is_free_and_outside_the_range_the_os_hands_out():
    low, _ = ephemeral_ports()
    port = free_port()
    assert 0 < port < 65536 and (port < low or low <= 11_000)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def store_port_and_mode():
    import os
    return int(os.environ["MASTER_PORT"]), os.environ["TORCHELASTIC_USE_AGENT_STORE"]


def test_workers_meet_at_a_store_the_launcher_already_listens_on():
    """No other program (another launch's gloo connections, which bind port 0) can take the
    rendezvous port between its choice and its use: it is bound before any worker starts."""
    store = workers_store(10.0)
    with socket.socket() as sock, pytest.raises(OSError):
        sock.bind(("127.0.0.1", store.port))
    del store
    (port0, mode0), (port1, _) = launch(store_port_and_mode, 2, timeout=60)
    assert port0 == port1 and mode0 == "True"
    assert launch(allreduce_ranks, 2, timeout=60) == [1.0, 1.0]   # ranks 0 + 1, as clients of it


def allreduce_ranks():
    import torch
    import torch.distributed as dist

    from course_lib.parallel.launch import init_process_group
    rank, _, _ = init_process_group("gloo")
    t = torch.tensor([float(rank)])
    dist.all_reduce(t)
    return float(t)


def test_job_for_ships_source_of_local_functions_and_names_library_ones():
    from course_lib.parallel.collectives import check_worker
    assert job_for(check_worker).target == "course_lib.parallel.collectives:check_worker"
    job = job_for(report_rank)
    assert job.target is None and "def report_rank" in job.source


def test_results_come_back_by_rank():
    assert launch(report_rank, 2, 10, timeout=60) == [10, 11]


def test_workers_that_keep_their_process_group_still_exit_cleanly():
    # At interpreter exit a live gloo group's threads abort the process ("terminate called
    # without an active exception", pytorch/pytorch#190489): measured here before the fix,
    # 10 of 24 such launches lost a worker on a busy 2-core machine. Workers now leave by
    # os._exit after destroying the group; any abort raises WorkerKilled.
    for _ in range(4):
        assert launch(reduce_and_leave_the_group_alive, 2, timeout=60) == [12.0, 12.0]  # (1 + 2), doubled twice


def test_results_are_plain_data_and_anything_else_is_refused():
    first, second = launch(plain_result, 2, timeout=60)
    assert first["values"] == [1.5, None, "text", (2, 3)] and torch.equal(first["tensor"], torch.arange(3.0))
    assert first["device"] == torch.device("cpu") and first["dtype"] is torch.float64
    assert type(second["tensor"]) is torch.Tensor
    with pytest.raises(WorkerResultRefused, match="rank 0 of 1 was refused: only plain data"):
        launch(object_result, 1, timeout=60)
    with pytest.raises(WorkerResultRefused, match="exited without leaving a result"):
        launch(leave_without_result, 1, timeout=60)


def test_a_crafted_result_file_runs_nothing_in_the_caller(tmp_path):
    proof, marker = tmp_path / "pickle-runs-it", tmp_path / "ran"
    pickle.loads(pickle.dumps(_Payload(proof)))
    assert proof.exists()  # such a file does run code when unpickled, so the check below can fail
    with pytest.raises(WorkerResultRefused, match="was refused"):
        launch(crafted_result, 2, str(marker), timeout=60)
    assert not marker.exists()


def test_a_stand_in_travels_as_its_source_text_and_protects_the_caller():
    """In a fresh process (making a process non-dumpable lasts as long as it lives)."""
    source = textwrap.dedent(inspect.getsource(report_rank))
    script = textwrap.dedent(f"""
        import ctypes, sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        from test_parallel_launch import StandIn
        from course_lib.parallel.launch import job_for, launch
        libc = ctypes.CDLL(None)
        assert libc.prctl(3, 0, 0, 0, 0) == 1          # PR_GET_DUMPABLE: dumpable at start
        job = job_for(StandIn("report_rank", {source!r}))
        assert job.target is None and job.source == {source!r} and job.name == "report_rank", job
        print(launch(StandIn("report_rank", {source!r}), 2, 100, timeout=60))
        print("dumpable", libc.prctl(3, 0, 0, 0, 0))  # not any more: workers cannot reach it
    """)
    done = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:2] == ["[100, 101]", "dumpable 0"], done.stdout


def what_a_rank_can_find(prefix, mine, shared):
    """Every string starting with ``prefix`` that code in this worker can find: in the frames
    above it, in the containers ``gc.get_objects()`` lists, and (as ``"file:NAME"``) in the files
    of the launch folder: what a student's function looked through to sum the other ranks'
    tensors (issue 26). Also this process's ``prctl(PR_GET_DUMPABLE)`` (0: siblings cannot read
    it through ``/proc``)."""
    import ctypes
    import gc
    import os
    import sys

    found = set()

    def look(obj, depth=0):
        if isinstance(obj, str):
            if obj.startswith(prefix) and obj != prefix:
                found.add(obj)
        elif depth < 6 and isinstance(obj, (list, tuple, set, frozenset)):
            for item in obj:
                look(item, depth + 1)
        elif depth < 6 and isinstance(obj, dict):
            for item in list(obj.values()):
                look(item, depth + 1)

    frame = sys._getframe(0)
    while frame is not None:
        look(dict(frame.f_locals))
        frame = frame.f_back
    for obj in gc.get_objects():
        look(obj, 5)
    for name in os.listdir(sys.argv[1]):   # but the results of ranks that finished (their turn is over)
        if name.startswith("result"):
            continue
        with open(os.path.join(sys.argv[1], name), "rb") as fh:
            if prefix.encode() in fh.read():
                found.add(f"file:{name}")
    return sorted(found), ctypes.CDLL(None).prctl(3, 0, 0, 0, 0)


def test_each_rank_receives_only_its_own_value_of_a_per_rank_argument():
    """Nothing of another rank's value is in a worker's frames, gc or launch folder (the
    launcher's own frames included); a shared argument still reaches every rank; workers are
    non-dumpable."""
    secrets = PerRank([["secret-0"], ["secret-1"], ["secret-2"]])
    results = launch(what_a_rank_can_find, 3, "secret-", secrets, ["secret-S"], timeout=60)
    assert results == [(["secret-0", "secret-S"], 0), (["secret-1", "secret-S"], 0), (["secret-2", "secret-S"], 0)]
    with pytest.raises(ValueError, match="a PerRank argument holds 2 values for 3 ranks"):
        launch(report_rank, 3, PerRank([1, 2]), timeout=60)


def test_a_stand_in_without_source_is_refused_with_a_reason():
    with pytest.raises(ValueError, match="my_step cannot run in worker processes: its source text is not"):
        job_for(StandIn("my_step", None))


def test_dead_worker_is_reported_quickly_and_nothing_is_left():
    before = _pids()
    start = time.monotonic()
    with pytest.raises(WorkerFailed, match="rank 1 .*code 3(.|\n)*rank 1 gives up"):
        launch(die_on_rank_one, 2, timeout=60)
    assert time.monotonic() - start < 30
    assert _children(before) == []


def test_hung_worker_times_out_and_is_killed():
    before = _pids()
    start = time.monotonic()
    with pytest.raises(WorkerTimeout, match="still running after 8 s"):
        launch(hang_in_collective, 2, timeout=8)
    assert time.monotonic() - start < 20
    assert _children(before) == []


def fail_to_connect_first(folder, times):
    """Fails as gloo does when the ranks cannot connect, on the first ``times`` attempts (each
    rank leaves a file per start and waits for the other's before failing)."""
    import os
    import time
    from pathlib import Path
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    attempts = len(list(Path(folder).glob(f"rank{rank}-*")))
    (Path(folder) / f"rank{rank}-{attempts}").touch()
    deadline = time.monotonic() + 30
    while len(list(Path(folder).glob(f"rank*-{attempts}"))) < world and time.monotonic() < deadline:
        time.sleep(0.01)
    if attempts < times:
        raise RuntimeError("Gloo connectFullMesh failed with [pair.cc:553] Connection closed by peer")
    return rank


def test_a_group_that_fails_to_connect_is_started_once_more_then_reported(tmp_path):
    (tmp_path / "once").mkdir()
    assert launch(fail_to_connect_first, 2, str(tmp_path / "once"), 1, timeout=60) == [0, 1]
    (tmp_path / "always").mkdir()
    with pytest.raises(WorkerFailed, match="connectFullMesh failed"):
        launch(fail_to_connect_first, 2, str(tmp_path / "always"), 99, timeout=60)
    starts = sorted(p.name for p in (tmp_path / "always").iterdir())
    assert starts == ["rank0-0", "rank0-1", "rank1-0", "rank1-1"]     # two starts, no more
    with pytest.raises(WorkerFailed):                                 # other failures: at once
        launch(die_on_rank_one, 2, timeout=60)


def where_and_what():
    import os
    import sys

    import numpy as np
    return os.getppid(), "torch" in sys.modules, sys.argv[1:], int(np.random.randint(2**31))


def test_workers_fork_from_one_server_that_loaded_torch_once():
    first = launch(where_and_what, 2, timeout=60)
    second = launch(where_and_what, 2, timeout=60)
    server = fork_server.running()
    assert server is not None and {ppid for ppid, *_ in first + second} == {server.proc.pid}
    assert all(loaded for _, loaded, _, _ in first)               # torch came with the fork
    assert all(len(argv) == 1 and "course-launch-" in argv[0] for _, _, argv, _ in first)
    draws = [draw for *_, draw in first + second]
    assert len(set(draws)) == 4, draws                            # no random state shared by the forks


def kill_the_server(folder):
    import os
    import signal
    import time
    from pathlib import Path
    Path(folder, f"worker{os.environ['RANK']}.pid").write_text(str(os.getpid()))
    if os.environ["RANK"] == "0":
        time.sleep(0.5)
        os.kill(os.getppid(), signal.SIGKILL)
    time.sleep(60)


def test_a_killed_server_stops_the_launch_with_a_reason_and_the_next_launch_starts_another(tmp_path):
    launch(report_rank, 1, 0, timeout=60)
    old = fork_server.running().proc.pid
    start = time.monotonic()
    with pytest.raises(WorkerKilled, match="fork server ended"):
        launch(kill_the_server, 2, str(tmp_path), timeout=60)
    assert time.monotonic() - start < 30
    workers = [int(p.read_text()) for p in tmp_path.glob("worker*.pid")]
    assert len(workers) == 2
    deadline = time.monotonic() + 10
    while any(psutil.pid_exists(w) and psutil.Process(w).status() != psutil.STATUS_ZOMBIE for w in workers):
        assert time.monotonic() < deadline, "the orphaned workers were not stopped"
        time.sleep(0.1)
    assert launch(report_rank, 2, 5, timeout=60) == [5, 6]
    assert fork_server.running().proc.pid != old


def test_the_server_and_its_workers_end_with_their_caller(tmp_path):
    script = textwrap.dedent(f"""
        import os, sys, threading, time
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        from pathlib import Path
        from test_parallel_launch import report_rank
        from course_lib.parallel import fork_server
        from course_lib.parallel.launch import launch
        launch(report_rank, 1, 0, timeout=60)
        print(fork_server.running().proc.pid, flush=True)
        def sleeper(folder):
            import os, time
            from pathlib import Path
            Path(folder, "sleeper.pid").write_text(str(os.getpid()))
            time.sleep(60)
        threading.Thread(target=launch, args=(sleeper, 1, {str(tmp_path)!r}), daemon=True).start()
        deadline = time.monotonic() + 60
        while not Path({str(tmp_path)!r}, "sleeper.pid").exists():
            assert time.monotonic() < deadline, "the sleeping worker did not start"
            time.sleep(0.05)
        os._exit(0)
    """)
    (tmp_path / "caller.py").write_text(script)   # a file: launch ships the source of its functions
    # the caller ends without cleaning up (os._exit) the launch folder of its sleeping worker:
    # TMPDIR keeps that folder in tmp_path rather than leaving a course-launch-* in /tmp
    done = subprocess.run([sys.executable, str(tmp_path / "caller.py")], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "TMPDIR": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-2000:]
    server, worker = int(done.stdout.split()[0]), int((tmp_path / "sleeper.pid").read_text())
    deadline = time.monotonic() + 10
    while any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in (server, worker)):
        assert time.monotonic() < deadline, "the fork server or its worker outlived the caller"
        time.sleep(0.1)


def test_a_server_that_cannot_start_says_why(tmp_path, monkeypatch):
    (tmp_path / "torch.py").write_text("raise ImportError('a broken torch, for this test')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))   # found before site-packages by the server only
    server = fork_server.ForkServer()
    with pytest.raises(fork_server.ServerGone, match="fork server ended:(.|\n)*a broken torch, for this test"):
        server.start(str(tmp_path), {}, str(tmp_path / "rank0.log"), timeout=60)


def wraps_a_model_in_ddp():
    import sys

    already = "torch._dynamo" in sys.modules   # before DistributedDataParallel(...) would import it
    from course_lib.parallel.launch import init_process_group

    init_process_group("gloo", timeout=30)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(2, 2))
    model(torch.ones(1, 2)).sum().backward()
    return already


def test_workers_that_build_ddp_find_torch_dynamo_imported_by_the_fork_server():
    """DDP's (and FSDP2's, DTensor's, pipelining's) constructor imports torch._dynamo, 1.2 s of CPU per worker:
    the fork server imports it once before forking such workers; for a job that builds none of
    them nothing is asked (a server serves every later launch of its caller)."""
    assert worker_preload(job_for(wraps_a_model_in_ddp)) == ("torch._dynamo",)
    assert worker_preload(job_for("course_lib.checks.ddp:step_worker")) == ("torch._dynamo",)
    assert worker_preload(job_for(report_rank)) == ()
    assert worker_preload(job_for("course_lib.parallel.pipeline:torch_worker")) == ("torch._dynamo",)
    assert worker_preload(job_for("course_lib.checks.collectives:student_worker")) == ()
    assert launch(wraps_a_model_in_ddp, 2, timeout=90) == [True, True]
