"""What the exercise notebooks' test cells call (every lesson, 00-17).

- :mod:`.core`: ``check_close``, ``check_array_close``, ``check_equal``, ``check_in``,
  ``check_true``, ``check_raises`` (every lesson); each prints one "ok: NAME" line or raises
  ``CheckFailed`` saying what was expected and what came back, and writes nothing to stderr.
- :mod:`.failure_display`: in a notebook, a failed check shows its message first and the
  student's own line, without course_lib's frames (registered on import, for ``CheckFailed`` and
  the release's stub, which raises ``NotImplementedError()``).
- :mod:`.unanswered`: ``NotAnswered``, the one line said of a function or kernel that still holds
  the release's stub, and ``refuse_unanswered``, which the kernel launches and multi-process
  checks call before running the student's code.
- :mod:`.probe`: ``in_student_kernel``, for the part of a test that must run in the student's
  kernel (patching a module around the student's function, passing it a callable or a model).
- :mod:`.kernel_launch`: ``launch_checked``, lessons 03/04's kernel launch for a test: on copies of
  the arguments, the inputs checked unchanged afterwards, optionally with access counts.
- :mod:`.traffic`: lesson 03's grading on memory traffic measured by the SIMT engine (sectors per
  warp access, bank-conflict degree, divergent branches), with the target and the line.
- :mod:`.ddp`: lesson 10's DDP step run on gloo processes (``check_step``).
- :mod:`.ddp_container`: lesson 10's DDP containers run on gloo processes (``check_ddp``).
- :mod:`.sharded_optimizer`: lesson 13's sharded optimizer run on gloo processes
  (``check_sharded_optimizer``); :mod:`.shipped`: a student's class shipped to the workers.
- :mod:`.fsdp`: lesson 13's FSDP container run on gloo processes (``check_fsdp``).
- :mod:`.collectives`: lesson 11's allreduce run on gloo processes (``check_allreduce``).
- :mod:`.zero`: lesson 13's sharded optimizer step run on gloo processes (``check_sharded_step``).
- :mod:`.expert_dispatch`: lesson 17's expert-parallel layer run on gloo processes, output and bytes
  sent judged (``check_expert_dispatch``); :mod:`.ring_attention`: lesson 17's ring attention run
  on gloo processes with point-to-point only, against SDPA (``check_ring_attention``).
- :mod:`.paged_allocator`: lesson 16's paged block allocator judged op by op from snapshots
  (``check_run``, ``random_ops``).
- :mod:`.training_runs`: lesson 12's mixed-precision training runs (fp32, fp16 without and with a
  GradScaler, bf16) that a student's ``verdict`` is judged on, computed once per checker process
  (``lecture_runs``, ``course_run``).

The multi-process checks are imported from their modules (they import torch.distributed);
this package itself imports only the light core.
"""
from .core import CheckFailed, check_array_close, check_close, check_equal, check_in, check_raises, check_true
from .failure_display import install as _install_failure_display
from .probe import in_student_kernel

_install_failure_display()

__all__ = ["CheckFailed", "check_array_close", "check_close", "check_equal", "check_in", "check_raises",
           "check_true", "in_student_kernel"]
