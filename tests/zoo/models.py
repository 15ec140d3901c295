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

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision


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
}

# Vocabulary size per token-input model, for making valid random input_ids.
VOCAB = {"bert_like": 30522, "gpt_like": 50257, "lstm_model": 10000,
         "gru_model": 10000}
