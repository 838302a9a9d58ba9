"""Push aggregates (sums), pull returns copies, sharding splits the bytes."""
import pytest
import torch

from course_lib.parallel import kvstore as kv


def test_push_sums_a_list_and_pull_returns_a_copy():
    store = kv.KVStore()
    store.init("w", torch.zeros(3))
    store.push("w", [torch.ones(3), 2 * torch.ones(3)])
    value = store.pull("w")
    assert torch.equal(value, torch.full((3,), 3.0))
    value += 100
    assert torch.equal(store.pull("w"), torch.full((3,), 3.0))


def test_push_without_updater_replaces_and_with_updater_updates():
    plain = kv.KVStore()
    plain.init("g", torch.ones(2))
    plain.push("g", torch.full((2,), 5.0))
    assert torch.equal(plain.pull("g"), torch.full((2,), 5.0))
    sgd = kv.KVStore(kv.sgd_updater(0.1))
    sgd.init("w", torch.ones(2))
    sgd.push("w", [torch.ones(2), torch.ones(2)])
    assert torch.allclose(sgd.pull("w"), torch.full((2,), 0.8))


def test_errors_for_unknown_key_and_wrong_shape():
    store = kv.KVStore()
    with pytest.raises(KeyError):
        store.push("missing", torch.ones(1))
    store.init("w", torch.ones(2))
    with pytest.raises(ValueError):
        store.push("w", torch.ones(3))
    with pytest.raises(ValueError):
        store.push("w", [])


def test_byte_counters():
    store = kv.KVStore()
    store.init("w", torch.zeros(4))
    store.push("w", [torch.ones(4), torch.ones(4)])
    store.pull("w")
    assert store.bytes_received == 32 and store.bytes_sent == 16


@pytest.mark.parametrize("servers", [1, 2, 3, 4])
def test_sharded_store_matches_single_store_and_splits_the_load(servers):
    single, sharded = kv.KVStore(kv.sgd_updater(0.5)), kv.ShardedKVStore(servers, kv.sgd_updater(0.5))
    start = torch.arange(10.0).reshape(2, 5)
    grads = [torch.randn(2, 5) for _ in range(3)]
    single.init("w", start)
    sharded.init("w", start)
    single.push("w", grads)
    sharded.push("w", grads)
    assert torch.allclose(single.pull("w"), sharded.pull("w"))
    loads = sharded.bytes_received
    assert sum(loads) == single.bytes_received
    assert max(loads) <= single.bytes_received / servers + 3 * 4 * 1


def test_load_model_is_m_over_n():
    assert kv.server_load_bytes(160e6, 8, 1) == 8 * 160e6
    assert kv.server_load_bytes(160e6, 8, 4) == 2 * 160e6
    assert kv.push_seconds(1e9, 4, 2, 1e9) == 2.0
