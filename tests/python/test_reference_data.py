"""The committed reference logits (tests/data/reference) are well-formed, belong to
the models in FISH_MODELS_DIR, and scripts/reference_forward.py still reproduces them.

Run by ctest with FISH_MODELS_DIR, FISH_TESTDATA and PYTHONPATH=scripts."""
import glob
import hashlib
import json
import math
import os
import unittest

import numpy as np

import reference_forward as rf

DATA = os.path.join(os.environ.get("FISH_TESTDATA", "tests/data"), "reference")
MODELS = {
    "smollm2-135m-instruct-q4_1": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma-3-270m-q4_k_m": "gemma-3-270m-q4_k_m.gguf",
}


def model_path(folder):
    return os.path.join(os.environ.get("FISH_MODELS_DIR", "models"), MODELS[folder])


def load(folder, name):
    with open(os.path.join(DATA, folder, name)) as f:
        return json.load(f)


class ReferenceFilesAreWellFormed(unittest.TestCase):
    def test_every_file_is_consistent(self):
        for folder in MODELS:
            files = sorted(glob.glob(os.path.join(DATA, folder, "prompt_*.json")))
            self.assertEqual(len(files), 4, folder)
            with open(model_path(folder), "rb") as f:
                sha = hashlib.file_digest(f, "sha256").hexdigest()
            for path in files:
                with self.subTest(path=path):
                    with open(path) as f:
                        rec = json.load(f)
                    self.assertEqual(rec["format"], rf.FORMAT)
                    self.assertEqual(rec["model"]["sha256"], sha)
                    n = rec["n_positions"]
                    self.assertGreaterEqual(n, 64)
                    self.assertEqual(len(rec["tokens"]), n)
                    self.assertEqual(len(rec["positions"]), n)
                    for t, p in enumerate(rec["positions"]):
                        ids, lps = p["ids"], p["logprobs"]
                        self.assertEqual(len(ids), rec["top_k"])
                        self.assertEqual(len(set(ids)), len(ids))
                        self.assertTrue(all(0 <= i < rec["model"]["n_vocab"] for i in ids))
                        self.assertTrue(all(a >= b for a, b in zip(lps, lps[1:])), f"position {t}")
                        self.assertLessEqual(sum(math.exp(x) for x in lps), 1 + 1e-5)
                    # The greedy extension is the teacher-forced argmax at every step.
                    for t in range(rec["n_prompt_tokens"] - 1, n - 1):
                        self.assertEqual(rec["positions"][t]["ids"][0], rec["tokens"][t + 1], f"position {t}")
                    if "greedy" in rec:
                        k = rec["n_prompt_tokens"]
                        self.assertEqual(rec["greedy"]["ids"], rec["tokens"][k : k + rec["greedy"]["n"]])

    def test_sliding_window_prompt_is_longer_than_the_window(self):
        rec = load("gemma-3-270m-q4_k_m", "prompt_3.json")
        self.assertGreater(rec["n_positions"], 512)


class ReferencePrimitives(unittest.TestCase):
    def test_rope_at_position_zero_is_identity(self):
        x = np.random.default_rng(1).standard_normal((1, 2, 8))
        for neox in (False, True):
            np.testing.assert_array_equal(rf.rope(x, np.array([0]), 8, 10000.0, neox), x)

    def test_normal_rope_is_neox_rope_on_interleaved_dims(self):
        # normal mode pairs (2j, 2j+1); NEOX pairs (j, j + d/2): the same rotation after a permutation
        x = np.random.default_rng(2).standard_normal((5, 3, 8))
        perm = np.array([0, 2, 4, 6, 1, 3, 5, 7])
        pos = np.arange(5) * 7
        a = rf.rope(x, pos, 8, 100.0, neox=False)[..., perm]
        b = rf.rope(x[..., perm], pos, 8, 100.0, neox=True)
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)

    def test_window_hides_keys_at_window_distance_and_beyond(self):
        rng = np.random.default_rng(3)
        q, k, v = (rng.standard_normal((10, 2, 4)) for _ in range(3))
        base = rf.attention(q, k, v, 0.5, window=4)
        k2, v2 = k.copy(), v.copy()
        k2[5], v2[5] = 100.0, 100.0  # visible to positions 5..8 only
        out = rf.attention(q, k2, v2, 0.5, window=4).reshape(10, 2, 4)
        base = base.reshape(10, 2, 4)
        np.testing.assert_array_equal(out[:5], base[:5])
        np.testing.assert_array_equal(out[9], base[9])
        self.assertFalse(np.allclose(out[5:9], base[5:9]))

    def test_cached_attention_matches_full_attention(self):
        rng = np.random.default_rng(4)
        q, k, v = (rng.standard_normal((9, 4, 8)) for _ in range(3))
        k, v = k[:, :2], v[:, :2]  # GQA: 4 query heads on 2 kv heads
        full = rf.attention(q, k, v, 0.3, window=3)
        tail = rf.attention(q[6:], k, v, 0.3, window=3, pos0=6)
        np.testing.assert_allclose(tail, full[6:], rtol=0, atol=1e-12)


class ReferenceIsReproducible(unittest.TestCase):
    def test_smollm2_paragraph_logits_are_reproduced(self):
        rec = load("smollm2-135m-instruct-q4_1", "prompt_1.json")
        m = rf.Model(model_path("smollm2-135m-instruct-q4_1"))
        lg = rf.logits(m, rec["tokens"])
        lse = rf.logsumexp_rows(lg)
        for t, p in enumerate(rec["positions"]):
            self.assertAlmostEqual(lse[t], p["logsumexp"], delta=2e-6)
            np.testing.assert_allclose(lg[t, p["ids"]] - lse[t], p["logprobs"], rtol=0, atol=2e-6)
            self.assertEqual(int(np.argmax(lg[t])), p["ids"][0])



class Int8ActivationRounding(unittest.TestCase):
    """--act int8 rounds matmul inputs exactly as gguf's own Q8_0 quantiser does."""

    def test_q8_0_roundtrip_equals_the_gguf_package(self):
        import gguf
        from gguf.quants import dequantize, quantize

        rng = np.random.default_rng(7)
        x = (rng.standard_normal((9, 640)) * rng.uniform(1e-3, 30, (9, 1))).astype(np.float32)
        x[3, :32] = 0  # an all-zero block
        want = dequantize(quantize(x, gguf.GGMLQuantizationType.Q8_0), gguf.GGMLQuantizationType.Q8_0)
        np.testing.assert_array_equal(rf.quantize_roundtrip(x, "q8_0"), want.reshape(x.shape))

    def test_q8_k_keeps_the_largest_magnitude_exact_and_the_error_within_half_a_step(self):
        rng = np.random.default_rng(8)
        x = (rng.standard_normal((5, 512)) * 3).astype(np.float32)
        y = rf.quantize_roundtrip(x, "q8_k")
        for b in range(x.reshape(-1, 256).shape[0]):
            xb, yb = x.reshape(-1, 256)[b], y.reshape(-1, 256)[b]
            i = int(np.abs(xb).argmax())
            step = abs(xb[i]) / 127
            self.assertAlmostEqual(float(yb[i]), float(xb[i]), delta=1e-6 * abs(float(xb[i])))
            self.assertLessEqual(float(np.abs(yb - xb).max()), step / 2 * (1 + 1e-5))


if __name__ == "__main__":
    unittest.main()
