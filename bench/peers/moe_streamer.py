"""A hand-written PyTorch expert streamer: the strongest simple offloading
peer for a mixture-of-experts model (transformers 5's MixtralForCausalLM,
whose experts are fused tensors gate_up_proj [E, 2F, D] and down_proj
[E, D, F]).

Everything but the experts stays resident on the device (attention, norms,
routers, embeddings, lm_head: the model's own modules and forward). Every
expert lives in one pinned host buffer (cudaHostRegister'ed, [layers,
experts, 2F*D + D*F]). Each layer's MoE block is replaced by StreamedMoE:

    router on the device -> top-k -> .cpu() (the one sync a layer needs:
    the host must know which experts to copy) -> for the chosen experts in
    ascending order: a hit in the LRU window of `slots` device buffers, or a
    copy H2D on a side stream into the least recently used slot; the copy of
    the next chosen expert is issued before the current one computes, so it
    overlaps that compute -> compute -> sum.

The window's size comes from the budget: what is left after the resident
parts, the KV cache and a margin, in whole experts (at least 2, so the
next expert's copy can overlap the current one's compute).

Events order the streams: `loaded[s]` (copy done, compute may read slot s)
and `freed[s]` (the compute reading slot s is done, a copy may overwrite it).
The arithmetic is transformers' eager experts path op for op (the same
linear on the same [2F, D] / [D, F] matrices, fp32 routing weights, index_add_
in expert order), so the tokens are those of transformers with
experts_implementation="eager"."""
from collections import OrderedDict

import torch
import torch.nn.functional as F

from .common import PinnedHost


class StreamedMoE(torch.nn.Module):
    """Stands in for one layer's MixtralSparseMoeBlock (same input and output)."""

    def __init__(self, streamer, layer, router_weight, top_k, act_fn):
        super().__init__()
        self.s, self.layer, self.top_k, self.act_fn = streamer, layer, top_k, act_fn
        self.weight = torch.nn.Parameter(router_weight.detach(), requires_grad=False)

    def forward(self, hidden_states):
        shape = hidden_states.shape
        x = hidden_states.reshape(-1, shape[-1])
        logits = F.linear(x, self.weight)
        probs = torch.softmax(logits.float(), dim=-1)
        top_v, top_i = torch.topk(probs, self.top_k, dim=-1)
        top_v /= top_v.sum(dim=-1, keepdim=True)
        idx = top_i.cpu()                                  # the sync: which experts to bring
        chosen = sorted(set(idx.flatten().tolist()))
        self.s.record_routing(self.layer, chosen, x.shape[0])
        final = torch.zeros_like(x)
        slot = self.s.ensure(self.layer, chosen[0], chosen)
        for j, e in enumerate(chosen):
            nxt = self.s.ensure(self.layer, chosen[j + 1], chosen, busy=slot) \
                if j + 1 < len(chosen) else None          # its copy overlaps this compute
            gate_up, down = self.s.begin(slot)
            if x.shape[0] == 1:                            # decode: indices known on the host
                pos = idx[0].tolist().index(e)
                token_idx = self.s.zero_index
                current = x[0:1]
                w = top_v[:, pos:pos + 1]
            else:                                          # as transformers' eager loop
                top_k_pos, token_idx = torch.where((top_i == e).T)
                current = x[token_idx]
                w = top_v[token_idx, top_k_pos, None]
            g, u = F.linear(current, gate_up).chunk(2, dim=-1)
            h = F.linear(self.act_fn(g) * u, down) * w
            final.index_add_(0, token_idx, h.to(final.dtype))
            self.s.end(slot)
            slot = nxt
        return final.reshape(shape)


class ExpertStreamer:
    def __init__(self, model, dev, budget_bytes=None, kv_bytes=0, slots=None,
                 margin_bytes=128 << 20):
        """model: a MixtralForCausalLM on the CPU (bf16, transformers 5 fused
        experts). Its experts move into pinned host memory, its MoE blocks
        are replaced, and the rest of it moves to the device."""
        self.dev, self.cfg = dev, model.config
        layers = model.model.layers
        ex = layers[0].mlp.experts
        if not hasattr(ex, "gate_up_proj"):
            raise RuntimeError("the expert streamer needs transformers >= 5 (fused experts: "
                               "mlp.experts.gate_up_proj / down_proj)")
        self.n_layers = len(layers)
        self.n_experts, f2, d = ex.gate_up_proj.shape
        f = ex.down_proj.shape[2]
        self.gu_shape, self.down_shape = (f2, d), (d, f)
        self.numel = f2 * d + d * f
        self.dtype = ex.gate_up_proj.dtype
        self.expert_bytes = self.numel * self.dtype.itemsize
        del ex
        # Host homes: one registered buffer, expert (l, e) at row l * E + e.
        self.home = PinnedHost(self.n_layers * self.n_experts * self.numel, self.dtype, dev.cuda)
        try:
            self._setup(model, layers, dev, budget_bytes, kv_bytes, slots, margin_bytes)
        except BaseException:
            self.home.close()                   # unpin before the memory goes
            raise

    def _setup(self, model, layers, dev, budget_bytes, kv_bytes, slots, margin_bytes):
        f2, d = self.gu_shape
        self.host = self.home.t.view(self.n_layers * self.n_experts, self.numel)
        for li, layer in enumerate(layers):
            block = layer.mlp
            gu, dn = block.experts.gate_up_proj.detach(), block.experts.down_proj.detach()
            for e in range(self.n_experts):
                row = self.host[li * self.n_experts + e]
                row[:f2 * d].copy_(gu[e].reshape(-1))
                row[f2 * d:].copy_(dn[e].reshape(-1))
            layer.mlp = StreamedMoE(self, li, block.gate.weight, block.gate.top_k,
                                    block.experts.act_fn)
            del block, gu, dn                               # the pageable experts go
        model.to(dev.name)                                  # the dense parts
        self.resident_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        if slots is None:
            room = (budget_bytes or 0) - self.resident_bytes - kv_bytes - margin_bytes
            slots = room // self.expert_bytes if budget_bytes is not None else 2
        self.n_slots = int(max(2, min(slots, self.n_layers * self.n_experts)))
        self.slots = torch.empty(self.n_slots, self.numel, dtype=self.dtype, device=dev.name)
        self.device_weight_bytes = self.resident_bytes + self.n_slots * self.expert_bytes
        self.zero_index = torch.zeros(1, dtype=torch.long, device=dev.name)
        self.lru = OrderedDict()            # (layer, expert) -> slot, least recent first
        self.free = list(range(self.n_slots))
        if dev.cuda:
            self.copy_stream = torch.cuda.Stream()
            self.loaded = [torch.cuda.Event() for _ in range(self.n_slots)]
            self.freed = [torch.cuda.Event() for _ in range(self.n_slots)]
        self.reset_stats()

    # -- statistics ----------------------------------------------------------
    def reset_stats(self):
        self.routing, self.fills, self.hits, self.fill_bytes = [], 0, 0, 0
        self.decode = dict(fills=0, hits=0, fill_bytes=0)
        self._tokens = 0

    def record_routing(self, layer, chosen, n_tokens):
        self._tokens = n_tokens
        if n_tokens == 1:                   # a decode step: kept, for the comparison
            if layer == 0:
                self.routing.append([])
            self.routing[-1].append(list(chosen))

    def _count(self, key, val):
        setattr(self, key, getattr(self, key) + val)
        if self._tokens == 1:
            self.decode[key] += val

    # -- the window ------------------------------------------------------------
    def ensure(self, layer, e, chosen, busy=None):
        """The slot holding expert (layer, e), its copy issued if it is not
        there. The victim is the least recently used slot that is not `busy`
        (being computed) and, if possible, holds none of this layer's chosen
        experts."""
        key = (layer, e)
        if key in self.lru:
            self.lru.move_to_end(key)
            self._count("hits", 1)
            return self.lru[key]
        if self.free:
            slot = self.free.pop()
        else:
            cands = [k for k, s in self.lru.items() if s != busy]
            keep = {(layer, c) for c in chosen}
            victim = next((k for k in cands if k not in keep), cands[0])
            slot = self.lru.pop(victim)
        self.lru[key] = slot
        src = self.host[layer * self.n_experts + e]
        if self.dev.cuda:
            with torch.cuda.stream(self.copy_stream):
                self.copy_stream.wait_event(self.freed[slot])   # no-op before its first record
                self.slots[slot].copy_(src, non_blocking=True)
                self.loaded[slot].record(self.copy_stream)
        else:
            self.slots[slot].copy_(src)
        self._count("fills", 1)
        self._count("fill_bytes", self.expert_bytes)
        return slot

    def begin(self, slot):
        """Views of the expert in `slot` (gate_up [2F, D], down [D, F]) once its copy is done."""
        if self.dev.cuda:
            torch.cuda.current_stream().wait_event(self.loaded[slot])
        row = self.slots[slot]
        n = self.gu_shape[0] * self.gu_shape[1]
        return row[:n].view(self.gu_shape), row[n:].view(self.down_shape)

    def end(self, slot):
        if self.dev.cuda:
            self.freed[slot].record(torch.cuda.current_stream())

    def close(self):
        """Unpin the host homes (before the model is dropped)."""
        self.home.close()
