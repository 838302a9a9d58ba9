"""Training on several devices (lessons 09-11), one concept per module:

- :mod:`.data_parallel` - data parallelism by hand in one process: replicas, split_batch,
  allreduce, train_batch (lesson 09);
- :mod:`.launch` - start k ``torch.distributed`` worker processes from a notebook, with a
  deadline, killing them all on failure (lessons 10, 11);
- :mod:`.ddp` - DistributedDataParallel training, evaluation across ranks, gradient
  buckets, ``torchrun`` (lesson 10);
- :mod:`.collectives` - naive, tree and ring allreduce over send/recv and their cost
  model (lesson 11);
- :mod:`.kvstore` and :mod:`.ps` - push/pull key-value stores and a parameter server
  over ``torch.distributed.rpc``, synchronous and asynchronous (lesson 11);
- :mod:`.widgets` - sliders driving the cost models.

Without several GPUs every "device" is a CPU replica or a CPU process using gloo; the
code is the same on GPUs (NCCL).
"""
