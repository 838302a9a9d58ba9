# format: edits
"""Plausible wrong answers for lesson 16's serving exercises; each must lose points.

Each wrong answer is the edit it makes to the reference solution cell (the cell with its
``### BEGIN/END SOLUTION`` lines removed): ``(old, new)`` replaces the one occurrence of
``old``; a list of pairs makes several edits in order. The comment above says the mistake.
KV sizing mistakes fail the published configs (Llama 2's config has no num_key_value_heads, one
config names its head_dim); the decode step's mistakes fail against full forward passes of
lesson 16's model (logits and the cache's every slot), on GQA and on sequences at different
positions (one at position 0, which has nothing cached); a loop that recomputes the prefix breaks
the budget on rows through the query projections; the allocator's mistakes fail the transition
rules judged from snapshots (a freed block still in a table, a shared block written in place,
counts that drift); the scheduler's fail exact steps and the budget on a simulated trace; the
verify step's fail exact outputs and the distribution of the emitted tokens.

``LIBRARY_CALLS`` holds, per solution cell, the answer of a student who leans on the library:
the KV bytes from ``kv_cache.kv_bytes_per_token`` reading keys that some configs lack; the
decode step through ``TinyLM.forward`` with a ``KVCache`` around the given tensors (one start
position for the whole batch); the lecture's ``PagedKVCache`` (copies at fork) behind the
exercise's method names; the lecture's reserving scheduler; the sampled verify through the
greedy rule on the target's probabilities.
"""

WRONG_ANSWERS = {
    'ex1_kv_sizing': [
        # keys only: the factor 2 for the values forgotten
        ('    return 2 * config["num_hidden_layers"] * kv_heads', '    return config["num_hidden_layers"] * kv_heads'),
        # the query heads instead of the key/value heads (GQA's saving lost)
        ('    kv_heads = config.get("num_key_value_heads", heads)', '    kv_heads = heads'),
        # head_dim always from hidden_size / heads, even where the config names another
        ('    head_dim = config.get("head_dim", config["hidden_size"] // heads)',
         '    head_dim = config["hidden_size"] // heads'),
        # the context without rounding up to whole blocks
        ('    blocks = -(-context // block_size)', '    blocks = context / block_size'),
        # the weights not subtracted
        ('    room = gpu_bytes - weight_bytes', '    room = gpu_bytes'),
        # rounded to the nearest instead of down
        ('    return max(0, int(room // per_request))', '    return max(0, round(room / per_request))'),
    ],
    'ex2_decode': [
        # attention reads the cache before the new token is appended: it does not see itself (and a
        # sequence at position 0 sees nothing at all)
        ('visible = torch.arange(cache_k.shape[3])[None, :] <= positions[:, None]',
         'visible = torch.arange(cache_k.shape[3])[None, :] < positions[:, None]'),
        # position off by one: the new key written one slot too far (and read there)
        [('        cache_k[layer, rows, :, positions] = k[:, :, 0]\n'
          '        cache_v[layer, rows, :, positions] = v[:, :, 0]\n',
          '        cache_k[layer, rows, :, positions + 1] = k[:, :, 0]\n'
          '        cache_v[layer, rows, :, positions + 1] = v[:, :, 0]\n'),
         ('<= positions[:, None]', '<= positions[:, None] + 1')],
        # the position embedding of the next position
        ('x = model.embed(tokens, positions)[:, None, :]', 'x = model.embed(tokens, positions + 1)[:, None, :]'),
        # one mask for the batch, up to its furthest sequence: shorter ones read empty slots
        ('<= positions[:, None]', '<= positions.max()'),
        # key/value heads repeated in the wrong order (query head h reads h % kv_heads)
        [('keys = cache_k[layer].repeat_interleave(group, dim=1)', 'keys = cache_k[layer].repeat(1, group, 1, 1)'),
         ('values = cache_v[layer].repeat_interleave(group, dim=1)', 'values = cache_v[layer].repeat(1, group, 1, 1)')],
        # the loop starts generating one step late: the first new token comes from the prompt's last but one
        ('            if t == len(s) - 1 and len(s) < len(prompts[i]) + n_new:',
         '            if t == len(s) and len(s) < len(prompts[i]) + n_new:'),
        # no cache reused: each step runs the whole sequence so far (right tokens, over the rows budget)
        [('        logits = decode_step(model, tokens, torch.full((b,), t), cache_k, cache_v)\n',
          '        logits = torch.stack([model(torch.tensor([s[:t + 1] if t < len(s) else s + [0]]))[0, -1]'
          ' for s in seqs])\n')],
    ],
    'ex3_allocator': [
        # free returns every block of the sequence, shared or not: a freed block still in a fork's table
        ('            self.refcount[block] -= 1\n            if self.refcount[block] == 0:\n'
         '                self.free_blocks.append(block)\n',
         '            self.refcount[block] = 0\n            self.free_blocks.append(block)\n'),
        # no copy-on-write: a shared partial block written in place
        ('        shared = not full and self.refcount[table[-1]] > 1', '        shared = False'),
        # the copy made, but the old block's count not dropped
        ('                self.refcount[copied_from] -= 1\n', ''),
        # fork copies the parent's blocks at once instead of sharing them
        ('        for block in self.tables[child]:\n            self.refcount[block] += 1\n',
         '        fresh = sorted(self.free_blocks)[:len(self.tables[parent])]\n'
         '        for block in fresh:\n            self.free_blocks.remove(block)\n'
         '            self.refcount[block] = 1\n'
         '        self.tables[child] = fresh\n'),
        # the highest-numbered free block taken
        ('            block = min(self.free_blocks)', '            block = max(self.free_blocks)'),
        # MemoryError raised after the length has grown
        ('        table, length = self.tables[seq], self.lengths[seq]\n',
         '        table, length = self.tables[seq], self.lengths[seq]\n        self.lengths[seq] = length + 1\n'),
    ],
    'ex4_schedule': [
        # admits past the budget: the token each running request writes this step not counted
        [('    need = sum(tokens + 1 for _, tokens in running)\n', '    need = sum(tokens for _, tokens in running)\n'),
         ('    while waiting and need + waiting[0][1] + 1 <= budget:\n        need += waiting[0][1] + 1\n',
          '    while waiting and need + waiting[0][1] <= budget:\n        need += waiting[0][1]\n')],
        # no eviction: running requests that outgrow the budget stay
        ('    while running and sum(tokens + 1 for _, tokens in running) > budget:\n'
         '        waiting.insert(0, running.pop())\n', ''),
        # evicts the oldest request instead of the newest
        ('        waiting.insert(0, running.pop())', '        waiting.insert(0, running.pop(0))'),
        # overtaking: every waiting request that fits is admitted, in any place in the queue
        ('    while waiting and need + waiting[0][1] + 1 <= budget:\n        need += waiting[0][1] + 1\n'
         '        running.append(waiting.pop(0))\n',
         '    for r in list(waiting):\n        if need + r[1] + 1 <= budget:\n            need += r[1] + 1\n'
         '            running.append(r)\n            waiting.remove(r)\n'),
        # the evicted request sent to the back of the queue
        ('        waiting.insert(0, running.pop())', '        waiting.append(running.pop())'),
    ],
    'ex5_verify': [
        # greedy: each draft token compared with the next row's argmax (accepts tokens the target would not produce)
        ('        if token != wanted[i]:', '        if token != wanted[min(i + 1, len(draft_tokens))]:'),
        # greedy: on a mismatch the draft's token is emitted instead of the target's
        ('            return out + [int(wanted[i])]', '            return out + [int(token)]'),
        # greedy: no token of the target's after all were accepted
        ('    return out + [int(wanted[len(draft_tokens)])]', '    return out'),
        # sampled: the ratio upside down (q / p)
        ('        if uniforms[i] < p[i, x] / q[i, x]:', '        if uniforms[i] < q[i, x] / p[i, x]:'),
        # sampled: on rejection the token drawn from p, not from the residual max(0, p - q)
        ('        return out + [draw(np.maximum(p[i] - q[i], 0.0))]', '        return out + [draw(p[i])]'),
        # sampled: every draft token accepted (the draft's tokens emitted as they are)
        ('        if uniforms[i] < p[i, x] / q[i, x]:', '        if True:'),
    ],
}

LIBRARY_CALLS = {
    'ex1_kv_sizing': [
        ('    heads = config["num_attention_heads"]\n    kv_heads = config.get("num_key_value_heads", heads)\n'
         '    head_dim = config.get("head_dim", config["hidden_size"] // heads)\n'
         '    return 2 * config["num_hidden_layers"] * kv_heads * head_dim * bytes_per_value\n',
         '    from course_lib import kv_cache\n'
         '    layers, kv_heads = config["num_hidden_layers"], config["num_key_value_heads"]\n'
         '    head_dim = config["hidden_size"] // config["num_attention_heads"]\n'
         '    return kv_cache.kv_bytes_per_token(layers, kv_heads, head_dim, bytes_per_value)\n'),
    ],
    'ex2_decode': [
        ('    b = tokens.shape[0]\n',
         '    from course_lib.kv_cache import KVCache\n'
         '    cache = KVCache(1, 1, 1, 1, 1)\n'
         '    cache.k, cache.v = cache_k, cache_v\n'
         '    return model(tokens[:, None], cache, int(positions.max()))[:, -1]\n'
         '    b = tokens.shape[0]\n'),
    ],
    'ex3_allocator': [
        ('    def allocate(self, seq):\n',
          '    def _lib(self):\n'
          '        from course_lib.paged_kv import PagedKVCache\n'
          '        if not hasattr(self, "lib"):\n'
          '            self.lib = PagedKVCache(len(self.refcount), self.block_size)\n'
          '        return self.lib\n\n'
          '    def _sync(self):\n'
          '        lib = self._lib()\n'
          '        self.tables, self.lengths = lib.tables, lib.lengths\n'
          '        self.refcount, self.free_blocks = lib.refcount, lib.free_blocks\n\n'
          '    def allocate(self, seq):\n'
          '        self._lib().add(seq)\n'
          '        return self._sync()\n\n'
          '    def fork(self, parent, child):\n'
          '        self._lib().fork(parent, child)\n'
          '        return self._sync()\n\n'
          '    def append(self, seq):\n'
          '        lib = self._lib()\n'
          '        lib.extend(seq)\n'
          '        self._sync()\n'
          '        return (*lib.slot(seq, lib.lengths[seq] - 1), None)\n\n'
          '    def free(self, seq):\n'
          '        self._lib().release(seq)\n'
          '        return self._sync()\n\n'
          '    def _unused_allocate(self, seq):\n'),
         ('    def fork(self, parent, child):\n        self.tables[child] = list(self.tables[parent])',
          '    def _unused_fork(self, parent, child):\n        self.tables[child] = list(self.tables[parent])'),
         ('    def append(self, seq):\n        table, length',
          '    def _unused_append(self, seq):\n        table, length'),
         ('    def free(self, seq):\n        for block', '    def _unused_free(self, seq):\n        for block'),
    ],
    'ex4_schedule': [
        ('    running = [list(r) for r in running]\n    waiting = [list(r) for r in waiting]\n',
         '    return serving_sim.reserving_scheduler(48)(running, waiting, budget)\n'),
    ],
    'ex5_verify': [
        ('    p, q = np.asarray(target_probs, dtype=float), np.asarray(draft_probs, dtype=float)\n',
         '    return verify_greedy(draft_tokens, np.log(np.asarray(target_probs) + 1e-12))\n'),
    ],
}
