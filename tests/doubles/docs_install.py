"""What docs/cluster.md tells a cluster to install."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def docs_pip_list() -> list[str]:
    """The `pip` runtime environment docs/cluster.md gives for nodes with Ray only (the
    installed-wheel test runs a job with exactly this)."""
    text = (ROOT / "docs" / "cluster.md").read_text().replace("\n", " ")
    found = re.search(r"--runtime-env-json '(\{\"pip\": \[.*?\]\})'", text)
    assert found, "docs/cluster.md lost its runtime-env pip example"
    return json.loads(found.group(1))["pip"]
