#!/usr/bin/env python3
"""Token ids for the reference data, made independently of FISH's tokenizer.

Loads the tokenizer stored in a GGUF through Hugging Face transformers
(AutoTokenizer.from_pretrained(dir, gguf_file=name), offline: HF_HUB_OFFLINE=1)
and adds BOS when the GGUF says tokenizer.ggml.add_bos_token = true.

  reference_tokenize.py encode MODEL.gguf TEXT
      print the ids, comma-separated.
  reference_tokenize.py decode MODEL.gguf 1,2,3
      print the text.
  reference_tokenize.py jobs MODEL.gguf PROMPTS.json JOBS.json
      PROMPTS.json is a list of {"prompt", "out", ...}; writes JOBS.json for
      reference_forward.py --jobs with "tokens" and "tokenizer" filled in
      (every other key is passed through).
  reference_tokenize.py annotate MODEL.gguf FILE.json...
      add decoded text to reference_forward.py's JSON: greedy.text and
      continuation_text (the tokens appended by --extend-to).
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def _gguf_add_bos(path: str) -> bool:
    import gguf

    f = gguf.GGUFReader(path).fields.get("tokenizer.ggml.add_bos_token")
    return bool(f.contents()) if f is not None else False


class Tok:
    def __init__(self, path: str):
        import transformers
        from transformers import AutoTokenizer

        d, f = os.path.split(os.path.abspath(path))
        self.tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
        self.add_bos = _gguf_add_bos(path)
        self.bos = self.tok.bos_token_id
        self.note = (
            f"transformers {transformers.__version__} AutoTokenizer from the GGUF "
            f"({type(self.tok).__name__}), add_bos={self.add_bos}"
        )

    def encode(self, text: str) -> list[int]:
        ids = self.tok(text, add_special_tokens=False)["input_ids"]
        if self.add_bos:
            ids = [self.bos] + ids
        return [int(i) for i in ids]

    def decode(self, ids) -> str:
        return self.tok.decode(list(ids), skip_special_tokens=False)


def main(argv) -> int:
    if len(argv) < 3 or argv[0] not in ("encode", "decode", "jobs", "annotate"):
        print(__doc__, file=sys.stderr)
        return 2
    cmd, model = argv[0], argv[1]
    tok = Tok(model)
    if cmd == "encode":
        print(",".join(str(i) for i in tok.encode(argv[2])))
    elif cmd == "decode":
        print(tok.decode(int(s) for s in argv[2].split(",") if s))
    elif cmd == "jobs":
        with open(argv[2]) as f:
            prompts = json.load(f)
        jobs = []
        for p in prompts:
            j = dict(p)
            j["tokens"] = tok.encode(p["prompt"])
            j["tokenizer"] = tok.note
            jobs.append(j)
        with open(argv[3], "w") as f:
            json.dump(jobs, f, indent=1)
    else:
        for path in argv[2:]:
            with open(path) as f:
                rec = json.load(f)
            if "greedy" in rec:
                rec["greedy"]["text"] = tok.decode(rec["greedy"]["ids"])
            n = rec["n_prompt_tokens"]
            if rec["n_positions"] > n:
                rec["continuation_text"] = tok.decode(rec["tokens"][n:])
            # the ids must round-trip to the stored prompt's encoding
            if rec.get("prompt") is not None and tok.encode(rec["prompt"]) != rec["tokens"][:n]:
                raise SystemExit(f"{path}: prompt does not re-encode to its stored token ids")
            with open(path, "w") as f:
                json.dump(rec, f, separators=(",", ":"))
                f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
