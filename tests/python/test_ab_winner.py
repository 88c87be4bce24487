"""scripts/device/ab_winner.py: the config a device call's peer rows run under.

A config wins only where its every round beats every `default` round on every model; among
winners the one with the larger smallest median gain; otherwise (overlap, a failed run, a
missing file) `default`.
"""
import os
import subprocess
import sys
import tempfile
import unittest


def winner(rows):
    """ab_winner.py's choice and its stderr for ab.tsv rows (round, model, config, tok/s)."""
    root = os.environ["FISH_SOURCE_DIR"]
    with tempfile.NamedTemporaryFile("w", suffix=".tsv", delete=False) as f:
        for r in rows:
            f.write("\t".join(str(c) for c in r) + "\n")
        path = f.name
    try:
        p = subprocess.run([sys.executable, os.path.join(root, "scripts", "device", "ab_winner.py"),
                            path], capture_output=True, text=True)
    finally:
        os.unlink(path)
    return p.returncode, p.stdout.strip(), p.stderr


def rounds(model, config, values):
    return [(i + 1, model, config, v) for i, v in enumerate(values)]


class AbWinner(unittest.TestCase):
    def test_separated_on_every_model_wins(self):
        rc, out, err = winner(rounds("llama-1b", "default", [980, 985]) +
                              rounds("llama-1b", "FISH_VK_NORM_FUSE=2", [1050, 1040]) +
                              rounds("llama-8b", "default", [306, 307]) +
                              rounds("llama-8b", "FISH_VK_NORM_FUSE=2", [320, 318]))
        self.assertEqual(rc, 0)
        self.assertEqual(out, "FISH_VK_NORM_FUSE=2")
        self.assertIn("1.064", err)

    def test_overlap_on_one_model_keeps_default(self):
        rc, out, err = winner(rounds("llama-1b", "default", [980, 985]) +
                              rounds("llama-1b", "FISH_VK_NORM_FUSE=2", [1050, 1040]) +
                              rounds("llama-8b", "default", [306, 307]) +
                              rounds("llama-8b", "FISH_VK_NORM_FUSE=2", [320, 300]))
        self.assertEqual(out, "default")
        self.assertIn("not ahead", err)

    def test_touching_rounds_are_an_overlap(self):
        _, out, _ = winner(rounds("m", "default", [100, 105]) + rounds("m", "X=1", [105, 120]))
        self.assertEqual(out, "default")

    def test_a_failed_round_counts_against_its_config(self):
        _, out, _ = winner(rounds("llama-1b", "default", [980, 985]) +
                           rounds("llama-1b", "X=1", [1050, "error"]))
        self.assertEqual(out, "default")

    def test_the_larger_smallest_gain_wins(self):
        _, out, _ = winner(rounds("m", "default", [100, 101]) + rounds("m", "A=1", [110, 111]) +
                           rounds("m", "B=1,C=2", [120, 121]) + rounds("n", "default", [50, 51]) +
                           rounds("n", "A=1", [60, 61]) + rounds("n", "B=1,C=2", [52, 53]))
        self.assertEqual(out, "A=1")  # B's gain on n (1.039) is below A's smallest (1.089)

    def test_a_missing_file_keeps_default(self):
        root = os.environ["FISH_SOURCE_DIR"]
        p = subprocess.run([sys.executable, os.path.join(root, "scripts", "device", "ab_winner.py"),
                            "/nonexistent/ab.tsv"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0)
        self.assertEqual(p.stdout.strip(), "default")


if __name__ == "__main__":
    unittest.main()
