"""BENCHMARKS.md is exactly what scripts/render_benchmarks.py renders from results/."""
import os
import subprocess
import sys
import unittest


class BenchmarksMdIsFresh(unittest.TestCase):
    def test_check(self):
        root = os.environ["FISH_SOURCE_DIR"]
        r = subprocess.run([sys.executable, os.path.join(root, "scripts", "render_benchmarks.py"),
                            "--check"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)


if __name__ == "__main__":
    unittest.main()
