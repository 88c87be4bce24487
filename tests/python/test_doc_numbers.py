"""README states no measured number that is not in results/ (scripts/check_doc_numbers.py)."""
import os
import subprocess
import sys
import unittest

import check_doc_numbers as c


class DocNumbers(unittest.TestCase):
    def test_readme_numbers_are_in_results(self):
        root = os.environ["FISH_SOURCE_DIR"]
        r = subprocess.run([sys.executable, os.path.join(root, "scripts", "check_doc_numbers.py")],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_finds_measured_numbers_in_prose_only(self):
        text = ("Decode runs at 1,234.5 tok/s and 0.52x the peer, 97% top-1.\n"
                "```\nfish bench -p 512 # 400 tok/s in a code block\n```\n"
                "Inline `-r 6 x` is a command; Gemma 3 and SmolLM2-135M are names.\n")
        found = [n for _, n, _ in c.measured_numbers(text)]
        self.assertEqual(found, ["1,234.5", "0.52", "97"])

    def test_a_number_absent_from_results_is_reported(self):
        corpus = '{"median": 1234.5, "ratio": 0.52}'
        text = "1,234.5 tok/s, 0.52x and 7.77 GB/s\n"
        self.assertEqual(c.missing(text, corpus), [(1, "7.77 GB/s")])


if __name__ == "__main__":
    unittest.main()
