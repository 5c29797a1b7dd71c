"""Planted simulator errors (tests/plugins/faulty_simulator.py): the plugin, the kinds it plants, and
which sessions carry one (read from its log)."""

from __future__ import annotations

import json
from pathlib import Path

PLUGIN = "tests.plugins.faulty_simulator"

#: the planted kinds, the role whose model plants them, and the audit kinds that must flag them
PLANTS = {
    "learner_claims_unaware": ("user_sim", {"learner_claims_unaware", "learner_uses_unaware"}),
    "extractor_labels_unmentioned": ("extractor", {"extractor_unsupported_label"}),
    "extractor_ignores_covered": ("extractor", {"extractor_ignores_covered"}),
}


def planted_sessions(log: Path) -> dict[str, set[str]]:
    """plant kind -> the sessions that carry one"""
    out: dict[str, set[str]] = {k: set() for k in PLANTS}
    for f in log.glob("*.jsonl"):
        for line in f.read_text().splitlines():
            row = json.loads(line)
            out[row["plant"]].add(row["session_id"])
    return out
