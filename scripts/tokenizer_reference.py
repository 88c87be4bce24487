#!/usr/bin/env python3
"""Reference token ids from independent tokenizer implementations, built offline from a GGUF.

FISH's tokenizer (engine/tokenizer.h) follows llama.cpp. This script rebuilds the same
vocabulary in other people's code and prints the ids they give, for the expected values in
tests/engine/tokenizer_test.cpp:
  - tokenizer.ggml.model "gpt2": HF `tokenizers` BPE from tokens + merges, with the pre-tokenizer
    the GGUF names ("smollm": Digits(individual) then ByteLevel; "gpt-2": ByteLevel).
  - tokenizer.ggml.model "llama": Google `sentencepiece`, a BPE ModelProto made from tokens,
    scores and token types (byte fallback on; add_dummy_prefix = tokenizer.ggml.add_space_prefix,
    default true; identity normalisation, as Llama and Gemma 3 ship).
Neither needs a network or torch. Install: pip install -r scripts/requirements-tokenizer.txt

Usage:
  tokenizer_reference.py MODEL.gguf TEXT...             ids per text (no BOS/EOS)
  tokenizer_reference.py --check-vectors VOCAB.gguf     compare with VOCAB.gguf.inp/.out
"""
import argparse
import json
import sys

import gguf


def field(reader, key):
    f = reader.fields.get(key)
    return None if f is None else f.contents()


def hf_bpe(reader):
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders, AddedToken

    tokens = field(reader, "tokenizer.ggml.tokens")
    merges = field(reader, "tokenizer.ggml.merges")
    types = field(reader, "tokenizer.ggml.token_type") or [1] * len(tokens)
    pre = field(reader, "tokenizer.ggml.pre") or "default"
    vocab = {t: i for i, t in enumerate(tokens)}
    model = models.BPE(vocab=vocab, merges=[tuple(m.split(" ", 1)) for m in merges])
    tok = Tokenizer(model)
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    if pre == "smollm":
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Digits(individual_digits=True), byte_level])
    elif pre == "gpt-2":
        tok.pre_tokenizer = byte_level
    else:
        raise SystemExit(f"pre-tokenizer {pre!r} not mirrored here")
    tok.decoder = decoders.ByteLevel()
    specials = [AddedToken(tokens[i], special=True, normalized=False)
                for i, t in enumerate(types) if t == 3]
    tok.add_special_tokens(specials)
    return lambda text: tok.encode(text, add_special_tokens=False).ids


def spm(reader):
    import sentencepiece as spm_lib
    from sentencepiece import sentencepiece_model_pb2 as pb

    tokens = field(reader, "tokenizer.ggml.tokens")
    scores = field(reader, "tokenizer.ggml.scores")
    types = field(reader, "tokenizer.ggml.token_type")
    prefix = field(reader, "tokenizer.ggml.add_space_prefix")
    m = pb.ModelProto()
    for t, s, ty in zip(tokens, scores, types):
        p = m.pieces.add()
        p.piece, p.score, p.type = t, s, ty  # GGUF token types use sentencepiece's numbering
    m.trainer_spec.model_type = pb.TrainerSpec.BPE
    m.trainer_spec.byte_fallback = True
    m.trainer_spec.vocab_size = len(tokens)
    # Gemma 3 stores <unk> as a control token; sentencepiece needs the unknown piece typed so.
    unk = field(reader, "tokenizer.ggml.unknown_token_id")
    unk = types.index(2) if unk is None else unk
    m.pieces[unk].type = pb.ModelProto.SentencePiece.UNKNOWN
    m.trainer_spec.unk_id = unk
    m.trainer_spec.bos_id = field(reader, "tokenizer.ggml.bos_token_id")
    m.trainer_spec.eos_id = field(reader, "tokenizer.ggml.eos_token_id")
    pad = field(reader, "tokenizer.ggml.padding_token_id")
    m.trainer_spec.pad_id = -1 if pad is None else pad
    m.normalizer_spec.name = "identity"
    m.normalizer_spec.add_dummy_prefix = True if prefix is None else bool(prefix)
    m.normalizer_spec.remove_extra_whitespaces = False
    m.normalizer_spec.escape_whitespaces = True
    sp = spm_lib.SentencePieceProcessor()
    sp.LoadFromSerializedProto(m.SerializeToString())
    return lambda text: sp.EncodeAsIds(text)


def encoder(path):
    reader = gguf.GGUFReader(path)
    model = field(reader, "tokenizer.ggml.model")
    return hf_bpe(reader) if model == "gpt2" else spm(reader)


def check_vectors(path):
    enc = encoder(path)
    inputs = open(path + ".inp", encoding="utf-8", newline="").read().split("\n__ggml_vocab_test__\n")
    if inputs and inputs[-1] == "":
        inputs.pop()
    outputs = open(path + ".out", encoding="utf-8").read().splitlines()
    bad = 0
    for text, line in zip(inputs, outputs):
        want = [int(x) for x in line.split()]
        got = enc(text)
        if got != want:
            bad += 1
            print(f"differs: {text!r}\n  llama.cpp {want}\n  reference {got}")
    print(f"{len(inputs) - bad}/{len(inputs)} cases agree with llama.cpp")
    return bad == 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check-vectors", action="store_true")
    ap.add_argument("gguf")
    ap.add_argument("texts", nargs="*")
    args = ap.parse_args()
    if args.check_vectors:
        sys.exit(0 if check_vectors(args.gguf) else 1)
    enc = encoder(args.gguf)
    for t in args.texts:
        print(json.dumps(t, ensure_ascii=False), enc(t))


if __name__ == "__main__":
    main()
