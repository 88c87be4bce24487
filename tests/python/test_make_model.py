"""Files written by `fish make-model` are valid GGUF for the gguf package (llama.cpp's own reader):
metadata, tensor names/types/shapes as the shape says, and weights that decode to N(0, 0.02²)."""
import os
import subprocess
import tempfile
import unittest

import gguf
import numpy as np
from gguf.quants import dequantize


class MakeModelIsReadableByGgufPackage(unittest.TestCase):
    def make(self, ftype, seed=3):
        d = tempfile.mkdtemp()
        path = os.path.join(d, f"tiny-{ftype}.gguf")
        subprocess.run([os.environ["FISH_BIN"], "make-model", "--shape", "tiny", "--type", ftype,
                        "--seed", str(seed), "--out", path], check=True, capture_output=True)
        return path

    def check(self, ftype, expect_types):
        r = gguf.GGUFReader(self.make(ftype))
        f = r.fields
        self.assertEqual(f["general.architecture"].contents(), "llama")
        self.assertEqual(f["llama.block_count"].contents(), 2)
        self.assertEqual(f["llama.embedding_length"].contents(), 256)
        self.assertEqual(len(f["tokenizer.ggml.tokens"].contents()), 512)
        self.assertEqual(f["tokenizer.ggml.tokens"].contents()[3 + 10], "<0x0A>")
        names = [t.name for t in r.tensors]
        self.assertEqual(len(names), len(set(names)))
        self.assertIn("blk.1.ffn_down.weight", names)
        for t in r.tensors:
            w = dequantize(t.data, t.tensor_type).astype(np.float64)
            if t.name.endswith("norm.weight"):
                np.testing.assert_array_equal(w, 1.0, err_msg=t.name)
                continue
            self.assertEqual(t.tensor_type.name.lower(), expect_types.get(t.name, ftype.split("_m")[0]),
                             t.name)
            rms = float(np.sqrt(np.mean(w * w)))
            self.assertGreater(rms, 0.017, t.name)
            self.assertLess(rms, 0.023, t.name)
            self.assertLess(abs(float(np.mean(w))), 0.002, t.name)

    def test_q8_0(self):
        self.check("q8_0", {})

    def test_q4_k_m(self):
        # tiny has 2 layers: use_more_bits(i, 2) picks only i >= 7*2/8 = 1; the tied head is q6_k.
        q6 = {f"blk.1.{n}.weight": "q6_k" for n in ("attn_v", "ffn_down")}
        q6["token_embd.weight"] = "q6_k"
        self.check("q4_k_m", q6)


if __name__ == "__main__":
    unittest.main()
