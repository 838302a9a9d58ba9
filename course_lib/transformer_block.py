"""A small transformer block, and what one layer costs (lessons 12 and 13).

:class:`TransformerBlock` is the pre-norm block of GPT-style models: causal multi-head
self-attention, then a two-layer MLP, each behind a LayerNorm and added to the residual
stream. It is written out with plain ``nn.Linear`` layers (separate query, key and value
projections, attention as two matrix products and a softmax) so that each piece can be split
over ranks in lesson 13 and each saved tensor can be named.

For one block of width ``d`` (``d_model``), ``h`` heads, MLP width ``f`` (``d_ff``), on a
batch of ``b`` sequences of ``s`` tokens, the functions below count

- :func:`parameter_count`: ``4 d^2 + 4 d`` (attention) ``+ 2 d f + f + d`` (MLP) ``+ 4 d``
  (two LayerNorms), in parameters;
- :func:`flops_per_token`: the multiply-adds of the matrix products, 2 FLOPs each:
  ``8 d^2`` (query, key, value, output projections) ``+ 4 d f`` (MLP) ``+ 4 s d`` (scores
  and the weighted sum of values over ``s`` positions), in FLOPs per token of one forward
  pass; the backward pass costs twice that (Kaplan et al. 2020, "Scaling Laws for Neural
  Language Models", arXiv:2001.08361, section 2.1: about ``6 N`` FLOPs per token to train);
- :func:`activation_bytes_per_layer`: the bytes autograd keeps for the backward pass, split
  by what tensor parallelism divides and what it replicates;
- :func:`kv_cache_bytes_per_layer`: the keys and values inference keeps per layer.

They are checked against the module itself in ``tests/lib/test_transformer_block.py``
(``torch.utils.flop_counter.FlopCounterMode`` for FLOPs, autograd's saved tensors for bytes).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

LAYERNORM_STAT_BYTES = 4
"""Bytes of each saved LayerNorm statistic (mean and 1/std per token, kept in float32)."""


class TransformerBlock(nn.Module):
    """Pre-norm transformer block: ``x + attention(LN(x))``, then ``+ MLP(LN(.))``.

    ``d_model`` features per token, ``n_heads`` heads of ``d_model // n_heads`` features,
    an MLP of width ``d_ff`` (4 ``d_model`` unless given) with GELU. Input and output are
    ``(batch, seq_len, d_model)``. The forward pass infers the number of heads from the width
    of the query projection, so a copy whose projections hold only some heads' rows (tensor
    parallelism, lesson 13) runs as it is.
    """

    def __init__(self, d_model: int = 64, n_heads: int = 4, d_ff: int | None = None, causal: bool = True):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) must be a multiple of n_heads ({n_heads})")
        self.head_dim = d_model // n_heads
        self.causal = causal
        d_ff = 4 * d_model if d_ff is None else d_ff
        self.ln1 = nn.LayerNorm(d_model)
        self.q, self.k, self.v = (nn.Linear(d_model, d_model) for _ in range(3))
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)

    def heads(self, x: torch.Tensor) -> torch.Tensor:
        """``(b, s, heads x head_dim)`` -> ``(b, heads, s, head_dim)``."""
        b, s, _ = x.shape
        return x.view(b, s, -1, self.head_dim).transpose(1, 2)

    def attention(self, h: torch.Tensor) -> torch.Tensor:
        """Multi-head self-attention of the normalised input ``h``, before the output
        projection: ``(b, s, heads x head_dim)``."""
        b, s, _ = h.shape
        q = self.heads(self.q(h)) * (1.0 / math.sqrt(self.head_dim))
        k, v = self.heads(self.k(h)), self.heads(self.v(h))
        scores = q @ k.transpose(-2, -1)
        if self.causal:
            future = torch.ones(s, s, dtype=torch.bool, device=h.device).triu(1)
            scores = scores.masked_fill(future, float("-inf"))
        return (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, -1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.proj(self.attention(self.ln1(x)))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def parameter_count(d_model: int, d_ff: int | None = None, layers: int = 1) -> int:
    """Parameters of ``layers`` blocks (weights and biases): ``4 d^2 + 4 d`` for the four
    attention projections, ``2 d f + f + d`` for the MLP, ``4 d`` for the two LayerNorms.
    Embeddings are not counted."""
    f = 4 * d_model if d_ff is None else d_ff
    per_block = 4 * d_model * d_model + 4 * d_model + 2 * d_model * f + f + d_model + 4 * d_model
    return layers * per_block


def flops_per_token(d_model: int, seq_len: int, d_ff: int | None = None, backward: bool = False) -> int:
    """FLOPs of the matrix products of one block for one token of a sequence of ``seq_len``
    tokens (2 FLOPs per multiply-add): ``8 d^2 + 4 d f + 4 s d`` for the forward pass; with
    ``backward=True`` three times that (the backward pass computes two products per forward
    product: the gradients of the input and of the weight). Softmax, GELU, LayerNorm and the
    residual additions are left out (a few FLOPs per element, not per multiply-add)."""
    f = 4 * d_model if d_ff is None else d_ff
    forward = 8 * d_model * d_model + 4 * d_model * f + 4 * seq_len * d_model
    return 3 * forward if backward else forward


def activation_bytes_per_layer(batch: int, seq_len: int, d_model: int, n_heads: int,
                               d_ff: int | None = None, bytes_per_value: int = 4,
                               tensor_parallel: int = 1, causal: bool = True) -> dict:
    """Bytes one block keeps for its backward pass, on one of ``tensor_parallel`` ranks
    (Megatron split: query/key/value and ``fc1`` by columns, ``proj`` and ``fc2`` by rows).

    With ``b`` = batch, ``s`` = seq_len, ``d`` = d_model, ``f`` = d_ff, ``a`` = n_heads, ``t`` =
    tensor_parallel, ``v`` = bytes_per_value, the dict holds (in bytes):

    - ``replicated``: ``4 b s d v``, the inputs of the two LayerNorms and of the layers after
      them (every rank holds them whole);
    - ``split``: ``(4 b s d + 2 b s f + a b s^2) v / t``, the queries, keys, values, the
      attention's output, both MLP activations (before and after GELU) and the ``a`` softmax
      matrices of ``s x s``: the only term quadratic in the sequence length;
    - ``layernorm_stats``: ``4 b s`` float32 values (mean and 1/std per token, two norms);
    - ``mask``: ``s^2`` bytes of the causal mask (0 without ``causal``);
    - ``total``: their sum.

    With 16-bit values and ``f = 4 d`` the first two are ``s b d (32 + 2 a s / d)`` bytes on one
    rank: the ``34 + 5 a s / h`` of Korthikanti et al. 2022 ("Reducing Activation Recomputation
    in Large Transformer Models", arXiv:2205.05198, section 4) less the dropout masks and
    outputs this block does not have.
    """
    f = 4 * d_model if d_ff is None else d_ff
    b, s, d, v, t = batch, seq_len, d_model, bytes_per_value, tensor_parallel
    if n_heads % t:
        raise ValueError(f"{n_heads} heads do not split evenly over {t} ranks")
    replicated = 4 * b * s * d * v
    split = (4 * b * s * d + 2 * b * s * f + n_heads * b * s * s) * v // t
    stats = 4 * b * s * LAYERNORM_STAT_BYTES
    mask = s * s if causal else 0
    return {"replicated": replicated, "split": split, "layernorm_stats": stats, "mask": mask,
            "total": replicated + split + stats + mask}


def kv_cache_bytes_per_layer(batch: int, seq_len: int, d_model: int, bytes_per_value: int = 2) -> int:
    """Bytes of the key and value cache of one layer during generation: ``2 b s d v`` (a key
    and a value vector of ``d`` features for each of the ``s`` tokens so far, in each of
    ``b`` sequences). Multi-query and grouped-query attention shrink it by sharing keys and
    values between heads; this is plain multi-head attention."""
    return 2 * batch * seq_len * d_model * bytes_per_value


def make_block(d_model: int = 64, n_heads: int = 4, d_ff: int | None = None, seed: int = 0,
               causal: bool = True) -> TransformerBlock:
    """A :class:`TransformerBlock` with the same weights for the same ``seed`` (every rank of
    a tensor-parallel run builds the same one)."""
    torch.manual_seed(seed)
    return TransformerBlock(d_model, n_heads, d_ff, causal)
