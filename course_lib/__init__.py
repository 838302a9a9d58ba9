"""course_lib: what the lessons of "GPU computing for deep learning" import, one module per concept.

Lesson (folder in notebooks/) -> the modules its lecture and exercises import; every exercise
notebook also imports :mod:`.checks`, and every module's docstring names its lessons:

- 00_setup: hardware, arrays, devices, timing
- 01_hardware_foundations: hardware, memory_hierarchy, roofline, devices, profile, models, recorded
- 02_pytorch_devices: devices, hardware, timing
- 03_simt_programming_model: kernels, simt (the warp-level engine: counts, races, its traffic
  model), checks.kernel_launch, checks.traffic, hardware, timing
- 04_cupy_and_numba: arrays, kernels, distance, crossover, recorded, hardware, timing
- 05_compilers_and_interpreters: compilers, recorded, timing
- 06_asynchronous_execution: async_queue, recorded, timing
- 07_automatic_parallelism: schedule, hardware, recorded, timing
- 08_data_movement_and_profiling: data, models, train, profile, trace, training_memory,
  activation_checkpointing, transformer_block, transformer_cost, devices, recorded, hardware, timing
- 09_multi_gpu_from_scratch: parallel.data_parallel, data, models, timing
- 10_ddp: parallel.ddp, parallel.launch, parallel.collectives, checks.ddp, hardware, timing
- 11_parameter_servers_and_collectives: parallel.collectives, parallel.kvstore, parallel.ps,
  parallel.widgets, checks.collectives, timing
- 12_accelerators_and_codesign: precision, formats, microscaling, block_scaled (on triton_traffic),
  mixed_precision, systolic, sparsity, training_memory, models,
  transformer_block, devices, recorded, hardware, timing
- 13_sharding_and_model_parallelism: parallel.zero, parallel.fsdp, parallel.tensor_parallel,
  parallel.pipeline, parallel.planner, transformer_block, schedule, training_memory, models,
  devices, hardware
- 14_triton: triton_traffic (on triton_interpreter, triton_handover, triton_mode), triton_kernels, recorded, hardware
- 15_attention: attention, attention_kernels, attention_fp8, triton_traffic, roofline, hardware, timing
- 16_serving: kv_cache, tiny_lm, inference_cost, paged_kv, serving_sim, speculative,
  checks.paged_allocator, roofline, hardware, timing
- 17_experts_and_long_context: moe, parallel.expert_parallel, parallel.bytes_sent,
  parallel.ring_attention, parallel.launch, checks.expert_dispatch, checks.ring_attention, hardware, devices

Every lecture also shows a picture from :mod:`.diagrams` (one module per diagram).
Underneath: :mod:`.cuda_simulator` (GPU or simulator for Numba CUDA; :mod:`.hardware`
re-exports it). The ``course`` command lives in ``course_tools``, which this package never
imports.

Importing the package loads neither torch, NumPy nor matplotlib; it only decides, before
anything imports ``numba.cuda``, whether Numba's CUDA kernels will run on a GPU or in the
simulator (where a GPU is seen, by running a one-thread probe kernel in a child process).
"""
from .hardware import prepare_numba_cuda as _prepare_numba_cuda

__version__ = "0.1.0"

_prepare_numba_cuda()
