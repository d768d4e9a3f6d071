"""PyTorch reference of parla's Transformer (lib/models/transformer.*, lib/nn/*), for speed comparisons.

The same model, parameter for parameter and operation for operation, written as strong eager PyTorch:
F.scaled_dot_product_attention for every attention, a fused QKV projection (as parla), and an incremental
decoder whose self-attention K/V cache grows by one position per step while the cross-attention K/V are
computed once per sentence (and shared by the beams of a sentence, as parla does, instead of copied per beam).

Parameter names equal parla's module paths (encoder.layers.0.self_attn.qkv_proj.weight, tgt_embed.weight, ...)
so a parla checkpoint loads with `load_parla_checkpoint(path)`:

    import torch, parla_transformer as pt
    model, meta = pt.load_parla_checkpoint("../shared/models/multi30k-en-de-small/average.pt")
    # meta["config"] is the parla config stored in the checkpoint; meta["src_spm"] the SentencePiece bytes

Supported: model.type transformer, attention "full", norm post/pre, positions sinusoidal/learned, activation
relu/gelu, share_embeddings, tie_output. Local and linear attention are not part of the benchmark and raise.
Import-only module (no command line); train_reference.py and translate_reference.py use it.
"""
from __future__ import annotations

import json
import struct
import math
from dataclasses import dataclass, field, fields

import torch
import torch.nn.functional as F
from torch import nn

# Fixed special ids of the whole toolkit (lib/models/seq2seq.h).
PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3

# Preset sizes (lib/core/config/model_config.cpp): d_model, ffn_dim, heads, encoder_layers, decoder_layers, dropout.
PRESETS = {
    "tiny": (256, 1024, 4, 3, 3, 0.1),
    "base": (512, 2048, 8, 6, 6, 0.1),
    "big": (1024, 4096, 16, 6, 6, 0.3),
}


@dataclass
class ModelConfig:
    """parla's `model` section (Transformer keys only), with parla's defaults."""
    d_model: int = 512
    ffn_dim: int = 2048
    heads: int = 8
    encoder_layers: int = 6
    decoder_layers: int = 6
    dropout: float = 0.1
    attention_dropout: float = 0.0
    activation_dropout: float = 0.0
    activation: str = "relu"
    norm: str = "post"
    positions: str = "sinusoidal"
    max_positions: int = 1024
    share_embeddings: bool = False
    tie_output: bool = True
    attention: str = "full"

    @staticmethod
    def from_parla(section: dict) -> "ModelConfig":
        """From a parla `model` JSON section: a preset fills the size keys the section does not give (as parla)."""
        known = {f.name for f in fields(ModelConfig)}
        cfg = ModelConfig(**{k: v for k, v in section.items() if k in known})
        preset = section.get("preset", "")
        if preset:
            names = ("d_model", "ffn_dim", "heads", "encoder_layers", "decoder_layers", "dropout")
            for name, value in zip(names, PRESETS[preset]):
                if name not in section:
                    setattr(cfg, name, value)
        if section.get("type", "transformer") != "transformer":
            raise ValueError(f"model.type {section.get('type')!r}: the reference is the Transformer only")
        return cfg


def sinusoidal_table(length: int, dim: int, offset: int = 0) -> torch.Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...) (Vaswani et al. 2017, Sec. 3.5).

    Computed in float64 and rounded once to float32, exactly as parla's nn::sinusoidal_table; an odd dim keeps
    the sine of the last even column and drops the cosine that would not fit."""
    pos = torch.arange(offset, offset + length, dtype=torch.float64).unsqueeze(1)
    two_i = torch.arange(0, dim, 2, dtype=torch.float64)
    angle = pos * torch.exp(two_i * (-math.log(10000.0) / dim))
    pe = torch.zeros(length, dim, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)[:, : dim // 2]
    return pe.to(torch.float32)


class Embedding(nn.Module):
    """Token embedding times sqrt(d) (Sec. 3.4); normal(0, d^-0.5) init with a zero padding row (parla/fairseq)."""

    def __init__(self, vocab: int, dim: int):
        super().__init__()
        w = torch.randn(vocab, dim) * dim ** -0.5
        w[PAD_ID].zero_()
        self.weight = nn.Parameter(w)
        self.scale = math.sqrt(dim)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(ids, self.weight) * self.scale


class PositionalEncoding(nn.Module):
    def __init__(self, kind: str, max_positions: int, dim: int):
        super().__init__()
        self.kind, self.dim = kind, dim
        if kind == "learned":
            self.weight = nn.Parameter(torch.randn(max_positions, dim) * dim ** -0.5)
        elif kind != "sinusoidal":
            raise ValueError(f"model.positions {kind!r}")
        self._table = None  # not a buffer: parla checkpoints have no entry for it

    def forward(self, length: int, offset: int, like: torch.Tensor) -> torch.Tensor:
        if self.kind == "learned":
            return self.weight[offset:offset + length]
        t = self._table
        if t is None or t.size(0) < offset + length or t.device != like.device or t.dtype != like.dtype:
            n = max(offset + length, 256, 2 * t.size(0) if t is not None else 0)
            self._table = t = sinusoidal_table(n, self.dim).to(like.device, like.dtype)
        return t[offset:offset + length]


def _xavier_blocks(w: torch.Tensor, d: int) -> None:
    # parla initialises a fused [kD, D] projection block by block, so every block has the fan of a [D, D] matrix.
    with torch.no_grad():
        for i in range(w.size(0) // d):
            nn.init.xavier_uniform_(w[i * d:(i + 1) * d])


class MultiHeadAttention(nn.Module):
    """Sec. 3.2.2. Self-attention has one fused [3D, D] projection (rows W^Q; W^K; W^V); cross-attention a Q
    projection and a fused [2D, D] K/V projection, as parla (so checkpoints map one to one)."""

    def __init__(self, d: int, heads: int, dropout: float, self_attention: bool):
        super().__init__()
        if d % heads:
            raise ValueError(f"d_model {d} is not divisible by {heads} heads")
        self.d, self.h, self.dh, self.dropout = d, heads, d // heads, dropout
        if self_attention:
            self.qkv_proj = nn.Linear(d, 3 * d)
            _xavier_blocks(self.qkv_proj.weight, d)
            nn.init.zeros_(self.qkv_proj.bias)
        else:
            self.q_proj = nn.Linear(d, d)
            self.kv_proj = nn.Linear(d, 2 * d)
            _xavier_blocks(self.q_proj.weight, d)
            _xavier_blocks(self.kv_proj.weight, d)
            nn.init.zeros_(self.q_proj.bias)
            nn.init.zeros_(self.kv_proj.bias)
        self.out_proj = nn.Linear(d, d)
        nn.init.xavier_uniform_(self.out_proj.weight)
        nn.init.zeros_(self.out_proj.bias)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:  # [B, T, D] -> [B, H, T, Dh]
        return x.view(x.size(0), x.size(1), self.h, self.dh).transpose(1, 2)

    def _merge(self, x: torch.Tensor) -> torch.Tensor:  # [B, H, T, Dh] -> [B, T, D]
        return x.transpose(1, 2).reshape(x.size(0), x.size(2), self.d)

    def _p(self) -> float:
        return self.dropout if self.training else 0.0

    def self_attend(self, x: torch.Tensor, mask: torch.Tensor | None, causal: bool) -> torch.Tensor:
        """x [B, T, D]; mask bool broadcastable to [B, H, T, T] (True = may attend) or None."""
        q, k, v = self._heads_qkv(x)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=self._p(), is_causal=causal)
        return self.out_proj(self._merge(out))

    def _heads_qkv(self, x: torch.Tensor):
        q, k, v = self.qkv_proj(x).chunk(3, -1)
        return self._heads(q), self._heads(k), self._heads(v)

    def self_attend_step(self, x: torch.Tensor, cache: "LayerCache") -> torch.Tensor:
        """One causal step, x [N, 1, D]: the new K/V are appended to the cache (after the pending beam
        reorder, fused into the same copy) and the single query attends to every cached position."""
        q, k, v = self._heads_qkv(x)
        cache.append(k, v)
        out = F.scaled_dot_product_attention(q, cache.k, cache.v, dropout_p=self._p())
        return self.out_proj(self._merge(out))

    def project_memory(self, memory: torch.Tensor):
        k, v = self.kv_proj(memory).chunk(2, -1)
        return self._heads(k), self._heads(v)

    def cross_attend(self, x: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None):
        """x [B, T, D] over memory K/V [M, H, S, Dh] with B = M * G: the G consecutive rows of a memory row
        (the beams of one sentence) become G * T query positions of that row, so memory is never copied."""
        B, T = x.size(0), x.size(1)
        M = k.size(0)
        q = self.q_proj(x)
        if M == B:
            out = F.scaled_dot_product_attention(self._heads(q), k, v, attn_mask=mask, dropout_p=self._p())
            return self.out_proj(self._merge(out))
        G = B // M
        q = q.view(M, G * T, self.h, self.dh).transpose(1, 2)  # rows of a group are contiguous: [M, H, G*T, Dh]
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=self._p())
        return self.out_proj(out.transpose(1, 2).reshape(B, T, self.d))


class FeedForward(nn.Module):
    """Eq. 2: act(x W1 + b1) W2 + b2, dropout after the activation (activation_dropout)."""

    def __init__(self, d: int, f: int, activation: str, activation_dropout: float):
        super().__init__()
        if activation not in ("relu", "gelu"):
            raise ValueError(f"model.activation {activation!r}")
        self.gelu, self.p = activation == "gelu", activation_dropout
        self.fc1, self.fc2 = nn.Linear(d, f), nn.Linear(f, d)
        for l in (self.fc1, self.fc2):
            nn.init.xavier_uniform_(l.weight)
            nn.init.zeros_(l.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc1(x)
        h = F.gelu(h) if self.gelu else F.relu(h)
        if self.p > 0 and self.training:
            h = F.dropout(h, self.p, True)
        return self.fc2(h)


class EncoderLayer(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.pre, self.p = c.norm == "pre", c.dropout
        self.self_attn = MultiHeadAttention(c.d_model, c.heads, c.attention_dropout, True)
        self.ffn = FeedForward(c.d_model, c.ffn_dim, c.activation, c.activation_dropout)
        self.self_attn_norm = nn.LayerNorm(c.d_model)
        self.ffn_norm = nn.LayerNorm(c.d_model)

    def _drop(self, t):
        return F.dropout(t, self.p, True) if self.p > 0 and self.training else t

    def forward(self, h, mask):
        # x + Dropout(Sublayer(x)), norm after the sum (post, the paper) or before the sublayer (pre).
        if self.pre:
            h = h + self._drop(self.self_attn.self_attend(self.self_attn_norm(h), mask, False))
            return h + self._drop(self.ffn(self.ffn_norm(h)))
        h = self.self_attn_norm(h + self._drop(self.self_attn.self_attend(h, mask, False)))
        return self.ffn_norm(h + self._drop(self.ffn(h)))


class LayerCache:
    """Self-attention K/V of one decoder layer, [N, H, t, Dh]. A beam reorder is only recorded and applied in
    the next append, where the gather and the concatenation are one copy of the cache."""

    def __init__(self):
        self.k = self.v = None
        self.pending = None  # int64 [N] rows to take before the next append

    def append(self, k, v):
        if self.k is None:
            self.k, self.v = k, v
            return
        old_k, old_v = self.k, self.v
        if self.pending is not None:
            old_k, old_v = old_k.index_select(0, self.pending), old_v.index_select(0, self.pending)
            self.pending = None
        self.k, self.v = torch.cat([old_k, k], 2), torch.cat([old_v, v], 2)

    def reorder(self, rows):
        # Compose with a reorder not applied yet (two reorders between steps).
        self.pending = rows if self.pending is None else self.pending.index_select(0, rows)


class DecoderLayer(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.pre, self.p = c.norm == "pre", c.dropout
        self.self_attn = MultiHeadAttention(c.d_model, c.heads, c.attention_dropout, True)
        self.cross_attn = MultiHeadAttention(c.d_model, c.heads, c.attention_dropout, False)
        self.ffn = FeedForward(c.d_model, c.ffn_dim, c.activation, c.activation_dropout)
        self.self_attn_norm = nn.LayerNorm(c.d_model)
        self.cross_attn_norm = nn.LayerNorm(c.d_model)
        self.ffn_norm = nn.LayerNorm(c.d_model)

    def _drop(self, t):
        return F.dropout(t, self.p, True) if self.p > 0 and self.training else t

    def run(self, h, self_attention, mem_k, mem_v, mem_mask):
        cross = lambda t: self.cross_attn.cross_attend(t, mem_k, mem_v, mem_mask)
        if self.pre:
            h = h + self._drop(self_attention(self.self_attn_norm(h)))
            h = h + self._drop(cross(self.cross_attn_norm(h)))
            return h + self._drop(self.ffn(self.ffn_norm(h)))
        h = self.self_attn_norm(h + self._drop(self_attention(h)))
        h = self.cross_attn_norm(h + self._drop(cross(h)))
        return self.ffn_norm(h + self._drop(self.ffn(h)))


class Encoder(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(c) for _ in range(c.encoder_layers))
        self.final_norm = nn.LayerNorm(c.d_model) if c.norm == "pre" else None

    def forward(self, h, mask):
        for layer in self.layers:
            h = layer(h, mask)
        return self.final_norm(h) if self.final_norm is not None else h


class Decoder(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(c) for _ in range(c.decoder_layers))
        self.final_norm = nn.LayerNorm(c.d_model) if c.norm == "pre" else None

    def forward(self, h, memory, mem_mask):
        # Right-padded targets need no padding mask: the causal mask hides later (padding) positions from real
        # ones and the loss ignores outputs at padding (as parla), so the causal kernel path applies.
        for layer in self.layers:
            k, v = layer.cross_attn.project_memory(memory)
            h = layer.run(h, lambda t, l=layer: l.self_attn.self_attend(t, None, True), k, v, mem_mask)
        return self.final_norm(h) if self.final_norm is not None else h


@dataclass
class DecoderState:
    """Incremental state: source mask and cross K/V once per sentence (rows = sentences), self-attention
    caches per hypothesis row, steps taken."""
    mem_mask: torch.Tensor  # bool [M, 1, 1, S]
    cross_k: list
    cross_v: list
    self_cache: list
    steps: int = 0

    def reorder_hypotheses(self, rows: torch.Tensor) -> None:
        for c in self.self_cache:
            c.reorder(rows)

    def select_sentences(self, sentences: torch.Tensor) -> None:
        self.mem_mask = self.mem_mask.index_select(0, sentences)
        self.cross_k = [k.index_select(0, sentences) for k in self.cross_k]
        self.cross_v = [v.index_select(0, sentences) for v in self.cross_v]


class Transformer(nn.Module):
    def __init__(self, c: ModelConfig, src_vocab: int, tgt_vocab: int):
        super().__init__()
        if c.attention != "full":
            raise ValueError(f"model.attention {c.attention!r}: the reference implements full attention only")
        if c.share_embeddings and src_vocab != tgt_vocab:
            raise ValueError("share_embeddings needs equal vocabulary sizes")
        self.cfg, self.src_vocab, self.tgt_vocab = c, src_vocab, tgt_vocab
        self.tgt_embed = Embedding(tgt_vocab, c.d_model)
        # Shared table: one parameter under parla's name tgt_embed (parla registers src_embed only when separate).
        self.src_embed = None if c.share_embeddings else Embedding(src_vocab, c.d_model)
        self.src_positions = PositionalEncoding(c.positions, c.max_positions, c.d_model)
        self.tgt_positions = PositionalEncoding(c.positions, c.max_positions, c.d_model)
        self.encoder = Encoder(c)
        self.decoder = Decoder(c)
        self.output_weight = None if c.tie_output else nn.Parameter(torch.randn(tgt_vocab, c.d_model) * c.d_model ** -0.5)

    def _src_table(self):
        return self.tgt_embed if self.src_embed is None else self.src_embed

    def max_positions(self) -> int:
        return self.cfg.max_positions if self.cfg.positions == "learned" else 2 ** 62

    def _embed(self, table, positions, ids, offset):
        e = table(ids)
        x = e + positions(ids.size(1), offset, table.weight).to(table.weight.dtype)
        return F.dropout(x, self.cfg.dropout, True) if self.cfg.dropout > 0 and self.training else x

    @staticmethod
    def source_mask(src: torch.Tensor) -> torch.Tensor:
        return src.ne(PAD_ID)[:, None, None, :]  # [B, 1, 1, S], True = real token

    def encode(self, src: torch.Tensor) -> torch.Tensor:
        return self.encoder(self._embed(self._src_table(), self.src_positions, src, 0), self.source_mask(src))

    def output_logits(self, h: torch.Tensor) -> torch.Tensor:
        return F.linear(h, self.tgt_embed.weight if self.output_weight is None else self.output_weight)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Teacher forcing: src [B, S], tgt_in [B, T] (starts with BOS) -> logits [B, T, V]."""
        memory = self.encode(src)
        h = self.decoder(self._embed(self.tgt_embed, self.tgt_positions, tgt_in, 0), memory, self.source_mask(src))
        return self.output_logits(h)

    # --- incremental decoding ---
    def start(self, src: torch.Tensor) -> DecoderState:
        memory = self.encode(src)
        ks, vs = zip(*(layer.cross_attn.project_memory(memory) for layer in self.decoder.layers))
        return DecoderState(self.source_mask(src), list(ks), list(vs), [LayerCache() for _ in self.decoder.layers])

    def step(self, prev: torch.Tensor, state: DecoderState) -> torch.Tensor:
        """prev int64 [N] -> log-probabilities float32 [N, V]; N = sentences x hypotheses per sentence."""
        h = self._embed(self.tgt_embed, self.tgt_positions, prev.view(-1, 1), state.steps)
        for i, layer in enumerate(self.decoder.layers):
            cache = state.self_cache[i]
            h = layer.run(h, lambda t, l=layer, c=cache: l.self_attn.self_attend_step(t, c),
                          state.cross_k[i], state.cross_v[i], state.mem_mask)
        if self.decoder.final_norm is not None:
            h = self.decoder.final_norm(h)
        state.steps += 1
        return torch.log_softmax(self.output_logits(h.squeeze(1)).float(), -1)


# --- parla checkpoints ---

_SAFETENSORS_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
                       "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
                       "U8": torch.uint8, "BOOL": torch.bool}


def _read_safetensors(path: str):
    """The tensors and __metadata__ of a safetensors file (8-byte little-endian header length, JSON header, data),
    read without the safetensors package."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    tensors = {}
    for name, e in header.items():
        begin, end = e["data_offsets"]
        raw = bytearray(data[base + begin:base + end])  # a copy: the tensor owns writable memory
        t = torch.frombuffer(raw, dtype=_SAFETENSORS_DTYPES[e["dtype"]]) if raw else \
            torch.empty(0, dtype=_SAFETENSORS_DTYPES[e["dtype"]])
        tensors[name] = t.reshape(e["shape"])
    return tensors, meta


def read_parla_checkpoint(path: str):
    """Opens a parla checkpoint -> (state dict with parla's names minus the 'model.' prefix, meta dict with config,
    vocab sizes, spm bytes). Format 2 (safetensors, lib/models/checkpoint.h) is read as data. Format 1 (a
    TorchScript archive of parla before issue 35) is opened with torch.jit.load, which runs the archive's code:
    only for files you made yourself; `parla-train upgrade -o NEW OLD` converts one without running anything."""
    with open(path, "rb") as f:
        legacy = f.read(2) == b"PK"
    if not legacy:
        tensors, strings = _read_safetensors(path)
        if strings.get("parla_format") != "2":
            raise ValueError(f"{path}: parla checkpoint format {strings.get('parla_format')} (expected 2)")
        meta = json.loads(strings["parla_meta"])
        if meta.get("int8"):
            raise ValueError(f"{path}: an int8 checkpoint; the reference reads float checkpoints")
        for side in ("src", "tgt"):
            t = tensors.get(f"parla_{side}_spm")
            meta[f"{side}_spm"] = bytes(t.tolist()) if t is not None and t.numel() else b""
            # Imported models number their pieces through a table (lib/models/checkpoint.h).
            meta[f"{side}_pieces"] = json.loads(strings.get(f"parla_{side}_pieces", "[]"))
        state = {name[len("model."):]: t for name, t in tensors.items() if name.startswith("model.")}
        return state, meta
    archive = torch.jit.load(path, map_location="cpu")
    if int(archive.parla_format) != 1:
        raise ValueError(f"{path}: parla checkpoint format {archive.parla_format} (expected 1)")
    meta = json.loads(archive.parla_meta)
    buffers = dict(archive.named_buffers())
    for side in ("src", "tgt"):
        t = buffers.get(f"parla_{side}_spm")
        meta[f"{side}_spm"] = bytes(t.tolist()) if t is not None and t.numel() else b""
    # Module::save writes parameters and buffers of the module tree under the "model" sub-archive.
    state = {}
    for name, t in list(archive.named_parameters()) + list(archive.named_buffers()):
        if name.startswith("model."):
            state[name[len("model."):]] = t.detach().clone()
    return state, meta


def load_parla_checkpoint(path: str, device: str | torch.device = "cpu"):
    """A reference Transformer with the weights of a parla checkpoint; eval mode."""
    state, meta = read_parla_checkpoint(path)
    cfg = ModelConfig.from_parla(meta["config"]["model"])
    model = Transformer(cfg, int(meta["src_vocab_size"]), int(meta["tgt_vocab_size"]))
    own = dict(model.named_parameters())
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    if missing or unexpected:
        raise ValueError(f"{path}: parameters do not match: missing {missing[:5]}, unexpected {unexpected[:5]}")
    with torch.no_grad():
        for name, p in own.items():
            if p.shape != state[name].shape:
                raise ValueError(f"{path}: {name} has shape {tuple(state[name].shape)}, expected {tuple(p.shape)}")
            p.copy_(state[name])
    return model.to(device).eval(), meta


def forward_flops(c: ModelConfig, ns: float, nt: float, s: float, t: float, v: float) -> float:
    """Matmul FLOPs of one forward pass, the formula of parla's bench/bench_model.cpp (multiply-add = 2;
    embeddings, norms, softmax, element-wise ops excluded). ns/nt: source/target (padded) tokens, s/t lengths."""
    d, f = c.d_model, c.ffn_dim
    enc = ns * c.encoder_layers * (2 * (4 * d * d + 2 * d * f) + 4 * s * d)
    dec = nt * c.decoder_layers * (2 * (6 * d * d + 2 * d * f) + 4 * t * d + 4 * s * d) + ns * c.decoder_layers * 2 * (2 * d * d)
    return enc + dec + nt * 2 * d * v


def add_runtime_args(ap) -> None:
    """The device/threads/seed flags both benchmark scripts take."""
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)


def apply_runtime_args(args) -> torch.device:
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    return torch.device(args.device)
