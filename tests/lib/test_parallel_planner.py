"""The planner's memory and traffic arithmetic, its ladder, and the Playbook's rules of thumb."""
import pytest

from course_lib.parallel import planner as pl
from course_lib.parallel.zero import memory_per_rank


def test_bytes_per_gpu_divides_the_model_and_the_activations():
    assert pl.bytes_per_gpu(8e9) == 16 * 8e9
    assert pl.bytes_per_gpu(8e9, tp=8, activation_bytes=8e9) == 16e9 + 1e9
    assert pl.bytes_per_gpu(8e9, pp=2, dp=4, zero=2) == memory_per_rank(4e9, 4, 2)["total"]


def test_traffic_uses_the_slowest_link_and_zero3_moves_half_again():
    c = pl.Cluster(gpus_per_node=8, nodes=2, intra_node_bandwidth=100e9, inter_node_bandwidth=10e9)
    assert pl.dp_link_bandwidth(c, 1, 1, 8) == 100e9
    assert pl.dp_link_bandwidth(c, 1, 1, 16) == 10e9
    two = pl.dp_seconds(1e9, c, 1, 1, 16, 2)
    assert two == pytest.approx(2 * 15 / 16 * 2e9 / 10e9)
    assert pl.dp_seconds(1e9, c, 1, 1, 16, 3) == pytest.approx(1.5 * two)
    assert pl.dp_seconds(1e9, c, 8, 2, 1, 0) == 0.0


def test_ladder_tries_tensor_parallelism_inside_the_node_before_pipelines():
    assert pl.ladder(pl.Cluster(gpus_per_node=8, nodes=4)) == [(1, 1), (2, 1), (4, 1), (8, 1), (8, 2), (8, 4)]
    assert pl.ladder(pl.Cluster(gpus_per_node=4, nodes=4), layers=2) == [(1, 1), (2, 1), (4, 1), (4, 2)]


@pytest.mark.parametrize("n_params,nodes", [(1e9, 1), (7e9, 1), (30e9, 2), (70e9, 8), (70e9, 128),
                                            (175e9, 64), (400e9, 256)])
def test_plans_fit_and_follow_the_playbook(n_params, nodes):
    c = pl.Cluster(nodes=nodes)
    chosen = pl.plan(n_params, c, activation_bytes=20e9)
    assert chosen is not None and chosen.fits
    assert chosen.tp * chosen.pp * chosen.dp == c.n_gpus
    assert chosen.bytes_per_gpu <= c.gpu_bytes
    assert pl.playbook_allows(n_params, c.n_gpus, chosen), str(chosen)


def test_first_fit_and_nothing_fits():
    assert pl.plan(1e9, pl.Cluster()).describe() == "DP=8"
    assert pl.plan(7e9, pl.Cluster()).describe() == "DP=8 (ZeRO-1)"
    assert pl.plan(70e9, pl.Cluster(nodes=1), activation_bytes=20e9) is None
    slow = pl.Cluster(nodes=8, inter_node_bandwidth=12.5e9)
    assert pl.plan(70e9, slow, activation_bytes=20e9, max_dp_seconds=2.0).pp > 1
