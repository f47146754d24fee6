"""A hand-written PyTorch layer streamer: the strongest simple offloading peer.

Every decoder layer's weights live in one pinned host buffer. The device holds
the embeddings, the final norm, lm_head and the rotary table, plus two flat
buffers ("slots") of one layer's size. Two shell LlamaDecoderLayer modules have
their parameters pointing into the slots. Layer i runs in slot i % 2 (by a
global counter, so an odd layer count works too) while a side CUDA stream
copies the layer that runs two steps later into the other slot:

    copy stream:    [copy L1->s1] [copy L2->s0 | wait done(L0)] [copy L3->s1 ...]
    compute stream: [wait L0][L0 in s0][wait L1][L1 in s1][wait L2][L2 in s0]...

Events order the two streams: `loaded[s]` (copy finished, compute may read
slot s) and `freed[s]` (compute finished, the next copy may overwrite it).
Prefetch wraps around to the next token's first layers. It streams every
layer every token (it does not keep what would fit), so its bound is
B_h2d / (bytes of all layers)."""
import math

import torch


def _causal_mask(config, h, cache, pos, attention_mask=None):
    """The mask LlamaModel.forward would build (None when SDPA can use
    is_causal), so the streamer's numerics match the resident model's;
    attention_mask [B, past+T]: 0 on left padding (a batch)."""
    from transformers.masking_utils import create_causal_mask
    try:
        return create_causal_mask(config=config, inputs_embeds=h, attention_mask=attention_mask,
                                  past_key_values=cache, position_ids=pos)
    except TypeError:    # transformers 4.x also wants cache_position
        return create_causal_mask(config=config, input_embeds=h, attention_mask=attention_mask,
                                  cache_position=torch.arange(
                                      cache.get_seq_length(), cache.get_seq_length() + h.shape[1],
                                      device=h.device), past_key_values=cache,
                                  position_ids=pos)


class LayerStreamer:
    def __init__(self, model, dev):
        """model: a LlamaForCausalLM on the CPU (bf16). Its decoder layers are
        moved into pinned buffers and their pageable copies released."""
        self.cfg, self.dev = model.config, dev
        inner = model.model
        # Resident on the device: embeddings, final norm, lm_head, rotary table.
        self.embed = inner.embed_tokens.to(dev.name)
        self.norm = inner.norm.to(dev.name)
        self.rotary = inner.rotary_emb.to(dev.name)
        self.lm_head = model.lm_head.to(dev.name)
        layers = inner.layers
        self.n_layers = len(layers)
        # Layout of one layer's parameters in a flat buffer: (name, offset, shape).
        self.layout, numel = [], 0
        for name, t in layers[0].state_dict().items():
            self.layout.append((name, numel, tuple(t.shape)))
            numel += t.numel()
        dtype = next(layers[0].parameters()).dtype
        self.layer_bytes = numel * dtype.itemsize
        # Host homes: one pinned flat buffer per layer.
        self.host = []
        for layer in layers:
            flat = torch.empty(numel, dtype=dtype, pin_memory=dev.cuda)
            for (name, off, shape), t in zip(self.layout, layer.state_dict().values()):
                flat[off:off + t.numel()].copy_(t.reshape(-1))
            self.host.append(flat)
            layer.to("meta")                       # drop the pageable copy
        # Two device slots and a shell layer on each.
        self.slots = [torch.empty(numel, dtype=dtype, device=dev.name) for _ in range(2)]
        self.shells = []
        for slot in self.slots:
            with torch.device("meta"):
                shell = type(layers[0])(self.cfg, layer_idx=0)
            views = {name: slot[off:off + math.prod(shape)].view(shape)
                     for name, off, shape in self.layout}
            shell.load_state_dict(views, assign=True, strict=True)
            shell.eval()
            self.shells.append(shell)
        for shell, slot in zip(self.shells, self.slots):   # the views must alias
            assert next(shell.parameters()).untyped_storage().data_ptr() == \
                slot.untyped_storage().data_ptr()
        resident = [self.embed, self.norm, self.lm_head]
        self.resident_bytes = sum(p.numel() * p.element_size()
                                  for m in resident for p in m.parameters())
        # Device bytes the streamer keeps for weights (its effective budget).
        self.device_weight_bytes = self.resident_bytes + 2 * self.layer_bytes
        if dev.cuda:
            self.copy_stream = torch.cuda.Stream()
            self.loaded = [torch.cuda.Event() for _ in range(2)]
            self.freed = [torch.cuda.Event() for _ in range(2)]
        self.counter = 0                         # layers run so far (slot = counter % 2)
        self._load(0, 0)
        self._load(1 % self.n_layers, 1)

    def _load(self, layer, slot):
        """Copy `layer` into `slot` on the side stream once the slot is free."""
        if not self.dev.cuda:
            self.slots[slot].copy_(self.host[layer])
            return
        with torch.cuda.stream(self.copy_stream):
            self.copy_stream.wait_event(self.freed[slot])   # no-op before first record
            self.slots[slot].copy_(self.host[layer], non_blocking=True)
            self.loaded[slot].record(self.copy_stream)

    def step(self, ids, cache, attention_mask=None, position_ids=None):
        """One forward (prefill or decode step): logits of the last position.
        ids [B, T]; a batch of left-padded prompts also gives attention_mask
        [B, past+T] and per-sequence position_ids [B, T] (common.left_pad);
        each layer is still streamed once per step, for the whole batch."""
        h = self.embed(ids)
        pos = position_ids
        if pos is None:
            past = cache.get_seq_length()
            pos = torch.arange(past, past + ids.shape[1], device=ids.device).unsqueeze(0)
        mask = _causal_mask(self.cfg, h, cache, pos, attention_mask)
        pe = self.rotary(h, pos)
        compute = torch.cuda.current_stream() if self.dev.cuda else None
        for i in range(self.n_layers):
            slot = self.counter % 2
            self.counter += 1
            if compute is not None:
                compute.wait_event(self.loaded[slot])
            shell = self.shells[slot]
            shell.self_attn.layer_idx = i          # which KV-cache layer to update
            out = shell(h, attention_mask=mask, position_ids=pos, past_key_values=cache,
                        use_cache=True, position_embeddings=pe)
            h = out[0] if isinstance(out, tuple) else out
            if compute is not None:
                self.freed[slot].record(compute)
            self._load((i + 2) % self.n_layers, slot)   # runs two steps from now
        return self.lm_head(self.norm(h[:, -1:]))[:, -1]
