"""Training on several devices (lessons 09-11, 13 and 17), one concept per module:

- :mod:`.data_parallel` - the scaffolding of data parallelism by hand (lesson 09): replica
  devices, model copies, a training loop around the step the lesson writes;
- :mod:`.launch` - start k ``torch.distributed`` worker processes from a notebook, with a
  deadline, killing them all on failure (lessons 10, 11 and 13);
- :mod:`.ddp` - DistributedDataParallel training, evaluation across ranks, gradient
  buckets, ``torchrun`` (lesson 10);
- :mod:`.overlap` - what a DDP container sends and when: all-reduce calls, bytes and overlap
  with backward, for torch's DDP, lesson 09's after-backward sync or a container class (lesson 10);
- :mod:`.collectives` - naive, tree and ring allreduce over send/recv and their cost
  model (lesson 11; lesson 10 uses the cost model);
- :mod:`.kvstore` and :mod:`.ps` - push/pull key-value stores and a parameter server
  over ``torch.distributed.rpc``, synchronous and asynchronous (lesson 11);
- :mod:`.widgets` - sliders driving the cost models (lesson 11);
- :mod:`.zero` - memory of mixed-precision Adam training, ZeRO stages 0-3 written on
  reduce-scatter and all-gather, and FSDP2 ``fully_shard`` (lesson 13);
- :mod:`.fsdp` - what FSDP sends per step (the formula, and every collective logged) and the
  parameter bytes a rank holds while it trains, FSDP2's traffic measured (lesson 13);
- :mod:`.tensor_parallel` - Megatron-LM's column- and row-parallel linear layers, and the
  same split with DTensor's ``parallelize_module`` (lesson 13);
- :mod:`.pipeline` - GPipe and 1F1B schedules simulated, the bubble, and real pipelines over
  send/recv and ``torch.distributed.pipelining`` (lesson 13);
- :mod:`.planner` - which parallelism when, after the Ultra-Scale Playbook (lesson 13);
- :mod:`.expert_parallel` - a mixture-of-experts layer with its experts on different ranks,
  tokens dispatched and combined by all-to-alls with uneven splits (lesson 17);
- :mod:`.bytes_sent` - the bytes a rank sends through ``torch.distributed``, counted per call (lesson 17);
- :mod:`.ring_attention` - context parallelism: attention over a sequence split across ranks,
  keys and values passed round a ring, contiguous and zig-zag layouts (lesson 17).

Without several GPUs every "device" is a CPU replica or a CPU process using gloo; the
code is the same on GPUs (NCCL).
"""
