"""Plain PyTorch model definitions for the extended zoo, plus a registry.

Import with:
    sys.path.insert(0, 'tests/zoo'); from models import MODELS

MODELS maps name -> (constructor, inputs), inputs being a list of
(input name, per-sample shape without batch, dtype). Constructors take no
arguments and never download weights (weights=None). Seeding is the caller's
job (torch.manual_seed before calling the constructor).

Runs with Debian's python3-torch 1.13 / python3-torchvision 0.14; call it as
/usr/bin/python3.
"""
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "llm"))
import families  # noqa: E402  HF modeling code as tests/llm writes it


# --------------------------------------------------------------------------
# BERT-base-like encoder, written out explicitly (no nn.TransformerEncoder).

class BertSelfAttention(nn.Module):
    def __init__(self, hidden=768, heads=12, dropout=0.1, eps=1e-12):
        super().__init__()
        self.heads = heads
        self.head_dim = hidden // heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.attn_dropout = nn.Dropout(dropout)
        self.out = nn.Linear(hidden, hidden)
        self.out_dropout = nn.Dropout(dropout)
        self.norm = nn.LayerNorm(hidden, eps=eps)

    def split(self, x):
        b, s, _ = x.shape
        return x.view(b, s, self.heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, x):
        b, s, h = x.shape
        q = self.split(self.query(x))
        k = self.split(self.key(x))
        v = self.split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        probs = self.attn_dropout(torch.softmax(scores, dim=-1))
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).reshape(b, s, h)
        return self.norm(x + self.out_dropout(self.out(ctx)))


class BertLayer(nn.Module):
    def __init__(self, hidden=768, heads=12, ffn=3072, dropout=0.1, eps=1e-12):
        super().__init__()
        self.attention = BertSelfAttention(hidden, heads, dropout, eps)
        self.intermediate = nn.Linear(hidden, ffn)
        self.act = nn.GELU()
        self.output = nn.Linear(ffn, hidden)
        self.dropout = nn.Dropout(dropout)
        self.norm = nn.LayerNorm(hidden, eps=eps)

    def forward(self, x):
        x = self.attention(x)
        y = self.output(self.act(self.intermediate(x)))
        return self.norm(x + self.dropout(y))


class BertLike(nn.Module):
    def __init__(self, vocab=30522, hidden=768, layers=12, heads=12, ffn=3072,
                 max_pos=512, type_vocab=2, dropout=0.1, eps=1e-12):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, hidden)
        self.position_embeddings = nn.Embedding(max_pos, hidden)
        self.token_type_embeddings = nn.Embedding(type_vocab, hidden)
        self.emb_norm = nn.LayerNorm(hidden, eps=eps)
        self.emb_dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList(
            [BertLayer(hidden, heads, ffn, dropout, eps) for _ in range(layers)])

    def forward(self, input_ids):
        s = input_ids.shape[1]
        pos = torch.arange(s, dtype=torch.long, device=input_ids.device).unsqueeze(0)
        tok_type = torch.zeros_like(input_ids)
        x = (self.word_embeddings(input_ids) + self.position_embeddings(pos)
             + self.token_type_embeddings(tok_type))
        x = self.emb_dropout(self.emb_norm(x))
        for layer in self.layers:
            x = layer(x)
        return x


def bert_like():
    return BertLike()


# --------------------------------------------------------------------------
# GPT-2-small-like decoder with a tied LM head.

class GPTAttention(nn.Module):
    def __init__(self, hidden=768, heads=12, ctx=1024, dropout=0.1):
        super().__init__()
        self.heads = heads
        self.head_dim = hidden // heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.attn_dropout = nn.Dropout(dropout)
        self.resid_dropout = nn.Dropout(dropout)
        self.register_buffer(
            "mask", torch.tril(torch.ones(ctx, ctx, dtype=torch.bool)).view(1, 1, ctx, ctx))

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(x).split(h, dim=2)
        q = q.view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = k.view(b, s, self.heads, self.head_dim).transpose(1, 2)
        v = v.view(b, s, self.heads, self.head_dim).transpose(1, 2)
        att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))
        att = att.masked_fill(~self.mask[:, :, :s, :s], float("-inf"))
        att = self.attn_dropout(torch.softmax(att, dim=-1))
        y = torch.matmul(att, v).transpose(1, 2).reshape(b, s, h)
        return self.resid_dropout(self.proj(y))


class GPTBlock(nn.Module):
    def __init__(self, hidden=768, heads=12, ctx=1024, dropout=0.1, eps=1e-5):
        super().__init__()
        self.ln_1 = nn.LayerNorm(hidden, eps=eps)
        self.attn = GPTAttention(hidden, heads, ctx, dropout)
        self.ln_2 = nn.LayerNorm(hidden, eps=eps)
        self.fc = nn.Linear(hidden, 4 * hidden)
        self.act = nn.GELU()
        self.mlp_proj = nn.Linear(4 * hidden, hidden)
        self.mlp_dropout = nn.Dropout(dropout)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp_dropout(self.mlp_proj(self.act(self.fc(self.ln_2(x)))))
        return x


class GPTLike(nn.Module):
    def __init__(self, vocab=50257, hidden=768, layers=12, heads=12, ctx=1024,
                 dropout=0.1, eps=1e-5):
        super().__init__()
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(ctx, hidden)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            [GPTBlock(hidden, heads, ctx, dropout, eps) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(hidden, eps=eps)

    def forward(self, input_ids):
        s = input_ids.shape[1]
        pos = torch.arange(s, dtype=torch.long, device=input_ids.device).unsqueeze(0)
        x = self.drop(self.wte(input_ids) + self.wpe(pos))
        for blk in self.blocks:
            x = blk(x)
        x = self.ln_f(x)
        return torch.matmul(x, self.wte.weight.t())  # LM head tied to wte


def gpt_like():
    return GPTLike()


# --------------------------------------------------------------------------
# Recurrent language models.

class LSTMModel(nn.Module):
    def __init__(self, vocab=10000, emb=256, hidden=512, layers=2):
        super().__init__()
        self.embedding = nn.Embedding(vocab, emb)
        self.rnn = nn.LSTM(emb, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, input_ids):
        y, _ = self.rnn(self.embedding(input_ids))
        return self.head(y)


class GRUModel(nn.Module):
    def __init__(self, vocab=10000, emb=256, hidden=512, layers=2):
        super().__init__()
        self.embedding = nn.Embedding(vocab, emb)
        self.rnn = nn.GRU(emb, hidden, num_layers=layers, batch_first=True,
                          bidirectional=True)
        self.head = nn.Linear(2 * hidden, vocab)

    def forward(self, input_ids):
        y, _ = self.rnn(self.embedding(input_ids))
        return self.head(y)


def lstm_model():
    return LSTMModel()


def gru_model():
    return GRUModel()


# --------------------------------------------------------------------------
# Small UNet.

def conv_block(cin, cout):
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
        nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True))


class UNetLike(nn.Module):
    def __init__(self, in_ch=3, classes=2, chans=(32, 64, 128, 256)):
        super().__init__()
        self.enc = nn.ModuleList()
        c = in_ch
        for ch in chans:
            self.enc.append(conv_block(c, ch))
            c = ch
        self.pool = nn.MaxPool2d(2)
        self.bottleneck = conv_block(chans[-1], 2 * chans[-1])
        self.up = nn.ModuleList()
        self.dec = nn.ModuleList()
        c = 2 * chans[-1]
        for ch in reversed(chans):
            self.up.append(nn.ConvTranspose2d(c, ch, kernel_size=2, stride=2))
            self.dec.append(conv_block(2 * ch, ch))
            c = ch
        self.head = nn.Conv2d(chans[0], classes, kernel_size=1)

    def forward(self, x):
        skips = []
        for blk in self.enc:
            x = blk(x)
            skips.append(x)
            x = self.pool(x)
        x = self.bottleneck(x)
        for up, dec, skip in zip(self.up, self.dec, reversed(skips)):
            x = dec(torch.cat([up(x), skip], dim=1))
        return self.head(x)


def unet_like():
    return UNetLike()


# --------------------------------------------------------------------------
# Issue 10's wider zoo: transformer decoders as HuggingFace writes them (no
# transformers package here: the modules are written out with torch.nn), a
# T5-style encoder-decoder, a diffusion-style UNet and a Whisper-style
# encoder. Sizes are small enough to measure on a CPU at batch 8.

class LlamaRMSNorm(nn.Module):
    """HF LlamaRMSNorm: PyTorch runs it as separate ops (pow, mean, add,
    rsqrt, mul, mul), not one kernel."""
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        dt = x.dtype
        x = x.to(torch.float32)
        var = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(var + self.eps)
        return self.weight * x.to(dt)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class LlamaRotary(nn.Module):
    """HF LlamaRotaryEmbedding (4.30): cos/sin caches as non-persistent buffers."""
    def __init__(self, dim, max_pos=512, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        t = torch.arange(max_pos, dtype=torch.float32)
        freqs = torch.einsum("i,j->ij", t, inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos_cached", emb.cos()[None, None, :, :], persistent=False)
        self.register_buffer("sin_cached", emb.sin()[None, None, :, :], persistent=False)

    def forward(self, s):
        return self.cos_cached[:, :, :s, ...], self.sin_cached[:, :, :s, ...]


class LlamaAttention(nn.Module):
    def __init__(self, d, heads, kv_heads, max_pos):
        super().__init__()
        self.heads, self.kv_heads = heads, kv_heads
        self.head_dim = d // heads
        self.q_proj = nn.Linear(d, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(d, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(d, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, d, bias=False)
        self.rotary = LlamaRotary(self.head_dim, max_pos)

    @staticmethod
    def repeat_kv(x, n_rep):
        """HF repeat_kv: expand + reshape (not repeat_interleave)."""
        b, kvh, s, hd = x.shape
        if n_rep == 1:
            return x
        x = x[:, :, None, :, :].expand(b, kvh, n_rep, s, hd)
        return x.reshape(b, kvh * n_rep, s, hd)

    def forward(self, x, mask):
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = self.rotary(s)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        n_rep = self.heads // self.kv_heads
        k = self.repeat_kv(k, n_rep)
        v = self.repeat_kv(v, n_rep)
        w = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)
        w = w + mask
        w = torch.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        o = torch.matmul(w, v).transpose(1, 2).reshape(b, s, -1)
        return self.o_proj(o)


class LlamaMLP(nn.Module):
    def __init__(self, d, ffn):
        super().__init__()
        self.gate_proj = nn.Linear(d, ffn, bias=False)
        self.up_proj = nn.Linear(d, ffn, bias=False)
        self.down_proj = nn.Linear(ffn, d, bias=False)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))


class LlamaLayer(nn.Module):
    def __init__(self, d, heads, kv_heads, ffn, max_pos):
        super().__init__()
        self.input_layernorm = LlamaRMSNorm(d)
        self.self_attn = LlamaAttention(d, heads, kv_heads, max_pos)
        self.post_attention_layernorm = LlamaRMSNorm(d)
        self.mlp = LlamaMLP(d, ffn)

    def forward(self, x, mask):
        x = x + self.self_attn(self.input_layernorm(x), mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaLike(nn.Module):
    """d 512, 4 layers, 8 heads with 2 key/value heads (GQA), SwiGLU 1376,
    vocab 8000, seq 128 (inputs), RoPE, RMSNorm; head tied to the
    embedding (lm_head.weight = embed_tokens.weight) when tie."""
    def __init__(self, vocab=8000, d=512, layers=4, heads=8, kv_heads=2, ffn=1376,
                 max_pos=512, tie=False):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(
            [LlamaLayer(d, heads, kv_heads, ffn, max_pos) for _ in range(layers)])
        self.norm = LlamaRMSNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        if tie:
            self.lm_head.weight = self.embed_tokens.weight

    def forward(self, input_ids):
        s = input_ids.shape[1]
        x = self.embed_tokens(input_ids)
        # HF's causal mask: 0 on and below the diagonal, dtype-min above
        mask = torch.full((s, s), torch.finfo(x.dtype).min, device=x.device)
        mask = torch.triu(mask, diagonal=1)[None, None, :, :]
        for layer in self.layers:
            x = layer(x, mask)
        return self.lm_head(self.norm(x))


def llama_like():
    return LlamaLike(tie=False)


def llama_tied():
    return LlamaLike(tie=True)


class GPT2Attention(nn.Module):
    """HF GPT2Attention: c_attn (one QKV Linear), causal bias buffer and
    torch.where against the dtype minimum."""
    def __init__(self, d, heads, ctx):
        super().__init__()
        self.heads, self.head_dim = heads, d // heads
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.attn_dropout = nn.Dropout(0.1)
        self.resid_dropout = nn.Dropout(0.1)
        self.register_buffer("bias", torch.tril(torch.ones(ctx, ctx, dtype=torch.bool))
                             .view(1, 1, ctx, ctx), persistent=False)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.c_attn(x).split(d, dim=2)
        q = q.view(b, s, self.heads, self.head_dim).permute(0, 2, 1, 3)
        k = k.view(b, s, self.heads, self.head_dim).permute(0, 2, 1, 3)
        v = v.view(b, s, self.heads, self.head_dim).permute(0, 2, 1, 3)
        w = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        causal = self.bias[:, :, :s, :s]
        w = torch.where(causal, w, torch.tensor(torch.finfo(w.dtype).min, dtype=w.dtype))
        w = self.attn_dropout(torch.softmax(w, dim=-1))
        o = torch.matmul(w, v).permute(0, 2, 1, 3).reshape(b, s, d)
        return self.resid_dropout(self.c_proj(o))


class GPT2Block(nn.Module):
    def __init__(self, d, heads, ctx):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = GPT2Attention(d, heads, ctx)
        self.ln_2 = nn.LayerNorm(d)
        self.c_fc = nn.Linear(d, 4 * d)
        self.act = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * d, d)
        self.dropout = nn.Dropout(0.1)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.dropout(self.c_proj(self.act(self.c_fc(self.ln_2(x)))))


class GPT2Tanh(nn.Module):
    """d 384, 4 layers, 6 heads, vocab 8000, ctx 512, GELU tanh form, LM head
    an nn.Linear whose weight is the token embedding (HF's tie)."""
    def __init__(self, vocab=8000, d=384, layers=4, heads=6, ctx=512):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(ctx, d)
        self.drop = nn.Dropout(0.1)
        self.h = nn.ModuleList([GPT2Block(d, heads, ctx) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, input_ids):
        s = input_ids.shape[1]
        pos = torch.arange(s, dtype=torch.long, device=input_ids.device).unsqueeze(0)
        x = self.drop(self.wte(input_ids) + self.wpe(pos))
        for blk in self.h:
            x = blk(x)
        return self.lm_head(self.ln_f(x))


def gpt2_tanh():
    return GPT2Tanh()


class T5LayerNorm(nn.Module):
    """HF T5LayerNorm: RMS, no mean subtraction, no bias."""
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        var = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(var + self.eps)
        return self.weight * x


class T5Attention(nn.Module):
    """HF T5Attention without caches: no biases, no 1/sqrt(d) scaling, a
    learned relative position bias in the first layer of each stack."""
    def __init__(self, d, heads, kv_dim, has_bias, bidirectional, buckets=32, max_dist=128):
        super().__init__()
        self.heads, self.kv = heads, kv_dim
        inner = heads * kv_dim
        self.q = nn.Linear(d, inner, bias=False)
        self.k = nn.Linear(d, inner, bias=False)
        self.v = nn.Linear(d, inner, bias=False)
        self.o = nn.Linear(inner, d, bias=False)
        self.bidirectional, self.buckets, self.max_dist = bidirectional, buckets, max_dist
        self.relative_attention_bias = nn.Embedding(buckets, heads) if has_bias else None

    def bucket(self, rel):
        nb = self.buckets
        ret = torch.zeros_like(rel)
        if self.bidirectional:
            nb //= 2
            ret = ret + (rel > 0).to(torch.long) * nb
            rel = torch.abs(rel)
        else:
            rel = -torch.min(rel, torch.zeros_like(rel))
        max_exact = nb // 2
        is_small = rel < max_exact
        large = max_exact + (torch.log(rel.float() / max_exact) / math.log(self.max_dist / max_exact)
                             * (nb - max_exact)).to(torch.long)
        large = torch.min(large, torch.full_like(large, nb - 1))
        return ret + torch.where(is_small, rel, large)

    def position_bias(self, q_len, k_len, device):
        ctx = torch.arange(q_len, dtype=torch.long, device=device)[:, None]
        mem = torch.arange(k_len, dtype=torch.long, device=device)[None, :]
        b = self.bucket(mem - ctx)
        return self.relative_attention_bias(b).permute(2, 0, 1).unsqueeze(0)

    def forward(self, x, kv=None, bias=None, mask=None):
        b, s, _ = x.shape
        kv = x if kv is None else kv
        t = kv.shape[1]
        q = self.q(x).view(b, s, self.heads, self.kv).transpose(1, 2)
        k = self.k(kv).view(b, t, self.heads, self.kv).transpose(1, 2)
        v = self.v(kv).view(b, t, self.heads, self.kv).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(3, 2))
        if bias is None:
            if self.relative_attention_bias is not None:
                bias = self.position_bias(s, t, x.device)
                if mask is not None:
                    bias = bias + mask
            else:
                bias = None
        if bias is not None:
            scores = scores + bias
        w = torch.softmax(scores.float(), dim=-1).type_as(scores)
        o = torch.matmul(w, v).transpose(1, 2).reshape(b, s, -1)
        return self.o(o), bias


class T5FF(nn.Module):
    def __init__(self, d, ff):
        super().__init__()
        self.layer_norm = T5LayerNorm(d)
        self.wi = nn.Linear(d, ff, bias=False)
        self.wo = nn.Linear(ff, d, bias=False)

    def forward(self, x):
        return x + self.wo(F.relu(self.wi(self.layer_norm(x))))


class T5Block(nn.Module):
    def __init__(self, d, heads, kv, ff, decoder, first):
        super().__init__()
        self.ln_self = T5LayerNorm(d)
        self.self_attn = T5Attention(d, heads, kv, first, not decoder)
        self.decoder = decoder
        if decoder:
            self.ln_cross = T5LayerNorm(d)
            self.cross_attn = T5Attention(d, heads, kv, False, True)
        self.ff = T5FF(d, ff)

    def forward(self, x, bias, mask=None, enc=None):
        y, bias = self.self_attn(self.ln_self(x), bias=bias, mask=mask)
        x = x + y
        if self.decoder:
            y, _ = self.cross_attn(self.ln_cross(x), kv=enc)
            x = x + y
        return self.ff(x), bias


class T5Like(nn.Module):
    """d 256, 2 encoder + 2 decoder blocks, 4 heads of 64, FF 1024 (ReLU),
    vocab 8000, shared embedding, separate LM head, no biases anywhere;
    inputs input_ids and decoder_input_ids, 128 tokens each."""
    def __init__(self, vocab=8000, d=256, layers=2, heads=4, kv=64, ff=1024):
        super().__init__()
        self.shared = nn.Embedding(vocab, d)
        self.encoder = nn.ModuleList([T5Block(d, heads, kv, ff, False, i == 0) for i in range(layers)])
        self.enc_norm = T5LayerNorm(d)
        self.decoder = nn.ModuleList([T5Block(d, heads, kv, ff, True, i == 0) for i in range(layers)])
        self.dec_norm = T5LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, input_ids, decoder_input_ids):
        x = self.shared(input_ids)
        bias = None
        for blk in self.encoder:
            x, bias = blk(x, bias)
        enc = self.enc_norm(x)
        y = self.shared(decoder_input_ids)
        t = y.shape[1]
        causal = torch.triu(torch.full((t, t), torch.finfo(y.dtype).min, device=y.device), 1)
        bias = None
        for blk in self.decoder:
            y, bias = blk(y, bias, mask=causal[None, None], enc=enc)
        return self.lm_head(self.dec_norm(y))


def t5_like():
    return T5Like()


class ResBlockGN(nn.Module):
    def __init__(self, cin, cout, groups=32):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.norm2 = nn.GroupNorm(groups, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.act = nn.SiLU()
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x):
        h = self.conv1(self.act(self.norm1(x)))
        h = self.conv2(self.act(self.norm2(h)))
        return self.skip(x) + h


class SpatialAttention(nn.Module):
    """Single-head self-attention over the H*W positions (diffusers' AttnBlock)."""
    def __init__(self, c, groups=32):
        super().__init__()
        self.norm = nn.GroupNorm(groups, c)
        self.q = nn.Conv2d(c, c, 1)
        self.k = nn.Conv2d(c, c, 1)
        self.v = nn.Conv2d(c, c, 1)
        self.proj = nn.Conv2d(c, c, 1)

    def forward(self, x):
        b, c, hh, ww = x.shape
        h = self.norm(x)
        q = self.q(h).reshape(b, c, hh * ww).permute(0, 2, 1)
        k = self.k(h).reshape(b, c, hh * ww)
        v = self.v(h).reshape(b, c, hh * ww)
        w = torch.softmax(torch.bmm(q, k) * (c ** -0.5), dim=2)
        o = torch.bmm(v, w.permute(0, 2, 1)).reshape(b, c, hh, ww)
        return x + self.proj(o)


class DiffusionUNet(nn.Module):
    """Input 3x64x64; channels 64/128/256 at 64/32/16 px, one GroupNorm-SiLU
    res block per level, spatial self-attention at 16 px (256 positions),
    nearest Upsample x2 + conv, skip concatenations; no time embedding."""
    def __init__(self, cin=3, ch=(64, 128, 256)):
        super().__init__()
        self.conv_in = nn.Conv2d(cin, ch[0], 3, padding=1)
        self.down = nn.ModuleList()
        self.pools = nn.ModuleList()
        c = ch[0]
        for i, co in enumerate(ch):
            self.down.append(ResBlockGN(c, co))
            self.pools.append(nn.Conv2d(co, co, 3, stride=2, padding=1)
                              if i < len(ch) - 1 else nn.Identity())
            c = co
        self.mid1 = ResBlockGN(c, c)
        self.mid_attn = SpatialAttention(c)
        self.mid2 = ResBlockGN(c, c)
        self.up = nn.ModuleList()
        self.upsample = nn.ModuleList()
        for i, co in enumerate(reversed(ch)):
            self.up.append(ResBlockGN(c + co, co))
            self.upsample.append(nn.Sequential(nn.Upsample(scale_factor=2.0, mode="nearest"),
                                               nn.Conv2d(co, co, 3, padding=1))
                                 if i < len(ch) - 1 else nn.Identity())
            c = co
        self.norm_out = nn.GroupNorm(32, c)
        self.act = nn.SiLU()
        self.conv_out = nn.Conv2d(c, cin, 3, padding=1)

    def forward(self, x):
        h = self.conv_in(x)
        skips = []
        for blk, pool in zip(self.down, self.pools):
            h = blk(h)
            skips.append(h)
            h = pool(h)
        h = self.mid2(self.mid_attn(self.mid1(h)))
        for blk, up, skip in zip(self.up, self.upsample, reversed(skips)):
            h = up(blk(torch.cat([h, skip], dim=1)))
        return self.conv_out(self.act(self.norm_out(h)))


def diffusion_unet():
    return DiffusionUNet()


class WhisperLayer(nn.Module):
    def __init__(self, d, heads, ffn):
        super().__init__()
        self.heads, self.hd = heads, d // heads
        self.self_attn_layer_norm = nn.LayerNorm(d)
        self.q_proj = nn.Linear(d, d)
        self.k_proj = nn.Linear(d, d, bias=False)
        self.v_proj = nn.Linear(d, d)
        self.out_proj = nn.Linear(d, d)
        self.final_layer_norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, ffn)
        self.fc2 = nn.Linear(ffn, d)
        self.act = nn.GELU()

    def forward(self, x):
        b, s, d = x.shape
        h = self.self_attn_layer_norm(x)
        q = (self.q_proj(h) * self.hd ** -0.5).view(b, s, self.heads, self.hd).transpose(1, 2)
        k = self.k_proj(h).view(b, s, self.heads, self.hd).transpose(1, 2)
        v = self.v_proj(h).view(b, s, self.heads, self.hd).transpose(1, 2)
        w = torch.softmax(torch.matmul(q, k.transpose(2, 3)), dim=-1)
        o = torch.matmul(w, v).transpose(1, 2).reshape(b, s, d)
        x = x + self.out_proj(o)
        return x + self.fc2(self.act(self.fc1(self.final_layer_norm(x))))


class WhisperEncoder(nn.Module):
    """HF WhisperEncoder shape: input 80 mel bins x 1000 frames; Conv1d(80,
    d, 3) GELU, Conv1d(d, d, 3, stride 2) GELU -> 500 positions, a fixed
    sinusoidal position table (a buffer), d 256, 4 pre-LN layers of 4 heads,
    FFN 1024, final LayerNorm."""
    def __init__(self, mels=80, d=256, layers=4, heads=4, ffn=1024, positions=500):
        super().__init__()
        self.conv1 = nn.Conv1d(mels, d, 3, padding=1)
        self.conv2 = nn.Conv1d(d, d, 3, stride=2, padding=1)
        self.act = nn.GELU()
        half = d // 2
        inv = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32) / (half - 1))
        t = torch.arange(positions, dtype=torch.float32)[:, None] * inv[None, :]
        self.register_buffer("embed_positions", torch.cat([t.sin(), t.cos()], dim=1))
        self.layers = nn.ModuleList([WhisperLayer(d, heads, ffn) for _ in range(layers)])
        self.layer_norm = nn.LayerNorm(d)

    def forward(self, input_features):
        x = self.act(self.conv1(input_features))
        x = self.act(self.conv2(x)).permute(0, 2, 1)
        x = x + self.embed_positions
        for layer in self.layers:
            x = layer(x)
        return self.layer_norm(x)


def whisper_encoder():
    return WhisperEncoder()


class TimmAttention(nn.Module):
    """timm's vision_transformer.Attention (v0.9) without fused attention (torch
    1.13 has no F.scaled_dot_product_attention): one qkv Linear, the heads
    permuted out of it and unbound, q scaled, the weights named attn."""
    def __init__(self, dim, heads):
        super().__init__()
        self.num_heads, self.head_dim = heads, dim // heads
        self.scale = self.head_dim ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=True)
        self.attn_drop = nn.Dropout(0.0)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(0.0)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        q = q * self.scale
        attn = q @ k.transpose(-2, -1)
        attn = attn.softmax(dim=-1)
        attn = self.attn_drop(attn)
        x = attn @ v
        x = x.transpose(1, 2).reshape(B, N, C)
        x = self.proj(x)
        x = self.proj_drop(x)
        return x


class TimmMlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.drop1 = nn.Dropout(0.0)
        self.fc2 = nn.Linear(hidden, dim)
        self.drop2 = nn.Dropout(0.0)

    def forward(self, x):
        return self.drop2(self.fc2(self.drop1(self.act(self.fc1(x)))))


class TimmBlock(nn.Module):
    def __init__(self, dim, heads, mlp_ratio=4.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = TimmAttention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = TimmMlp(dim, int(dim * mlp_ratio))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class TimmViT(nn.Module):
    """timm's VisionTransformer (v0.9) as vit_tiny_patch8_224 would be: patch
    8 on 224 px (784 patches and a class token), dim 192, 6 blocks of 3
    heads; the attention weights [B, 3, 785, 785] set the no_grad peak."""
    def __init__(self, img=224, patch=8, dim=192, depth=6, heads=3, classes=1000):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, patch, patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, (img // patch) ** 2 + 1, dim) * 0.02)
        self.pos_drop = nn.Dropout(0.0)
        self.blocks = nn.Sequential(*[TimmBlock(dim, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1)
        x = self.pos_drop(x + self.pos_embed)
        x = self.norm(self.blocks(x))
        return self.head(x[:, 0])


def vit_timm_p8():
    return TimmViT()


class NanoLayerNorm(nn.Module):
    """nanoGPT's LayerNorm: F.layer_norm with an optional bias (not nn.LayerNorm)."""
    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class NanoAttention(nn.Module):
    """nanoGPT's CausalSelfAttention without flash (torch 1.13): c_attn split
    into q, k, v, the @ operator, masked_fill against the float tril buffer,
    F.softmax, y.transpose(1, 2).contiguous().view(...)."""
    def __init__(self, d, heads, ctx):
        super().__init__()
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.attn_dropout = nn.Dropout(0.1)
        self.resid_dropout = nn.Dropout(0.1)
        self.n_head, self.n_embd = heads, d
        self.register_buffer("bias", torch.tril(torch.ones(ctx, ctx)).view(1, 1, ctx, ctx))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class NanoMLP(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.c_fc = nn.Linear(d, 4 * d)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * d, d)
        self.dropout = nn.Dropout(0.1)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class NanoBlock(nn.Module):
    def __init__(self, d, heads, ctx):
        super().__init__()
        self.ln_1 = NanoLayerNorm(d, True)
        self.attn = NanoAttention(d, heads, ctx)
        self.ln_2 = NanoLayerNorm(d, True)
        self.mlp = NanoMLP(d)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class NanoGPT(nn.Module):
    """Karpathy's nanoGPT model.py (GPT), vocab 8000, block 256, 4 layers of 6
    heads, d 384, dropout 0.1, biases: wte tied to lm_head
    (transformer.wte.weight = lm_head.weight); without targets the head
    runs on the last position only (x[:, [-1], :])."""
    def __init__(self, vocab=8000, ctx=256, layers=4, heads=6, d=384):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, d), wpe=nn.Embedding(ctx, d), drop=nn.Dropout(0.1),
            h=nn.ModuleList([NanoBlock(d, heads, ctx) for _ in range(layers)]), ln_f=NanoLayerNorm(d, True)))
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.transformer.wte.weight = self.lm_head.weight

    def forward(self, idx):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        return self.lm_head(x[:, [-1], :])


def nanogpt():
    return NanoGPT()


class YConv(nn.Module):
    """ultralytics/yolov5 models/common.py Conv: conv (no bias), BatchNorm, SiLU."""
    def __init__(self, c1, c2, k=1, s=1, p=None):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, k // 2 if p is None else p, bias=False)
        self.bn = nn.BatchNorm2d(c2)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class YBottleneck(nn.Module):
    def __init__(self, c1, c2, shortcut=True):
        super().__init__()
        self.cv1 = YConv(c1, c2, 1, 1)
        self.cv2 = YConv(c2, c2, 3, 1)
        self.add = shortcut and c1 == c2

    def forward(self, x):
        return x + self.cv2(self.cv1(x)) if self.add else self.cv2(self.cv1(x))


class YC3(nn.Module):
    def __init__(self, c1, c2, n=1, shortcut=True):
        super().__init__()
        c_ = c2 // 2
        self.cv1 = YConv(c1, c_, 1, 1)
        self.cv2 = YConv(c1, c_, 1, 1)
        self.cv3 = YConv(2 * c_, c2, 1)
        self.m = nn.Sequential(*(YBottleneck(c_, c_, shortcut) for _ in range(n)))

    def forward(self, x):
        return self.cv3(torch.cat((self.m(self.cv1(x)), self.cv2(x)), 1))


class YSPPF(nn.Module):
    def __init__(self, c1, c2, k=5):
        super().__init__()
        c_ = c1 // 2
        self.cv1 = YConv(c1, c_, 1, 1)
        self.cv2 = YConv(c_ * 4, c2, 1, 1)
        self.m = nn.MaxPool2d(kernel_size=k, stride=1, padding=k // 2)

    def forward(self, x):
        x = self.cv1(x)
        y1 = self.m(x)
        y2 = self.m(y1)
        return self.cv2(torch.cat((x, y1, y2, self.m(y2)), 1))


class YConcat(nn.Module):
    def forward(self, x):
        return torch.cat(x, 1)


class YDetect(nn.Module):
    """Detect's convolutions per level; the inference path's reshape of each to
    [bs, 3 * ny * nx, 85] and their concatenation (no grid decoding)."""
    def __init__(self, ch, nc=80, na=3):
        super().__init__()
        self.no, self.na = nc + 5, na
        self.m = nn.ModuleList(nn.Conv2d(c, self.no * na, 1) for c in ch)

    def forward(self, x):
        z = []
        for i in range(len(self.m)):
            xi = self.m[i](x[i])
            bs, _, ny, nx = xi.shape
            xi = xi.view(bs, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2).contiguous()
            z.append(xi.view(bs, -1, self.no))
        return torch.cat(z, 1)


class YoloV5s(nn.Module):
    """yolov5s.yaml (v6.0, width 0.5, depth 0.33) as models/yolo.py's
    DetectionModel runs it: one nn.Sequential iterated by _forward_once,
    whose list y keeps the outputs later layers read (self.save) until the
    forward returns. Input 3x320x320, 80 classes."""
    def __init__(self):
        super().__init__()
        L = [(-1, YConv(3, 32, 6, 2, 2)), (-1, YConv(32, 64, 3, 2)), (-1, YC3(64, 64, 1)),
             (-1, YConv(64, 128, 3, 2)), (-1, YC3(128, 128, 2)), (-1, YConv(128, 256, 3, 2)),
             (-1, YC3(256, 256, 3)), (-1, YConv(256, 512, 3, 2)), (-1, YC3(512, 512, 1)),
             (-1, YSPPF(512, 512, 5)),
             (-1, YConv(512, 256, 1, 1)), (-1, nn.Upsample(None, 2, "nearest")), ([-1, 6], YConcat()),
             (-1, YC3(512, 256, 1, False)),
             (-1, YConv(256, 128, 1, 1)), (-1, nn.Upsample(None, 2, "nearest")), ([-1, 4], YConcat()),
             (-1, YC3(256, 128, 1, False)),
             (-1, YConv(128, 128, 3, 2)), ([-1, 14], YConcat()), (-1, YC3(256, 256, 1, False)),
             (-1, YConv(256, 256, 3, 2)), ([-1, 10], YConcat()), (-1, YC3(512, 512, 1, False)),
             ([17, 20, 23], YDetect((128, 256, 512)))]
        self.f = [f for f, _ in L]
        self.model = nn.Sequential(*[m for _, m in L])
        self.save = sorted({j for f in self.f if not isinstance(f, int) for j in f if j != -1})

    def forward(self, x):
        y = []
        for i, m in enumerate(self.model):
            f = self.f[i]
            if f != -1:
                x = y[f] if isinstance(f, int) else [x if j == -1 else y[j] for j in f]
            x = m(x)
            y.append(x if i in self.save else None)
        return x


def yolov5s():
    return YoloV5s()


IMG320 = [("input", (3, 320, 320), torch.float32)]


class EinsumAttention(nn.Module):
    """Softmax attention written lucidrains-style with torch.einsum: per-head
    projection tensors W [heads, d, head dim] instead of Linear layers."""
    def __init__(self, d, heads, dh):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.wq = nn.Parameter(torch.randn(heads, d, dh) * d ** -0.5)
        self.wk = nn.Parameter(torch.randn(heads, d, dh) * d ** -0.5)
        self.wv = nn.Parameter(torch.randn(heads, d, dh) * d ** -0.5)
        self.wo = nn.Parameter(torch.randn(heads, dh, d) * (heads * dh) ** -0.5)
        self.scale = dh ** -0.5

    def forward(self, x):
        h = self.norm(x)
        q = torch.einsum("bnd,hde->bhne", h, self.wq)
        k = torch.einsum("bnd,hde->bhne", h, self.wk)
        v = torch.einsum("bnd,hde->bhne", h, self.wv)
        attn = (torch.einsum("bhie,bhje->bhij", q, k) * self.scale).softmax(-1)
        o = torch.einsum("bhij,bhje->bhie", attn, v)
        return torch.einsum("bhne,hed->bnd", o, self.wo)


class EinsumBlock(nn.Module):
    def __init__(self, d, heads, dh):
        super().__init__()
        self.attn = EinsumAttention(d, heads, dh)
        self.norm = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(x)
        return x + self.mlp(self.norm(x))


class EinsumLinearAttention(nn.Module):
    """Linear attention (elu + 1 feature map, Katharopoulos et al.) with
    torch.einsum: ellipsis projections, kv and normaliser contractions and a
    three-operand einsum for the output."""
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.norm = nn.LayerNorm(d)
        self.wq = nn.Parameter(torch.randn(d, d) * d ** -0.5)
        self.wk = nn.Parameter(torch.randn(d, d) * d ** -0.5)
        self.wv = nn.Parameter(torch.randn(d, d) * d ** -0.5)
        self.wo = nn.Parameter(torch.randn(d, d) * d ** -0.5)

    def forward(self, x):
        b, n, d = x.shape
        h = self.norm(x)
        q = F.elu(torch.einsum("...nd,de->...ne", h, self.wq)) + 1
        k = F.elu(torch.einsum("...nd,de->...ne", h, self.wk)) + 1
        v = torch.einsum("...nd,de->...ne", h, self.wv)
        q = q.reshape(b, n, self.heads, d // self.heads)
        k = k.reshape(b, n, self.heads, d // self.heads)
        v = v.reshape(b, n, self.heads, d // self.heads)
        kv = torch.einsum("bnhd,bnhe->bhde", k, v)
        z = 1 / (torch.einsum("bnhd,bhd->bnh", q, k.sum(1)) + 1e-6)
        o = torch.einsum("bnhd,bhde,bnh->bnhe", q, kv, z).reshape(b, n, d)
        return x + torch.einsum("bnd,de->bne", o, self.wo)


class EinsumMix(nn.Module):
    """Float features [B, 128, 64]: 2 softmax-attention blocks (4 heads of 16)
    with MLPs, 1 linear-attention block, pooling over the sequence with an
    implicit-output einsum ("bnd,n" -> "bd") and a Linear(64, 10) head. Every
    product but the MLPs' and the head's is a torch.einsum."""
    def __init__(self, n=128, d=64, heads=4, dh=16, classes=10):
        super().__init__()
        self.blocks = nn.ModuleList([EinsumBlock(d, heads, dh) for _ in range(2)])
        self.linear_attn = EinsumLinearAttention(d, heads)
        self.norm = nn.LayerNorm(d)
        self.w_pool = nn.Parameter(torch.randn(n) / n)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        for blk in self.blocks:
            x = blk(x)
        x = self.linear_attn(x)
        pooled = torch.einsum("bnd,n", self.norm(x), self.w_pool)
        return self.head(pooled)


def einsum_mix():
    return EinsumMix()


def _gpt2_config(d, heads, ctx):
    """GPT2Config's fields tests/llm/families.py's GPT-2 layers read."""
    return {"max_position_embeddings": ctx, "hidden_size": d, "num_attention_heads": heads,
            "intermediate_size": 4 * d, "hidden_act": "gelu_new", "eps": 1e-5}


class HFGPT2Attention(families.GPT2Attention):
    """transformers' GPT2Attention (eager) with use_cache=False: no present."""
    def forward(self, hidden_states, layer_past=None, attention_mask=None):  # no cache, no mask
        query, key, value = self.c_attn(hidden_states).split(self.split_size, dim=2)
        query = self._split_heads(query, self.num_heads, self.head_dim)
        key = self._split_heads(key, self.num_heads, self.head_dim)
        value = self._split_heads(value, self.num_heads, self.head_dim)
        attn_output, attn_weights = self._attn(query, key, value)
        attn_output = self._merge_heads(attn_output, self.num_heads, self.head_dim)
        attn_output = self.c_proj(attn_output)
        attn_output = self.resid_dropout(attn_output)
        return (attn_output, None)


class HFGPT2Block(families.GPT2Block):
    """GPT2Block as tests/llm/families.py writes transformers' code for the
    LLM truth (its Conv1D: torch.addmm on an [in, out] weight; gelu_new as
    Python ops), over the attention above."""
    def __init__(self, d, heads, ctx):
        nn.Module.__init__(self)
        c = _gpt2_config(d, heads, ctx)
        self.ln_1 = nn.LayerNorm(d, eps=1e-5)
        self.attn = HFGPT2Attention(c)
        self.ln_2 = nn.LayerNorm(d, eps=1e-5)
        self.mlp = families.GPT2MLP(c)


class HFGPT2LMHead(nn.Module):
    """transformers v4.30 GPT2LMHeadModel as written (eager attention, no
    cache, Conv1D layers, gelu_new), n_embd 256, 4 layers of 4 heads, 256
    positions, vocab 8000; lm_head tied to wte; returns the logits."""
    def __init__(self, vocab=8000, d=256, layers=4, heads=4, ctx=256):
        super().__init__()
        self.transformer = nn.Module()
        self.transformer.wte = nn.Embedding(vocab, d)
        self.transformer.wpe = nn.Embedding(ctx, d)
        self.transformer.drop = nn.Dropout(0.1)
        self.transformer.h = nn.ModuleList([HFGPT2Block(d, heads, ctx) for _ in range(layers)])
        self.transformer.ln_f = nn.LayerNorm(d, eps=1e-5)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.transformer.wte.weight

    def forward(self, input_ids):
        t = self.transformer
        input_shape = input_ids.size()
        position_ids = torch.arange(0, input_shape[-1], dtype=torch.long, device=input_ids.device).unsqueeze(0)
        inputs_embeds = t.wte(input_ids)
        position_embeds = t.wpe(position_ids)
        hidden_states = inputs_embeds + position_embeds
        hidden_states = t.drop(hidden_states)
        for block in t.h:
            outputs = block(hidden_states)
            hidden_states = outputs[0]
        hidden_states = t.ln_f(hidden_states)
        return self.lm_head(hidden_states)


def gpt2_hf():
    return HFGPT2LMHead()


class FpnFlat(nn.Module):
    """torchvision's detection backbone (backbone_utils.resnet_fpn_backbone:
    IntermediateLayerGetter over a ResNet with FrozenBatchNorm2d, then
    FeaturePyramidNetwork with LastLevelMaxPool), its five maps flattened
    and concatenated into one [B, N] output for the loss."""
    def __init__(self):
        super().__init__()
        from torchvision.models.detection.backbone_utils import resnet_fpn_backbone
        self.m = resnet_fpn_backbone(backbone_name="resnet18", weights=None, trainable_layers=5)

    def forward(self, x):
        return torch.cat([v.flatten(1) for v in self.m(x).values()], 1)


def fpn_resnet18():
    return FpnFlat()


class SegOut(nn.Module):
    """torchvision segmentation models return a dict; this keeps ["out"]."""
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        return self.m(x)["out"]


def deeplabv3_mbv3():
    return SegOut(torchvision.models.segmentation.deeplabv3_mobilenet_v3_large(
        weights=None, weights_backbone=None, aux_loss=False))


def r3d_18():
    return torchvision.models.video.r3d_18(weights=None)


# --------------------------------------------------------------------------
# torchvision models (random weights, never downloaded).

def _tv(name, **kw):
    def make():
        return getattr(torchvision.models, name)(weights=None, **kw)
    make.__name__ = name
    return make


IMG224 = [("input", (3, 224, 224), torch.float32)]
IMG299 = [("input", (3, 299, 299), torch.float32)]
IMG128 = [("input", (3, 128, 128), torch.float32)]
TOK128 = [("input_ids", (128,), torch.int64)]
IMG64 = [("input", (3, 64, 64), torch.float32)]
VID4 = [("input", (3, 4, 56, 56), torch.float32)]  # 4 frames of 56 px: Conv3d is slow on CPU
MEL1000 = [("input_features", (80, 1000), torch.float32)]
SEQ128 = [("input", (128, 64), torch.float32)]  # 128 tokens of 64 float features

MODELS = {
    "resnet18": (_tv("resnet18"), IMG224),
    "resnet50": (_tv("resnet50"), IMG224),
    "resnet101": (_tv("resnet101"), IMG224),
    "vgg16": (_tv("vgg16"), IMG224),
    "mobilenet_v2": (_tv("mobilenet_v2"), IMG224),
    "efficientnet_b0": (_tv("efficientnet_b0"), IMG224),
    "densenet121": (_tv("densenet121"), IMG224),
    "squeezenet1_0": (_tv("squeezenet1_0"), IMG224),
    "convnext_tiny": (_tv("convnext_tiny"), IMG224),
    "inception_v3": (_tv("inception_v3", aux_logits=False, init_weights=False), IMG299),
    "vit_b_16": (_tv("vit_b_16"), IMG224),
    "bert_like": (bert_like, TOK128),
    "gpt_like": (gpt_like, TOK128),
    "lstm_model": (lstm_model, TOK128),
    "gru_model": (gru_model, TOK128),
    "unet_like": (unet_like, IMG128),
    # issue 10's wider zoo
    "swin_t": (_tv("swin_t"), IMG224),
    "mobilenet_v3_large": (_tv("mobilenet_v3_large"), IMG224),
    "regnet_y_400mf": (_tv("regnet_y_400mf"), IMG224),
    "shufflenet_v2_x1_0": (_tv("shufflenet_v2_x1_0"), IMG224),
    "googlenet": (_tv("googlenet", aux_logits=False, init_weights=False), IMG224),
    "efficientnet_v2_s": (_tv("efficientnet_v2_s"), IMG224),
    "r3d_18": (r3d_18, VID4),
    "deeplabv3_mbv3": (deeplabv3_mbv3, IMG224),
    "llama_like": (llama_like, TOK128),
    "llama_tied": (llama_tied, TOK128),
    "gpt2_tanh": (gpt2_tanh, TOK128),
    "t5_like": (t5_like, TOK128 + [("decoder_input_ids", (128,), torch.int64)]),
    "diffusion_unet": (diffusion_unet, IMG64),
    "whisper_encoder": (whisper_encoder, MEL1000),
    "vit_timm_p8": (vit_timm_p8, IMG224),
    "nanogpt": (nanogpt, TOK128),
    "yolov5s": (yolov5s, IMG320),
    "gpt2_hf": (gpt2_hf, TOK128),
    "fpn_resnet18": (fpn_resnet18, IMG224),
    "einsum_mix": (einsum_mix, SEQ128),
}

# the models issue 10 added (the old sixteen come first in MODELS)
NEW10 = ["swin_t", "mobilenet_v3_large", "regnet_y_400mf", "shufflenet_v2_x1_0",
         "googlenet", "efficientnet_v2_s", "r3d_18", "deeplabv3_mbv3", "llama_like",
         "llama_tied", "gpt2_tanh", "t5_like", "diffusion_unet", "whisper_encoder"]

# Vocabulary size per token-input model, for making valid random input_ids.
VOCAB = {"bert_like": 30522, "gpt_like": 50257, "lstm_model": 10000,
         "gru_model": 10000, "llama_like": 8000, "llama_tied": 8000,
         "gpt2_tanh": 8000, "t5_like": 8000, "nanogpt": 8000,
         "gpt2_hf": 8000}
