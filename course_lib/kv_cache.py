"""The key/value cache of a decoder while it generates (lesson 16).

Generating token ``t`` needs the keys and values of tokens ``0 .. t`` in every layer. Computed
once and kept, they cost memory instead of recomputation:

- :func:`kv_bytes_per_token`: ``2 * layers * kv_heads * head_dim * bytes_per_value`` bytes
  (a key and a value vector per layer and key/value head) for every token a request holds;
- :data:`MODEL_SHAPES`: published shapes, from each model's ``config.json`` on the Hugging Face
  Hub (cited per row), to size real caches: multi-head (MHA, ``kv_heads`` = query heads),
  grouped-query (GQA, a few key/value heads shared by groups of query heads; Ainslie et al.
  2023, "GQA", arXiv:2305.13245) and multi-query attention (MQA, one key/value head; Shazeer
  2019, "Fast Transformer Decoding: One Write-Head is All You Need", arXiv:1911.02150);
- :class:`KVCache`: the cache of :mod:`course_lib.tiny_lm`'s model, one preallocated tensor
  for the keys and one for the values, ``(layers, batch, kv_heads, max_len, head_dim)``, written
  at the positions being generated (the same positions for every sequence of the batch).
"""
from __future__ import annotations

import torch

MODEL_SHAPES = {
    "Llama 2 7B (MHA)": dict(layers=32, heads=32, kv_heads=32, head_dim=128, params=6.74e9,
                             source="meta-llama/Llama-2-7b-hf config.json: num_hidden_layers 32, "
                                    "num_attention_heads 32, num_key_value_heads 32, hidden_size 4096"),
    "Llama 3 8B (GQA)": dict(layers=32, heads=32, kv_heads=8, head_dim=128, params=8.03e9,
                             source="meta-llama/Meta-Llama-3-8B config.json: num_hidden_layers 32, "
                                    "num_attention_heads 32, num_key_value_heads 8, hidden_size 4096"),
    "Llama 3 70B (GQA)": dict(layers=80, heads=64, kv_heads=8, head_dim=128, params=70.6e9,
                              source="meta-llama/Meta-Llama-3-70B config.json: num_hidden_layers 80, "
                                     "num_attention_heads 64, num_key_value_heads 8, hidden_size 8192"),
    "Falcon 7B (MQA)": dict(layers=32, heads=71, kv_heads=1, head_dim=64, params=7.2e9,
                            source="tiiuae/falcon-7b config.json: n_layer 32, n_head 71, multi_query true, "
                                   "hidden_size 4544"),
}
"""Published model shapes: layers, query heads, key/value heads, features per head, parameters."""


def kv_bytes_per_token(layers: int, kv_heads: int, head_dim: int, bytes_per_value: float = 2) -> float:
    """Bytes of cache one token holds: a key and a value vector of ``kv_heads * head_dim``
    numbers in each of ``layers`` layers, ``bytes_per_value`` bytes each (2 in bf16)."""
    return 2 * layers * kv_heads * head_dim * bytes_per_value


class KVCache:
    """Keys and values of ``layers`` layers for ``batch`` sequences of up to ``max_len`` tokens.

    ``k`` and ``v`` are ``(layers, batch, kv_heads, max_len, head_dim)`` tensors of zeros;
    :meth:`write` stores a layer's new keys and values at positions ``start .. start + s - 1``
    and returns that layer's keys and values for positions ``0 .. start + s - 1`` (what the
    attention of those new tokens reads). ``length`` is the number of positions written.
    """

    def __init__(self, layers: int, batch: int, kv_heads: int, max_len: int, head_dim: int,
                 dtype=torch.float32, device="cpu"):
        shape = (layers, batch, kv_heads, max_len, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.length = 0

    def write(self, layer: int, start: int, k: torch.Tensor, v: torch.Tensor):
        """Store ``k`` and ``v`` (``(batch, kv_heads, s, head_dim)``) at ``start ..``; return the
        layer's keys and values of positions ``0 .. start + s - 1``."""
        end = start + k.shape[2]
        if end > self.k.shape[3]:
            raise ValueError(f"the cache holds {self.k.shape[3]} positions; writing up to {end}")
        self.k[layer, :, :, start:end] = k
        self.v[layer, :, :, start:end] = v
        self.length = max(self.length, end)
        return self.k[layer, :, :, :end], self.v[layer, :, :, :end]

    def nbytes(self) -> int:
        """Bytes of both tensors (allocated, written or not)."""
        return self.k.numel() * self.k.element_size() * 2
