"""Which parallelism when: a small planner for training one model on a cluster (lesson 13).

A configuration is ``TP x PP x DP = GPUs``: tensor parallelism of degree ``tp`` (inside a
node: it all-reduces activations in every layer), pipeline parallelism of degree ``pp``
(consecutive layers on consecutive GPU groups) and data parallelism of degree ``dp`` with
a ZeRO stage (0-3) over the data-parallel ranks.

Memory per GPU (bytes, mixed-precision Adam, :func:`course_lib.parallel.zero.memory_per_rank`):
the model states of ``n_params / (tp pp)`` parameters with the ZeRO stage over ``dp``, plus
the activations of one micro-batch divided by ``tp`` (tensor parallelism with sequence
parallelism splits them, Korthikanti et al. 2022; with 1F1B the first pipeline stage holds
``pp`` micro-batches of ``1/pp`` of the layers, so ``pp`` does not shrink them).

Data-parallel traffic per step (seconds at the link the data-parallel group uses): the
ring moves ``2 (dp-1)/dp`` times the gradient bytes (2 bytes per parameter) per GPU for
stages 0-2 and ``3 (dp-1)/dp`` for stage 3, which all-gathers the parameters again
(Rajbhandari et al. 2020, section 7).

:func:`plan` walks the ladder of the Hugging Face Ultra-Scale Playbook (Tazi et al. 2025,
"Finding the best training configuration", step 1) and returns the first configuration that
fits: data parallelism alone, then ZeRO-1/2/3, then tensor parallelism up to the node size,
then pipeline parallelism across nodes; ZeRO-3 is skipped from ``zero3_rank_limit``
data-parallel ranks on (512: the Playbook's scale where pure ZeRO-3 becomes inefficient),
and when its traffic takes longer than ``max_dp_seconds`` (seconds).
"""
from __future__ import annotations

from dataclasses import dataclass

from .zero import memory_per_rank


@dataclass(frozen=True)
class Cluster:
    """GPUs in ``nodes`` nodes of ``gpus_per_node``; memory in bytes, bandwidths in bytes/s
    per GPU (inside a node, e.g. NVLink; between nodes, e.g. InfiniBand)."""

    gpus_per_node: int = 8
    nodes: int = 1
    gpu_bytes: float = 80e9
    intra_node_bandwidth: float = 450e9
    inter_node_bandwidth: float = 50e9

    @property
    def n_gpus(self) -> int:
        return self.gpus_per_node * self.nodes


@dataclass(frozen=True)
class Plan:
    """One configuration and what it costs: bytes per GPU, data-parallel seconds per step."""

    tp: int
    pp: int
    dp: int
    zero: int
    bytes_per_gpu: float
    dp_seconds: float
    fits: bool

    def describe(self) -> str:
        parts = [f"TP={self.tp}"] if self.tp > 1 else []
        parts += [f"PP={self.pp}"] if self.pp > 1 else []
        parts += [f"DP={self.dp}" + (f" (ZeRO-{self.zero})" if self.zero else "")]
        return " x ".join(parts)

    def __str__(self) -> str:
        return (f"{self.describe()}: {self.bytes_per_gpu / 1e9:.1f} GB per GPU, "
                f"data-parallel traffic {self.dp_seconds * 1e3:.0f} ms per step")


def bytes_per_gpu(n_params: float, tp: int = 1, pp: int = 1, dp: int = 1, zero: int = 0,
                  activation_bytes: float = 0.0) -> float:
    """Bytes one GPU holds (model states of its ``1/(tp pp)`` of the model, ZeRO ``zero``
    over ``dp``, plus ``activation_bytes / tp``)."""
    states = memory_per_rank(n_params / (tp * pp), dp, zero, "mixed")
    return states["total"] + activation_bytes / tp


def dp_link_bandwidth(cluster: Cluster, tp: int, pp: int, dp: int) -> float:
    """Bandwidth (bytes/s) of the slowest link in a data-parallel group: inside a node when
    the whole ``tp x pp x dp`` job fits in one node, between nodes otherwise."""
    if dp == 1 or tp * pp * dp <= cluster.gpus_per_node:
        return cluster.intra_node_bandwidth
    return cluster.inter_node_bandwidth


def dp_seconds(n_params: float, cluster: Cluster, tp: int, pp: int, dp: int, zero: int) -> float:
    """Seconds per step the data-parallel group spends moving gradients (and, for ZeRO-3,
    parameters) of its ``n_params / (tp pp)`` parameters, 2 bytes each, over a ring."""
    if dp == 1:
        return 0.0
    volume = (3 if zero == 3 else 2) * (dp - 1) / dp * 2 * n_params / (tp * pp)
    return volume / dp_link_bandwidth(cluster, tp, pp, dp)


def evaluate(n_params: float, cluster: Cluster, tp: int, pp: int, zero: int,
             activation_bytes: float = 0.0) -> Plan:
    """The :class:`Plan` for ``tp x pp`` model parallelism, data parallelism on the rest."""
    dp = cluster.n_gpus // (tp * pp)
    need = bytes_per_gpu(n_params, tp, pp, dp, zero, activation_bytes)
    return Plan(tp, pp, dp, zero, need, dp_seconds(n_params, cluster, tp, pp, dp, zero),
                need <= cluster.gpu_bytes)


def ladder(cluster: Cluster, layers: int | None = None) -> list[tuple[int, int]]:
    """``(tp, pp)`` in the order the planner tries them: no model parallelism, tensor
    parallelism 2, 4, ... up to the node size, then that with pipeline degrees 2, 4, ...
    (each dividing the GPUs; ``pp`` at most ``layers``)."""
    steps = [(1, 1)]
    tp = 2
    while tp <= cluster.gpus_per_node and cluster.n_gpus % tp == 0:
        steps.append((tp, 1))
        tp *= 2
    top = steps[-1][0]
    pp = 2
    while top * pp <= cluster.n_gpus and (layers is None or pp <= layers):
        if cluster.n_gpus % (top * pp) == 0:
            steps.append((top, pp))
        pp *= 2
    return steps


def plan(n_params: float, cluster: Cluster, activation_bytes: float = 0.0, layers: int | None = None,
         zero3_rank_limit: int = 512, max_dp_seconds: float | None = None) -> Plan | None:
    """The first configuration of the :func:`ladder` x ZeRO stages 0, 1, 2, 3 that fits in
    ``cluster.gpu_bytes``; ``None`` when nothing fits (add GPUs, recompute activations)."""
    for tp, pp in ladder(cluster, layers):
        for zero in (0, 1, 2, 3):
            candidate = evaluate(n_params, cluster, tp, pp, zero, activation_bytes)
            if zero and candidate.dp == 1:
                continue  # nothing to shard over
            if zero == 3 and candidate.dp >= zero3_rank_limit:
                continue
            if max_dp_seconds is not None and candidate.dp_seconds > max_dp_seconds:
                continue
            if candidate.fits:
                return candidate
    return None


def playbook_allows(n_params: float, n_gpus: int, chosen: Plan) -> bool:
    """Whether ``chosen`` is one of the Ultra-Scale Playbook's step-1 suggestions (Tazi et al.
    2025): under 10B parameters on up to 8 GPUs, one technique alone; 10B-100B on more than
    8 GPUs: TP=8 with PP, TP=8 with ZeRO-3, or ZeRO-3 alone; from 512 GPUs, data parallelism
    combined with TP or PP. Cases the rules do not cover return True."""
    techniques = sum([chosen.tp > 1, chosen.pp > 1, chosen.dp > 1])
    if n_gpus >= 512:
        return chosen.tp > 1 or chosen.pp > 1
    if n_params < 10e9 and n_gpus <= 8:
        return techniques <= 1
    if 10e9 <= n_params <= 100e9 and n_gpus > 8:
        return ((chosen.tp == 8 and chosen.pp > 1) or (chosen.tp == 8 and chosen.zero == 3)
                or (chosen.tp == 1 and chosen.pp == 1 and chosen.zero == 3))
    return True
