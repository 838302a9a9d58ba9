# format: edits
"""Plausible wrong answers for lesson 17's exercises, as edits of the reference solutions;
each must lose points.

The issue also asked for "a router whose capacity counts dropped tokens". With one counter per
expert, counting an assignment that was dropped changes nothing: the counter only reaches the
capacity once, and every later assignment to that expert is dropped either way. The counting
mistakes that do change the kept set are stored instead (the capacity without k, rounded down).
"""

WRONG_ANSWERS = {
    "ex1_route": [
        # tokens served in position order (GShard / Switch), not by decreasing confidence
        ("    priority = torch.argsort(gates[:, 0], descending=True, stable=True).tolist()",
         "    priority = list(range(n_tokens))"),
        # token-major: a token's second choice before the next token's first
        ("    for choice in range(k):\n        for t in priority:\n            e = int(experts[t, choice])",
         "    for t in priority:\n        for choice in range(k):\n            e = int(experts[t, choice])"),
        # the capacity rounded down
        ("capacity = math.ceil(capacity_factor * k * n_tokens / n_experts)",
         "capacity = math.floor(capacity_factor * k * n_tokens / n_experts)"),
        # the capacity forgets that each token makes k assignments
        ("capacity = math.ceil(capacity_factor * k * n_tokens / n_experts)",
         "capacity = math.ceil(capacity_factor * n_tokens / n_experts)"),
        # the gates renormalized over the k chosen experts (softmax of the top-k logits)
        ("    gates, experts = probs.topk(k, dim=-1)",
         "    gates, experts = probs.topk(k, dim=-1)\n    gates = gates / gates.sum(-1, keepdim=True)"),
    ],
    "ex1_balancing_loss": [
        # P from the chosen experts' gates only, not every expert's probability
        ("    return alpha * n_experts * (f * probs.mean(0)).sum()",
         "    gated = torch.zeros_like(probs).scatter(1, chosen, probs.gather(1, chosen))\n"
         "    return alpha * n_experts * (f * gated.mean(0)).sum()"),
        # f over tokens instead of over the T * k assignments (k times too large)
        ("/ (n_tokens * k)", "/ n_tokens"),
        # f replaced by the soft probabilities: differentiable, and not the fraction routed
        ("    return alpha * n_experts * (f * probs.mean(0)).sum()",
         "    return alpha * n_experts * (probs.mean(0) * probs.mean(0)).sum()"),
        # the factor E forgotten
        ("    return alpha * n_experts * (f * probs.mean(0)).sum()", "    return alpha * (f * probs.mean(0)).sum()"),
    ],
    "ex2_dispatch": [
        # every token all-gathered to every rank, each rank's experts applied to all, the outputs
        # summed by an all-reduce: right output, far more bytes than the kept assignments need
        ("    world, rank = dist.get_world_size(), dist.get_rank()\n",
         "    world, rank = dist.get_world_size(), dist.get_rank()\n"
         "    per_rank = local_weights.shape[0]\n"
         "    parts = {}\n"
         "    for name, t in (('x', x), ('e', experts), ('g', gates), ('k', kept.long())):\n"
         "        gathered = [torch.empty_like(t) for _ in range(world)]\n"
         "        dist.all_gather(gathered, t)\n"
         "        parts[name] = torch.cat(gathered)\n"
         "    full = torch.zeros_like(parts['x'])\n"
         "    for local in range(per_rank):\n"
         "        mine = (parts['e'] == rank * per_rank + local) & (parts['k'] == 1)\n"
         "        token, choice = mine.nonzero(as_tuple=True)\n"
         "        full.index_add_(0, token, parts['g'][token, choice, None]\n"
         "                        * torch.tanh(parts['x'][token] @ local_weights[local]))\n"
         "    dist.all_reduce(full)\n"
         "    return full[rank * x.shape[0]:(rank + 1) * x.shape[0]]\n"),
        # the outputs added without their gates
        ("    y.index_add_(0, token, gates[token, choice, None] * returned)", "    y.index_add_(0, token, returned)"),
        # dropped assignments sent and counted as well
        ("    token, choice = kept.nonzero(as_tuple=True)",
         "    token, choice = torch.ones_like(kept).nonzero(as_tuple=True)"),
        # the received rows read expert by expert, though they arrive grouped by source rank first
        ("    for source in range(world):\n        for local in range(per_rank):\n",
         "    for local in range(per_rank):\n        for source in range(world):\n"),
    ],
    "ex3_ring": [
        # states merged without rescaling to the new maximum
        ("            l = l * rescale + p.sum(-1)\n            o = o * rescale[..., None] + p @ kv[1]",
         "            l = l + p.sum(-1)\n            o = o + p @ kv[1]"),
        # the causal mask at the wrong chunk offsets: every visible chunk masked as if it were the diagonal
        ("            if causal and source == rank:", "            if causal and source <= rank:"),
        # the causal test reversed: the chunks after mine are seen, those before skipped
        ("        if not (causal and source > rank):", "        if not (causal and source < rank):"),
        # the running sum rescaled, the output forgotten
        ("            o = o * rescale[..., None] + p @ kv[1]", "            o = o + p @ kv[1]"),
    ],
    "ex4_balanced": [
        # contiguous chunks: the last rank does most of the causal work
        ("    size = n // (2 * world)\n    owner = torch.empty(n, dtype=torch.long)\n    for r in range(world):\n"
         "        owner[r * size:(r + 1) * size] = r\n"
         "        owner[(2 * world - 1 - r) * size:(2 * world - r) * size] = r",
         "    owner = torch.arange(n) // (n // world)"),
        # the second chunk from the same end: chunks r and world + r
        ("        owner[(2 * world - 1 - r) * size:(2 * world - r) * size] = r",
         "        owner[(world + r) * size:(world + r + 1) * size] = r"),
        # the mirror off by one: chunks r and 2 world - 2 - r overlap the next rank's
        ("        owner[(2 * world - 1 - r) * size:(2 * world - r) * size] = r",
         "        owner[(2 * world - 2 - r) * size:(2 * world - 1 - r) * size] = r"),
    ],
}

LIBRARY_CALLS = {
    # course_lib.moe.top_k_route: the capacity, but tokens served in position order
    "ex1_route": ("    import math\n    n_tokens, n_experts = logits.shape",
                  "    from course_lib.moe import top_k_route\n"
                  "    routing = top_k_route(logits, k, capacity_factor)\n"
                  "    return routing.experts, routing.gates, routing.kept\n"
                  "    import math\n    n_tokens, n_experts = logits.shape"),
    # course_lib.moe.switch_balancing_loss: Switch's top-1 form
    "ex1_balancing_loss": ("    n_tokens, n_experts = logits.shape\n",
                           "    from course_lib.moe import switch_balancing_loss\n"
                           "    return switch_balancing_loss(logits, alpha)\n"
                           "    n_tokens, n_experts = logits.shape\n"),
    # the lecture's expert-parallel layer
    "ex2_dispatch": ("    world, rank = dist.get_world_size(), dist.get_rank()\n",
                     "    from course_lib.moe import Routing\n"
                     "    from course_lib.parallel.expert_parallel import expert_parallel_forward\n"
                     "    return expert_parallel_forward(x, Routing(experts, gates, kept, None, 0), local_weights)\n"
                     "    world, rank = dist.get_world_size(), dist.get_rank()\n"),
    # the lecture's ring attention with contiguous chunks
    "ex3_ring": ("    rank, world = dist.get_rank(), dist.get_world_size()\n",
                 "    from course_lib.parallel import ring_attention as ra\n"
                 "    layout = ra.contiguous_chunks(dist.get_world_size())\n"
                 "    return ra.ring_attention(q, k, v, layout, causal)['out']\n"
                 "    rank, world = dist.get_rank(), dist.get_world_size()\n"),
    # the lecture's zig-zag positions per rank (a list of positions, not each position's owner)
    "ex4_balanced": ("    size = n // (2 * world)\n",
                     "    from course_lib.parallel import ring_attention as ra\n"
                     "    return ra.positions(ra.zigzag_chunks(world), n)\n"
                     "    size = n // (2 * world)\n"),
}
