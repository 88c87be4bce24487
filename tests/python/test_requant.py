"""`fish requant` on a synthetic Q4_K_M model: the per-tensor and per-pair report, a written file
that `fish inspect` and `fish generate` accept, and usage errors for a bad mode."""
import os
import re
import subprocess
import tempfile
import unittest

FISH = os.environ["FISH_BIN"]


def run(*args, check=True):
    return subprocess.run([FISH, *args], check=check, capture_output=True, text=True)


class RequantCommand(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp()
        cls.src = os.path.join(cls.dir, "tiny.gguf")
        run("make-model", "--shape", "tiny", "--type", "q4_k_m", "--seed", "4", "--out", cls.src)

    def test_mode3_reports_every_tensor_and_the_pairs(self):
        out = os.path.join(self.dir, "m3.gguf")
        r = run("requant", self.src, out, "--mode", "3", "--threads", "2")
        lines = r.stdout.splitlines()
        per_tensor = [l for l in lines if re.match(r"^blk\.\d+\.\S+\s+q\d_k\s+->", l)]
        # tiny: 2 layers x 7 matrices; the q6_k ones (blk.1 attn_v/ffn_down) become q4_k
        self.assertEqual(len(per_tensor), 14, r.stdout)
        pairs = {m.group(2) + "->" + m.group(3): int(m.group(1)) for m in
                 (re.match(r"^\s*(\d+) x (\S+)\s+-> (\S+)\s+rel_rms min", l) for l in lines) if m}
        self.assertEqual(pairs, {"q4_k->fq3": 12, "q6_k->q4_k": 3}, r.stdout)
        self.assertRegex(lines[-1], r"ns/weight at 2 threads")
        inspect = run("inspect", out).stdout
        self.assertIn("fq3", inspect)
        g = run("generate", "-m", out, "-p", "hello", "-n", "4", "--threads", "1", "--ignore-eos")
        self.assertIn("decode", g.stderr)

    def test_bad_mode_is_a_usage_error(self):
        r = run("requant", self.src, os.path.join(self.dir, "x.gguf"), "--mode", "4", check=False)
        self.assertEqual(r.returncode, 1)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "x.gguf")))


if __name__ == "__main__":
    unittest.main()
