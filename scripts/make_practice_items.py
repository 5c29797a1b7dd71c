#!/usr/bin/env python
"""Write the practice set (30 generated math items and their IU graphs) into ray_knowsim/demo/.

The set is made by ray_knowsim/demo/practice.py, deterministically (fixed numbers, no draws);
configs/adaptive_demo.yaml reads the files it writes (pkg:demo/practice_math.jsonl,
pkg:demo/iu_practice_math.json). Run it after changing a family or its numbers; a test
(tests/demo/test_practice.py) fails while the committed files differ from what it writes.

    .venv/bin/python scripts/make_practice_items.py [--check]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ray_knowsim.demo.practice import practice_files

DEMO = Path(__file__).resolve().parents[1] / "ray_knowsim" / "demo"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a committed file differs")
    args = parser.parse_args(argv)
    stale = []
    for name, text in practice_files().items():
        path = DEMO / name
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        stale.append(name)
        if not args.check:
            path.write_text(text, encoding="utf-8")
    verb = "differ" if args.check else "written"
    print(f"{', '.join(stale)} {verb}" if stale else "practice set up to date")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
