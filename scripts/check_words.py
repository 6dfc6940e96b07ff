#!/usr/bin/env python3
"""One word, one meaning (docs/ARCHITECTURE.md, "Words"): fails on a retired word or on a word
used for another thing's meaning, in the code, build files, scripts and docs that git tracks.

    scripts/check_words.py [--root DIR]

segment is the unit a pipelined algorithm moves at a time, never the memory a node's ranks
share (that is the arena); chunk and slice are retired (block, piece or segment say each of
their old meanings). The variables and the tuning key that still read the old names
(COLLX_CHUNK_BYTES, COLLX_SHM_CHUNK_BYTES, chunk_bytes) do not match: an identifier with the word
inside it is not the word, and collx-bench still takes --chunk for --segment. Other libraries'
names (torch.chunk, Python's slice()) are theirs.
Exit status 1 and one line per use when any is found.
"""
import argparse
import re
import subprocess
import sys
from pathlib import Path

RULES = [
    (re.compile(r"\b(chunks?|chunked|slices?|sliced|slicing)\b", re.IGNORECASE),
     "retired word: a pipeline unit is a segment, a rank's share a block, a round's part of a "
     "block a piece"),
    (re.compile(r"shared[- ]segment|node'?s segment|memory segment|without_segment|"
                r"segment every rank|arena segment", re.IGNORECASE),
     "the memory a node's ranks share is the arena; a segment is a pipeline unit"),
]
# Other libraries' names and the standard's terms: not collx's words.
FOREIGN = re.compile(r"(\.|torch\.)chunk\(|\bslice\(|--chunk\b")

SUFFIXES = {".cpp", ".hpp", ".h", ".cu", ".cuh", ".c", ".py", ".sh", ".cmake", ".md", ".in",
            ".f90", ".txt"}
# Result files are records of past runs (their commands and algorithm names as they were); the
# fixture of the test that this check fails is wrong on purpose.
SKIPPED = ("docs/results/", "tests/docs/words/")


def tracked_files(root):
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files"], check=True,
                             capture_output=True, text=True).stdout.split("\n")
        names = [n for n in out if n]
    except (subprocess.CalledProcessError, FileNotFoundError):
        names = [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()]
    for name in names:
        path = Path(name)
        if name.startswith(SKIPPED):
            continue
        if path.suffix in SUFFIXES or path.name == "CMakeLists.txt":
            yield name


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=str(Path(__file__).resolve().parent.parent))
    args = parser.parse_args()
    root = Path(args.root)
    found = 0
    for name in tracked_files(root):
        if name == "scripts/check_words.py":
            continue
        try:
            lines = (root / name).read_text(encoding="utf-8").splitlines()
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        in_glossary = False
        for number, line in enumerate(lines, 1):
            # The glossary names the retired words to retire them.
            if name == "docs/ARCHITECTURE.md" and line.startswith("## "):
                in_glossary = line.strip() == "## Words"
            if in_glossary:
                continue
            text = FOREIGN.sub("", line)
            for pattern, why in RULES:
                match = pattern.search(text)
                if match:
                    print(f"{name}:{number}: '{match.group(0)}': {why}")
                    found += 1
    if found:
        print(f"{found} uses against docs/ARCHITECTURE.md's Words", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
