"""`fish inspect --json` agrees with the gguf package's reader on both real models.

Run by ctest with FISH_BIN (the fish binary), FISH_MODELS_DIR and the venv's python."""
import json
import os
import subprocess
import sys
import unittest

import gguf
import numpy as np

MODELS = ["SmolLM2-135M-Instruct.Q4_1.gguf", "gemma-3-270m-q4_k_m.gguf"]


def gguf_value(field):
    """The field's value as plain Python (lists for arrays, str for strings)."""
    t = field.types[0]
    if t == gguf.GGUFValueType.ARRAY:
        return field.contents()
    return field.contents()


class InspectMatchesGgufPackage(unittest.TestCase):
    def check_model(self, name):
        path = os.path.join(os.environ["FISH_MODELS_DIR"], name)
        self.assertTrue(os.path.exists(path), f"{path} missing: run scripts/setup.sh")
        out = subprocess.run([os.environ["FISH_BIN"], "inspect", "--json",
                              "--max-array-items", "1000000000", path],
                             check=True, capture_output=True)
        fish = json.loads(out.stdout)
        ref = gguf.GGUFReader(path)

        self.assertEqual(fish["alignment"], ref.alignment)
        self.assertEqual(fish["data_offset"], ref.data_offset)
        # Metadata: same keys in the same order, same values (GGUF.* are the reader's own).
        ref_keys = [k for k in ref.fields if not k.startswith("GGUF.")]
        self.assertEqual(list(fish["metadata"].keys()), ref_keys)
        self.assertEqual(fish["version"], int(ref.fields["GGUF.version"].contents()))
        for key in ref_keys:
            want = gguf_value(ref.fields[key])
            got = fish["metadata"][key]
            if isinstance(want, float):
                self.assertAlmostEqual(got, want, places=6, msg=key)
            elif isinstance(want, list) and want and isinstance(want[0], float):
                np.testing.assert_allclose(np.array(got, dtype=np.float64),
                                           np.array(want, dtype=np.float64), rtol=0, atol=0,
                                           err_msg=key)
            else:
                self.assertEqual(got, want, msg=key)
        # Tensors: names, types, dims (innermost first), sizes and absolute offsets.
        self.assertEqual(len(fish["tensors"]), len(ref.tensors))
        totals = {}
        for ft, rt in zip(fish["tensors"], ref.tensors):
            self.assertEqual(ft["name"], rt.name)
            self.assertEqual(ft["type"], rt.tensor_type.name.lower(), rt.name)
            self.assertEqual(ft["dims"], [int(d) for d in rt.shape], rt.name)
            self.assertEqual(ft["n_elems"], int(rt.n_elements), rt.name)
            self.assertEqual(ft["n_bytes"], int(rt.n_bytes), rt.name)
            self.assertEqual(ft["file_offset"], int(rt.data_offset), rt.name)
            t = totals.setdefault(ft["type"], [0, 0, 0])
            t[0] += 1
            t[1] += int(rt.n_elements)
            t[2] += int(rt.n_bytes)
        self.assertEqual({k: [v["n_tensors"], v["n_elems"], v["n_bytes"]]
                          for k, v in fish["totals"].items()}, totals)
        self.assertEqual(fish["architecture"], ref.fields["general.architecture"].contents())
        self.assertEqual(fish["tokenizer"]["vocab_size"],
                         len(ref.fields["tokenizer.ggml.tokens"].data))

    def test_smollm2(self):
        self.check_model(MODELS[0])

    def test_gemma3(self):
        self.check_model(MODELS[1])


if __name__ == "__main__":
    sys.exit(unittest.main())
