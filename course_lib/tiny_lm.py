"""A small decoder-only language model, and generation with and without a KV cache (lesson 16).

:class:`TinyLM` is GPT-shaped: token and learned position embeddings, ``layers`` pre-norm
blocks (causal self-attention with grouped-query heads, then a GELU MLP), a final LayerNorm
and a linear head onto the vocabulary. ``kv_heads`` key/value heads are shared by the query
heads in groups of ``heads // kv_heads`` (``kv_heads = heads``: multi-head; 1: multi-query).

:func:`generate` runs greedy or sampled decoding two ways: without a cache, every step runs
the whole sequence so far through the model (step ``t`` costs about ``t`` tokens of work);
with a :class:`course_lib.kv_cache.KVCache`, the prompt runs once (the *prefill*) and each
later step runs one token per sequence (the *decode*), reading the cached keys and values.
Both give the same tokens. :func:`seconds_per_token` times each step (seconds, on the
model's device).
"""
from __future__ import annotations

import math
import time

import torch
import torch.nn.functional as F
from torch import nn

from .kv_cache import KVCache


def expand_kv(x: torch.Tensor, group: int) -> torch.Tensor:
    """Keys or values ``(b, kv_heads, s, d)`` repeated for the query heads ``(b, kv_heads *
    group, s, d)``: query head ``h`` reads key/value head ``h // group``."""
    return x if group == 1 else x.repeat_interleave(group, dim=1)


class Block(nn.Module):
    """Pre-norm block: ``x + proj(attention(ln1(x)))``, then ``+ fc2(gelu(fc1(ln2(.))))``."""

    def __init__(self, d_model: int, heads: int, kv_heads: int):
        super().__init__()
        if d_model % heads or heads % kv_heads:
            raise ValueError(f"d_model {d_model}, heads {heads}, kv_heads {kv_heads}: must divide")
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, d_model // heads
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.q = nn.Linear(d_model, d_model)
        self.k = nn.Linear(d_model, kv_heads * self.head_dim)
        self.v = nn.Linear(d_model, kv_heads * self.head_dim)
        self.proj = nn.Linear(d_model, d_model)
        self.fc1, self.fc2 = nn.Linear(d_model, 4 * d_model), nn.Linear(4 * d_model, d_model)

    def qkv(self, h: torch.Tensor):
        """Queries ``(b, heads, s, head_dim)`` (already scaled by ``1/sqrt(head_dim)``), keys
        and values ``(b, kv_heads, s, head_dim)`` of the normalised input ``h`` ``(b, s, d)``."""
        b, s, _ = h.shape
        q = self.q(h).view(b, s, self.heads, self.head_dim).transpose(1, 2) / math.sqrt(self.head_dim)
        k = self.k(h).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v(h).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        return q, k, v

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        """The MLP branch of ``x`` (its LayerNorm included), to add to the residual stream."""
        return self.fc2(F.gelu(self.fc1(self.ln2(x))))

    def forward(self, x: torch.Tensor, cache: KVCache | None = None, layer: int = 0, start: int = 0):
        """``x`` ``(b, s, d)`` holds positions ``start .. start + s - 1``; with a cache, keys and
        values of the earlier positions come from it and the new ones are written to it."""
        q, k, v = self.qkv(self.ln1(x))
        if cache is not None:
            k, v = cache.write(layer, start, k, v)
        group = self.heads // self.kv_heads
        scores = q @ expand_kv(k, group).transpose(-2, -1)
        s, total = q.shape[2], k.shape[2]
        rows = torch.arange(start, start + s, device=x.device)
        future = torch.arange(total, device=x.device)[None, :] > rows[:, None]
        attn = scores.masked_fill(future, float("-inf")).softmax(-1) @ expand_kv(v, group)
        x = x + self.proj(attn.transpose(1, 2).reshape(x.shape))
        return x + self.mlp(x)


class TinyLM(nn.Module):
    """Token and position embeddings, ``layers`` :class:`Block`, final LayerNorm, head."""

    def __init__(self, vocab: int = 64, d_model: int = 64, heads: int = 4, kv_heads: int = 2,
                 layers: int = 4, max_len: int = 256):
        super().__init__()
        self.vocab, self.max_len = vocab, max_len
        self.tok, self.pos = nn.Embedding(vocab, d_model), nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList(Block(d_model, heads, kv_heads) for _ in range(layers))
        self.ln_f, self.head = nn.LayerNorm(d_model), nn.Linear(d_model, vocab)

    def embed(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Token plus position embeddings: ``tokens`` and ``positions`` integer tensors of one
        shape, ``(..., d_model)`` out."""
        return self.tok(tokens) + self.pos(positions)

    def forward(self, tokens: torch.Tensor, cache: KVCache | None = None, start: int = 0) -> torch.Tensor:
        """Logits ``(b, s, vocab)`` of ``tokens`` ``(b, s)`` at positions ``start ..``."""
        positions = torch.arange(start, start + tokens.shape[1], device=tokens.device)
        x = self.embed(tokens, positions.expand_as(tokens))
        for i, block in enumerate(self.blocks):
            x = block(x, cache, i, start)
        return self.head(self.ln_f(x))

    @torch.no_grad()
    def keys_values(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Every layer's keys and values of ``tokens`` ``(b, s)``, computed without a cache:
        two ``(layers, b, kv_heads, s, head_dim)`` tensors."""
        cache = self.new_cache(tokens.shape[0], tokens.shape[1])
        self(tokens, cache)
        return cache.k, cache.v

    def new_cache(self, batch: int, max_len: int | None = None) -> KVCache:
        """An empty cache for ``batch`` sequences of up to ``max_len`` tokens (``self.max_len``)."""
        block = self.blocks[0]
        w = block.q.weight
        return KVCache(len(self.blocks), batch, block.kv_heads, max_len or self.max_len, block.head_dim,
                       dtype=w.dtype, device=w.device)


def make_lm(seed: int = 0, **shape) -> TinyLM:
    """A :class:`TinyLM` of ``shape`` (its keyword arguments) with the weights ``seed`` gives,
    in evaluation mode."""
    torch.manual_seed(seed)
    return TinyLM(**shape).eval()


def draft_of(model: TinyLM, layers: int) -> TinyLM:
    """A draft model for speculative decoding: the first ``layers`` blocks of ``model`` with its
    embeddings, final norm and head (shared, not copied): fewer layers, cheaper steps."""
    draft = TinyLM.__new__(TinyLM)
    nn.Module.__init__(draft)
    draft.vocab, draft.max_len = model.vocab, model.max_len
    draft.tok, draft.pos, draft.ln_f, draft.head = model.tok, model.pos, model.ln_f, model.head
    draft.blocks = nn.ModuleList(list(model.blocks)[:layers])
    return draft.eval()


def _next(logits: torch.Tensor, temperature: float | None, generator) -> torch.Tensor:
    """Greedy (``temperature`` None) or sampled next tokens ``(b,)`` from logits ``(b, vocab)``."""
    if temperature is None:
        return logits.argmax(-1)
    probs = (logits / temperature).softmax(-1)
    return torch.multinomial(probs, 1, generator=generator)[:, 0]


@torch.no_grad()
def generate(model: TinyLM, prompt: torch.Tensor, n_new: int, cache: bool = True,
             temperature: float | None = None, generator: torch.Generator | None = None,
             on_step=None) -> torch.Tensor:
    """``n_new`` tokens after ``prompt`` ``(b, s)`` (all prompts of one length), ``(b, n_new)``.

    ``cache=False`` runs the whole sequence through the model at every step; ``cache=True``
    runs the prompt once, then one token per step. ``temperature`` None is greedy; otherwise
    tokens are drawn from ``softmax(logits / temperature)`` with ``generator``. ``on_step``,
    if given, is called after each new token (for timing)."""
    seq, kv = prompt, (model.new_cache(prompt.shape[0], prompt.shape[1] + n_new) if cache else None)
    logits = model(prompt, kv)[:, -1]
    out = []
    for step in range(n_new):
        token = _next(logits, temperature, generator)
        out.append(token)
        if on_step is not None:
            on_step(step)
        if step == n_new - 1:
            break
        seq = torch.cat([seq, token[:, None]], dim=1)
        logits = (model(token[:, None], kv, seq.shape[1] - 1) if cache else model(seq))[:, -1]
    return torch.stack(out, dim=1)


def seconds_per_token(model: TinyLM, prompt: torch.Tensor, n_new: int, cache: bool) -> list[float]:
    """Wall-clock seconds of each of ``n_new`` greedy steps (the first includes the prefill),
    synchronised on a GPU (``torch.cuda.synchronize``) before each clock reading."""
    device = prompt.device
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    stamps = []

    def tick(_step):
        sync()
        stamps.append(time.perf_counter())

    sync()
    t0 = time.perf_counter()
    generate(model, prompt, n_new, cache=cache, on_step=tick)
    return [b - a for a, b in zip([t0] + stamps[:-1], stamps)]


def cost_shape(model: TinyLM, bytes_per_value: float | None = None):
    """The model as an :class:`course_lib.inference_cost.Shape`: its parameters (embeddings
    included: the head reads its whole weight every step), layers, heads, key/value heads and
    features per head; ``bytes_per_value`` defaults to the weights' element size."""
    from .inference_cost import Shape

    block = model.blocks[0]
    w = block.q.weight
    params = sum(p.numel() for p in model.parameters())
    return Shape(params, len(model.blocks), block.heads, block.kv_heads, block.head_dim,
                 bytes_per_value or w.element_size())


@torch.no_grad()
def decode_tokens_per_second(model: TinyLM, batch: int, context: int, steps: int = 16, warmup: int = 3) -> float:
    """Decode throughput, tokens per second: ``batch`` sequences whose cache already holds
    ``context`` tokens (a random prompt, prefilled untimed) each make ``steps`` one-token steps;
    the clock runs over the steps only, after ``warmup`` untimed steps, synchronised on a GPU."""
    w = model.blocks[0].q.weight
    sync = torch.cuda.synchronize if w.device.type == "cuda" else (lambda: None)
    cache = model.new_cache(batch, context + warmup + steps)
    gen = torch.Generator(device="cpu").manual_seed(0)
    prompt = torch.randint(0, model.vocab, (batch, context), generator=gen).to(w.device)
    token = model(prompt, cache)[:, -1].argmax(-1)
    position = context
    for _ in range(warmup):
        token = model(token[:, None], cache, position)[:, -1].argmax(-1)
        position += 1
    sync()
    start = time.perf_counter()
    for _ in range(steps):
        token = model(token[:, None], cache, position)[:, -1].argmax(-1)
        position += 1
    sync()
    return batch * steps / (time.perf_counter() - start)
