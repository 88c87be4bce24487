#!/usr/bin/env python3
"""Independent numpy reference forward pass for FISH's two real models.

Built only on the `gguf` Python package (GGUFReader + gguf.quants.dequantize)
and numpy: it shares no code with FISH's C++ engine, so the logits it writes
can validate that engine.

Supported architectures (read from general.architecture):
  llama   SmolLM2-135M-Instruct: RMSNorm, normal RoPE on adjacent pairs (the
          HF->GGUF converter permutes the q/k rows for it), GQA, SwiGLU,
          output = token_embd when output.weight is absent.
  gemma3  Gemma 3 270M: embeddings * sqrt(n_embd), RMSNorm whose GGUF weights
          already hold (1 + w), per-head q/k RMSNorm, NEOX RoPE (pairs i and
          i + n_rot/2), post-attention and post-FFN RMSNorm, GeGLU with the
          tanh GELU, sliding-window attention (window from metadata) on every
          layer except each 6th ((il + 1) % 6 == 0 is global), RoPE base
          10000 on sliding layers and the metadata freq_base on global ones,
          q scaled by 1/sqrt(key_length), tied output.

Numerics: every weight is dequantised once to float32 by gguf and cached as
the compute dtype (default float64, so the reference's own rounding error is
negligible next to the engine's); every matmul, norm, softmax and the
logsumexp run in that dtype. The whole sequence is one matrix with a causal
(and, for sliding layers, windowed) mask: no per-token loop. Greedy decoding
feeds one token per step through a KV cache, a separate code path; each run
checks that the greedy tokens equal the teacher-forced argmax.

Int8 activations (--act int8): the input of every matrix product with a
quantised weight is first rounded the way llama.cpp's CPU path rounds it
(ggml-quants.c quantize_row_q8_0/q8_1/q8_K_ref, written here in numpy from
that description): blocks of 32 with d = amax/127 stored as f16 and
q = round-half-away(x/d) for Q4_0/Q5_0/Q8_0 (Q8_0) and Q4_1/Q5_1 (Q8_1)
weights; blocks of 256 with iscale = -127/max (max: the signed value of
largest magnitude), q = min(127, round-half-even(iscale x)), d = 1/iscale in
f32 for K-quant weights (Q8_K). F32/F16/BF16 weights see the input as is.
The product is then taken in the compute dtype. What it showed (SmolLM2, 857
teacher-forced positions): FISH's int8 mode agrees with this int8 reference
on top-1 no better (96.3%) than with the f32 one (97.2%), and FISH's f32 path
with the same rounding inserted gets 97.3% against it. Activation rounding
is chaotic across layers: float-level differences flip single quanta, which
perturb the next layer's inputs by about a quantum, so two int8 engines that
differ only in summation order diverge as far as either does from f32. The
int8 top-1 gap is a property of the format, not of an implementation. Not
modelled: Q8_1's f16-rounded block sum (2^-11 relative on the min term).

Usage
  reference_forward.py MODEL.gguf --tokens 1,2,3 [--greedy N] [--extend-to N]
                       [--top-k 32] [--out FILE.json|FILE.npz] [--dtype float64]
                       [--act f32|int8]
  reference_forward.py MODEL.gguf --jobs JOBS.json   (many requests, one load)

  --tokens      comma-separated token ids, fed as given (add BOS yourself).
  --extend-to N if fewer than N ids were given, append greedily decoded
                tokens until there are N; teacher-forced results then cover
                all N positions (n_prompt_tokens says where the prompt ends).
  --greedy N    also greedy-decode N tokens after the given ids (argmax, no
                stop at EOS); stored under "greedy".
  --out         .json: the compact top-k format below; .npz: full float32
                logits [n_positions, n_vocab] plus the token ids; omitted:
                a short human-readable summary on stdout.

JSON format "fish-reference-logits/1" (one object):
  format, model {file, sha256, arch, n_vocab}, generator {script, numpy,
  gguf, compute_dtype, activations}, prompt (text or null), tokenizer (note or null),
  tokens [int]           every id fed (prompt + any --extend-to tokens),
  n_prompt_tokens int    how many of tokens were given with --tokens,
  n_positions int        = len(tokens): one entry per position below,
  top_k int,
  positions [ {          entry t is the prediction for token t+1 after
    ids [int],           reading tokens[0..t]: the top_k token ids, logit
    logprobs [float],      descending (ties: lower id first),
    logsumexp float } ]  log-probabilities log p = logit - logsumexp, and
                         the logsumexp over the FULL vocabulary, so
                         logit = logprob + logsumexp.
  greedy {n, ids [int], text?} (only with --greedy; text is added by
                         reference_tokenize.py annotate).

How a consumer compares its own logits l' (full vocab) at position t:
  top-1 agreement: argmax(l') == ids[0] (a near-tie can be skipped using
    logprobs[0] - logprobs[1]).
  bucketed KL(ref || fish): p_i = exp(logprobs[i]) for the k ids, p_r = 1 -
    sum p_i; q_i = softmax(l')[ids[i]], q_r = 1 - sum q_i;
    KL_k = sum p_i log(p_i / q_i) + p_r log(p_r / q_r). Merging the tail into
    one bucket can only lower KL, so KL_k <= the full KL(ref || fish).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
import time

import numpy as np

import gguf
from gguf.quants import dequantize

FORMAT = "fish-reference-logits/1"


def _field(reader: gguf.GGUFReader, key: str, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    return f.contents()


class Model:
    """Hyper-parameters and lazily dequantised, cached weights of one GGUF."""

    def __init__(self, path: str, dtype=np.float64, act: str = "f32"):
        self.path = path
        self.dtype = np.dtype(dtype)
        self.act = act
        self.reader = gguf.GGUFReader(path)
        self.tensors = {t.name: t for t in self.reader.tensors}
        self._cache: dict[str, np.ndarray] = {}
        r = self.reader
        arch = _field(r, "general.architecture")
        if arch not in ("llama", "gemma3"):
            raise SystemExit(f"{path}: general.architecture {arch!r} is not supported (llama, gemma3)")
        self.arch = arch
        p = arch + "."
        self.n_layer = int(_field(r, p + "block_count"))
        self.n_embd = int(_field(r, p + "embedding_length"))
        self.n_ff = int(_field(r, p + "feed_forward_length"))
        self.n_head = int(_field(r, p + "attention.head_count"))
        self.n_head_kv = int(_field(r, p + "attention.head_count_kv", self.n_head))
        self.head_dim = int(_field(r, p + "attention.key_length", self.n_embd // self.n_head))
        self.head_dim_v = int(_field(r, p + "attention.value_length", self.head_dim))
        self.n_rot = int(_field(r, p + "rope.dimension_count", self.head_dim))
        self.eps = float(_field(r, p + "attention.layer_norm_rms_epsilon"))
        self.freq_base = float(_field(r, p + "rope.freq_base", 10000.0))
        if _field(r, p + "rope.scaling.type") not in (None, "none"):
            raise SystemExit(f"{path}: rope scaling {_field(r, p + 'rope.scaling.type')!r} is not implemented")
        if arch == "gemma3":
            # llama.cpp (llama-model.cpp, LLM_ARCH_GEMMA3): sliding_window > 0
            # selects the interleaved SWA graph with set_swa_pattern(6): layer il
            # is sliding when il % 6 < 5; sliding layers use RoPE base 10000
            # (rope_freq_base_train_swa), global ones the metadata freq_base.
            self.n_swa = int(_field(r, p + "attention.sliding_window", 0))
            self.swa_period = 6
            self.freq_base_swa = 10000.0
            # f_attention_scale = 1/sqrt(n_embd_head_k) (27B alone differs).
            self.attn_scale = 1.0 / math.sqrt(self.head_dim)
            self.rope_neox = True
            if _field(r, p + "final_logit_softcapping") is not None and self.n_swa == 0:
                raise SystemExit(f"{path}: final logit softcapping (non-SWA gemma3) is not implemented")
        else:
            self.n_swa = 0
            self.swa_period = 0
            self.freq_base_swa = self.freq_base
            self.attn_scale = 1.0 / math.sqrt(self.head_dim)
            self.rope_neox = False
        for name in self.tensors:
            # per-band RoPE divisors (llama 3 style) and biases are not implemented
            if name.startswith("rope_freqs") or name.endswith(".bias"):
                raise SystemExit(f"{path}: tensor {name} is not supported by this reference")
        tok = self.tensors["token_embd.weight"]
        self.n_vocab = int(tok.shape[1])

    # -- weights ---------------------------------------------------------
    def w(self, name: str) -> np.ndarray:
        """Dequantised tensor in numpy order (GGUF ne reversed): a matrix
        with ne = [n_in, n_out] comes back as [n_out, n_in]."""
        a = self._cache.get(name)
        if a is None:
            t = self.tensors[name]
            a = dequantize(t.data, t.tensor_type)
            shape = tuple(int(s) for s in reversed(t.shape.tolist()))
            a = np.ascontiguousarray(a.reshape(shape), dtype=self.dtype)
            self._cache[name] = a
        return a

    def act_format(self, name: str) -> str | None:
        """The activation format an int8 engine pairs with this weight (None: f32)."""
        if self.act != "int8":
            return None
        return _ACT_FORMAT.get(self.tensors[name].tensor_type.name)

    def mm(self, x: np.ndarray, name: str) -> np.ndarray:
        """x @ W.T for the weight `name` ([..., n_in] -> [..., n_out]), with x rounded to the
        weight's activation format in --act int8 mode."""
        fmt = self.act_format(name)
        if fmt is not None:
            x = quantize_roundtrip(x, fmt).astype(self.dtype)
        return x @ self.w(name).T

    def output_name(self) -> str:
        return "output.weight" if self.has("output.weight") else "token_embd.weight"

    def has(self, name: str) -> bool:
        return name in self.tensors

    def output_weight(self) -> np.ndarray:
        return self.w(self.output_name())

    def is_swa(self, il: int) -> bool:
        return self.n_swa > 0 and self.swa_period > 0 and il % self.swa_period < self.swa_period - 1

    def sha256(self) -> str:
        h = hashlib.sha256()
        with open(self.path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 22), b""):
                h.update(chunk)
        return h.hexdigest()


# -- int8 activations (llama.cpp's CPU formats) -------------------------------

_ACT_FORMAT = {"Q4_0": "q8_0", "Q5_0": "q8_0", "Q8_0": "q8_0", "Q4_1": "q8_1", "Q5_1": "q8_1",
               "Q2_K": "q8_k", "Q3_K": "q8_k", "Q4_K": "q8_k", "Q5_K": "q8_k", "Q6_K": "q8_k"}


def quantize_roundtrip(x: np.ndarray, fmt: str) -> np.ndarray:
    """x rounded through the int8 activation format fmt (q8_0, q8_1, q8_k), as float32.

    Arithmetic in float32 like ggml's reference quantisers; the last axis is cut into
    blocks (32 or 256 values; it must be a multiple)."""
    x32 = np.asarray(x, dtype=np.float32)
    bs = 256 if fmt == "q8_k" else 32
    if x32.shape[-1] % bs:
        raise SystemExit(f"int8 activations: row of {x32.shape[-1]} values is not a multiple of {bs}")
    b = x32.reshape(-1, bs)
    with np.errstate(divide="ignore", invalid="ignore"):
        if fmt in ("q8_0", "q8_1"):
            d = (np.abs(b).max(axis=1, keepdims=True) / np.float32(127)).astype(np.float32)
            inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
            v = (b * inv).astype(np.float32)
            q = np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))  # half away from zero
            out = d.astype(np.float16).astype(np.float32) * q
        elif fmt == "q8_k":
            idx = np.abs(b).argmax(axis=1)  # first of equal magnitudes, as ggml's strict '>'
            mx = b[np.arange(b.shape[0]), idx][:, None]
            iscale = np.where(mx != 0, np.float32(-127) / mx, np.float32(0)).astype(np.float32)
            q = np.minimum(np.rint((iscale * b).astype(np.float32)), 127)  # nearest_int: half to even
            d = np.where(mx != 0, np.float32(1) / iscale, np.float32(0)).astype(np.float32)
            out = d * q
        else:
            raise ValueError(fmt)
    return out.astype(np.float32).reshape(x32.shape)


# -- primitives --------------------------------------------------------------
def rms_norm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """ggml_rms_norm then multiply: x / sqrt(mean(x^2) + eps) * w, over the last axis."""
    ms = np.mean(x * x, axis=-1, keepdims=True)
    return x / np.sqrt(ms + eps) * w


def rope(x: np.ndarray, pos: np.ndarray, n_rot: int, base: float, neox: bool) -> np.ndarray:
    """Rotary embedding on x [T, n_heads, head_dim] at integer positions pos [T].

    Pair j (0 <= j < n_rot/2) turns by pos * base^(-2j/n_rot). Normal mode
    (ggml mode 0) pairs dims (2j, 2j+1); NEOX mode pairs (j, j + n_rot/2).
    Dims at and past n_rot pass through.
    """
    half = n_rot // 2
    inv = base ** (-np.arange(half, dtype=np.float64) * 2.0 / n_rot)
    ang = pos.astype(np.float64)[:, None] * inv[None, :]  # [T, half]
    cos = np.cos(ang).astype(x.dtype)[:, None, :]
    sin = np.sin(ang).astype(x.dtype)[:, None, :]
    out = x.copy()
    if neox:
        a = x[..., :half]
        b = x[..., half:n_rot]
        out[..., :half] = a * cos - b * sin
        out[..., half:n_rot] = a * sin + b * cos
    else:
        a = x[..., 0:n_rot:2]
        b = x[..., 1:n_rot:2]
        out[..., 0:n_rot:2] = a * cos - b * sin
        out[..., 1:n_rot:2] = a * sin + b * cos
    return out


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """ggml_gelu: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


def silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


def attention(q, k, v, scale: float, window: int, pos0: int = 0) -> np.ndarray:
    """Causal GQA attention of T new queries over all S keys.

    q [T, n_head, d] at positions pos0..pos0+T-1; k/v [S, n_kv, d] at
    positions 0..S-1 (S = pos0 + T). Query head h reads kv head
    h // (n_head / n_kv). Key j is masked for query position i when j > i,
    and with window > 0 also when i - j >= window (llama.cpp
    LLAMA_SWA_TYPE_STANDARD). Returns [T, n_head * d_v].
    """
    T, n_head, d = q.shape
    S, n_kv = k.shape[0], k.shape[1]
    g = n_head // n_kv
    qh = q.transpose(1, 0, 2).reshape(n_kv, g * T, d)  # [kv, g*T, d]
    kh = k.transpose(1, 2, 0)  # [kv, d, S]
    vh = v.transpose(1, 0, 2)  # [kv, S, dv]
    s = np.matmul(qh, kh) * scale  # [kv, g*T, S]
    s = s.reshape(n_kv, g, T, S)
    i = pos0 + np.arange(T)[:, None]
    j = np.arange(S)[None, :]
    masked = j > i
    if window > 0:
        masked = masked | (i - j >= window)
    s = np.where(masked, -np.inf, s)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    o = np.matmul(p.reshape(n_kv, g * T, S), vh)  # [kv, g*T, dv]
    o = o.reshape(n_kv * g, T, -1).transpose(1, 0, 2)  # [T, n_head, dv]
    return o.reshape(T, -1)


# -- forward -----------------------------------------------------------------
def hidden_states(m: Model, tokens: list[int], cache: list | None = None) -> np.ndarray:
    """Final-normed hidden states [T, n_embd] of tokens.

    Without cache the tokens sit at positions 0..T-1 (the teacher-forced
    path). With cache (a list, empty at the start; greedy decoding only) they
    follow the positions already cached, whose roped K and V the list holds per
    layer, and their own K/V are appended.
    """
    ids = np.asarray(tokens, dtype=np.int64)
    if ids.size == 0 or ids.min() < 0 or ids.max() >= m.n_vocab:
        raise SystemExit(f"token ids must be in [0, {m.n_vocab}), got {tokens}")
    T = ids.size
    pos0 = cache[0][0].shape[0] if cache else 0
    pos = pos0 + np.arange(T)
    x = m.w("token_embd.weight")[ids].copy()
    if m.arch == "gemma3":
        x *= np.sqrt(np.float32(m.n_embd))  # llama.cpp: ggml_scale(inpL, sqrtf(n_embd))
    for il in range(m.n_layer):
        b = f"blk.{il}."
        h = rms_norm(x, m.w(b + "attn_norm.weight"), m.eps)
        q = m.mm(h, b + "attn_q.weight").reshape(T, m.n_head, m.head_dim)
        k = m.mm(h, b + "attn_k.weight").reshape(T, m.n_head_kv, m.head_dim)
        v = m.mm(h, b + "attn_v.weight").reshape(T, m.n_head_kv, m.head_dim_v)
        if m.arch == "gemma3":
            q = rms_norm(q, m.w(b + "attn_q_norm.weight"), m.eps)
            k = rms_norm(k, m.w(b + "attn_k_norm.weight"), m.eps)
        swa = m.is_swa(il)
        base = m.freq_base_swa if swa else m.freq_base
        q = rope(q, pos, m.n_rot, base, m.rope_neox)
        k = rope(k, pos, m.n_rot, base, m.rope_neox)
        if cache is not None:
            if len(cache) <= il:
                cache.append((k, v))
            else:
                k = np.concatenate([cache[il][0], k])
                v = np.concatenate([cache[il][1], v])
                cache[il] = (k, v)
        a = attention(q, k, v, m.attn_scale, m.n_swa if swa else 0, pos0)
        a = m.mm(a.reshape(T, -1), b + "attn_output.weight")
        if m.arch == "gemma3":
            a = rms_norm(a, m.w(b + "post_attention_norm.weight"), m.eps)
        x = x + a
        h = rms_norm(x, m.w(b + "ffn_norm.weight"), m.eps)
        gate = m.mm(h, b + "ffn_gate.weight")
        up = m.mm(h, b + "ffn_up.weight")
        act = gelu_tanh(gate) if m.arch == "gemma3" else silu(gate)
        f = m.mm(act * up, b + "ffn_down.weight")
        if m.arch == "gemma3":
            f = rms_norm(f, m.w(b + "post_ffw_norm.weight"), m.eps)
        x = x + f
    return rms_norm(x, m.w("output_norm.weight"), m.eps)


def logits(m: Model, tokens: list[int], last_only: bool = False) -> np.ndarray:
    """Logits [T, n_vocab] (or [1, n_vocab] for the last position only)."""
    h = hidden_states(m, tokens)
    if last_only:
        h = h[-1:]
    return m.mm(h, m.output_name())


def greedy(m: Model, tokens: list[int], n: int) -> list[int]:
    """n argmax tokens after tokens (KV-cached: one new token per step)."""
    cache: list = []
    out: list[int] = []
    feed = list(tokens)
    for _ in range(n):
        h = hidden_states(m, feed, cache)[-1:]
        nxt = int(np.argmax(m.mm(h, m.output_name())[0]))
        out.append(nxt)
        feed = [nxt]
    return out


def logsumexp_rows(l: np.ndarray) -> np.ndarray:
    mx = l.max(axis=-1, keepdims=True)
    return (mx + np.log(np.exp(l - mx).sum(axis=-1, keepdims=True)))[:, 0]


def top_k_rows(l: np.ndarray, k: int):
    """Per row: top-k ids by logit descending, ties broken by lower id."""
    k = min(k, l.shape[1])
    rows = []
    for r in l:
        part = np.argpartition(-r, k - 1)[:k]
        # include every id tied with the k-th value so the tie-break is by id
        kth = r[part].min()
        cand = np.nonzero(r >= kth)[0]
        order = np.lexsort((cand, -r[cand]))[:k]
        rows.append(cand[order])
    return rows


def build_record(m: Model, tokens, n_prompt, lg, top_k, greedy_ids, prompt, tokenizer_note, sha):
    lse = logsumexp_rows(lg)
    tops = top_k_rows(lg, top_k)
    positions = []
    for t in range(lg.shape[0]):
        ids = tops[t]
        lp = lg[t, ids] - lse[t]
        positions.append(
            {
                "ids": [int(i) for i in ids],
                "logprobs": [round(float(x), 6) for x in lp],
                "logsumexp": round(float(lse[t]), 6),
            }
        )
    rec = {
        "format": FORMAT,
        "model": {"file": os.path.basename(m.path), "sha256": sha, "arch": m.arch, "n_vocab": m.n_vocab},
        "generator": {
            "script": "scripts/reference_forward.py",
            "numpy": np.__version__,
            "gguf": _gguf_version(),
            "compute_dtype": str(m.dtype),
            "activations": m.act,
        },
        "prompt": prompt,
        "tokenizer": tokenizer_note,
        "tokens": [int(t) for t in tokens],
        "n_prompt_tokens": int(n_prompt),
        "n_positions": int(lg.shape[0]),
        "top_k": int(min(top_k, m.n_vocab)),
        "positions": positions,
    }
    if greedy_ids is not None:
        rec["greedy"] = {"n": len(greedy_ids), "ids": [int(i) for i in greedy_ids]}
    return rec


def _gguf_version() -> str:
    try:
        from importlib.metadata import version

        return version("gguf")
    except Exception:
        return "unknown"


def run_job(m: Model, tokens, *, greedy_n=0, extend_to=0, top_k=32, out=None, prompt=None,
            tokenizer_note=None, sha=None, log_name=""):
    """One request: optional greedy extension/continuation, then one teacher-forced pass."""
    t0 = time.time()
    n_prompt = len(tokens)
    n_ext = max(extend_to - n_prompt, 0)
    n_gen = max(greedy_n, n_ext)
    gen = greedy(m, tokens, n_gen) if n_gen else []
    t1 = time.time()
    seq = list(tokens) + gen[:n_ext]
    lg = logits(m, seq)
    t2 = time.time()
    # The greedy tokens came from the KV-cached path; the teacher-forced pass
    # recomputed them without a cache. Their argmax must agree (short of a tie).
    for s_ in range(len(seq) - n_prompt):
        t = n_prompt - 1 + s_
        if int(np.argmax(lg[t])) != seq[t + 1]:
            print(f"[reference_forward] warning: position {t}: teacher-forced argmax "
                  f"{int(np.argmax(lg[t]))} != greedy token {seq[t + 1]}", file=sys.stderr)
    print(
        f"[reference_forward] {os.path.basename(m.path)} {log_name}arch={m.arch} dtype={m.dtype} "
        f"positions={len(seq)} greedy_steps={n_gen}: greedy {t1 - t0:.2f}s, teacher-forced {t2 - t1:.2f}s",
        file=sys.stderr,
    )
    greedy_ids = gen[:greedy_n] if greedy_n else None
    if out and out.endswith(".npz"):
        np.savez_compressed(
            out,
            tokens=np.asarray(seq, dtype=np.int64),
            n_prompt_tokens=np.int64(n_prompt),
            logits=lg.astype(np.float32),
            greedy=np.asarray(greedy_ids or [], dtype=np.int64),
        )
    elif out:
        if not out.endswith(".json"):
            raise SystemExit(f"--out {out}: expected a .json or .npz file name")
        rec = build_record(m, seq, n_prompt, lg, top_k, greedy_ids, prompt, tokenizer_note, sha or m.sha256())
        with open(out, "w") as f:
            json.dump(rec, f, separators=(",", ":"))
            f.write("\n")
    else:
        lse = logsumexp_rows(lg)
        for t in range(lg.shape[0]):
            top = top_k_rows(lg[t : t + 1], 5)[0]
            desc = " ".join(f"{int(i)}:{lg[t, i] - lse[t]:.3f}" for i in top)
            print(f"pos {t:4d} tok {seq[t]:6d} -> {desc}")
        if greedy_ids is not None:
            print("greedy:", ",".join(str(i) for i in greedy_ids))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__[__doc__.index("Usage") :],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("model", help="GGUF file (llama or gemma3 architecture)")
    ap.add_argument("--tokens", help="comma-separated token ids")
    ap.add_argument("--greedy", type=int, default=0, metavar="N", help="greedy-decode N tokens after --tokens")
    ap.add_argument("--extend-to", type=int, default=0, metavar="N", help="greedily extend to N positions")
    ap.add_argument("--top-k", type=int, default=32)
    ap.add_argument("--out", help="output .json (top-k format) or .npz (full logits)")
    ap.add_argument("--dtype", choices=["float64", "float32"], default="float64", help="compute dtype")
    ap.add_argument("--act", choices=["f32", "int8"], default="f32",
                    help="matmul inputs as they are (f32) or rounded to llama.cpp's int8 formats")
    ap.add_argument("--prompt", help="prompt text, stored in the JSON for reference")
    ap.add_argument("--tokenizer-note", help="how the ids were made, stored in the JSON")
    ap.add_argument(
        "--jobs",
        metavar="JOBS.json",
        help="run several requests on one loaded model: a JSON list of objects with keys "
        "tokens, out and optionally greedy, extend_to, top_k, prompt, tokenizer",
    )
    args = ap.parse_args(argv)
    if (args.tokens is None) == (args.jobs is None):
        ap.error("give exactly one of --tokens or --jobs")

    t0 = time.time()
    m = Model(args.model, np.float64 if args.dtype == "float64" else np.float32, args.act)
    print(f"[reference_forward] loaded {args.model} in {time.time() - t0:.2f}s", file=sys.stderr)
    if args.tokens is not None:
        tokens = [int(s) for s in args.tokens.replace(" ", "").split(",") if s]
        run_job(
            m, tokens, greedy_n=args.greedy, extend_to=args.extend_to, top_k=args.top_k, out=args.out,
            prompt=args.prompt, tokenizer_note=args.tokenizer_note,
        )
        return 0
    with open(args.jobs) as f:
        jobs = json.load(f)
    sha = m.sha256()
    for n, job in enumerate(jobs):
        run_job(
            m, [int(t) for t in job["tokens"]], greedy_n=int(job.get("greedy", 0)),
            extend_to=int(job.get("extend_to", 0)), top_k=int(job.get("top_k", args.top_k)), out=job["out"],
            prompt=job.get("prompt"), tokenizer_note=job.get("tokenizer"), sha=sha, log_name=f"job {n} ",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
