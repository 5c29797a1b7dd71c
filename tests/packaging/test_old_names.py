"""The module names renamed or removed before the first release are gone: there is no alias layer,
none of them imports, and neither the project nor its docs use one (outside the fixture generators
that are run against an old checkout on purpose). Nothing was released under the old names, so
the docs carry no migration table: the list below is the only record of them."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: old dotted name -> its replacement
RENAMED: dict[str, str] = {
    "ray_knowsim.model": "ray_knowsim.schema",
    "ray_knowsim.engine.models": "ray_knowsim.backends.model_set",
    "ray_knowsim.engine.config.models": "ray_knowsim.config.model_entries",
    "ray_knowsim.sim.extract_graphs": "ray_knowsim.graph_extraction.extract",
    "ray_knowsim.graphs": "ray_knowsim.graph_extraction",
    "ray_knowsim.graphs.extract": "ray_knowsim.graph_extraction.extract",
    "ray_knowsim.kernels.batch": "ray_knowsim.kernels.sessions",
    "ray_knowsim.sim.batcher": "ray_knowsim.sim.kernel_steps",
    "ray_knowsim.llm.server": "ray_knowsim.llm.offline.server",
    "ray_knowsim.prompts.learners": "ray_knowsim.simulators.base",
    "ray_knowsim.prompts.tutors": "ray_knowsim.strategies.base",
    "ray_knowsim.validate.stats": "ray_knowsim.stats.association",
    # the split of engine/ (8,177 lines, 19 % of the package) by what it held
    "ray_knowsim.engine.ray_session": "ray_knowsim.cluster.ray_session",
    "ray_knowsim.engine.codecheck": "ray_knowsim.cluster.codecheck",
    "ray_knowsim.engine.node_loss": "ray_knowsim.cluster.node_loss",
    "ray_knowsim.engine.lease": "ray_knowsim.cluster.lease",
    "ray_knowsim.engine.config": "ray_knowsim.config",
    "ray_knowsim.engine.config.base": "ray_knowsim.config.base",
    "ray_knowsim.engine.config.adaptive": "ray_knowsim.config.adaptive",
    "ray_knowsim.engine.config.loading": "ray_knowsim.config.loading",
    "ray_knowsim.engine.config.model_entries": "ray_knowsim.config.model_entries",
    "ray_knowsim.engine.config.run": "ray_knowsim.config.run",
    "ray_knowsim.engine.config.sections": "ray_knowsim.config.sections",
    "ray_knowsim.engine.backends": "ray_knowsim.backends.registry",
    "ray_knowsim.engine.clients": "ray_knowsim.backends.model_set",
    "ray_knowsim.engine.builtin_backends": "ray_knowsim.backends",
    "ray_knowsim.engine.offline_double": "ray_knowsim.backends.http.offline_double",
    "ray_knowsim.engine.vllm": "ray_knowsim.backends.vllm",
    "ray_knowsim.engine.vllm.actor": "ray_knowsim.backends.vllm.actor",
    "ray_knowsim.engine.vllm.config": "ray_knowsim.backends.vllm.config",
    "ray_knowsim.engine.vllm.placement": "ray_knowsim.backends.vllm.placement",
    "ray_knowsim.engine.vllm.pool": "ray_knowsim.backends.vllm.pool",
    "ray_knowsim.engine.limiter": "ray_knowsim.backends.limiter",
    "ray_knowsim.engine.limiter.actor": "ray_knowsim.backends.limiter.actor",
    "ray_knowsim.engine.limiter.budget": "ray_knowsim.backends.limiter.budget",
    "ray_knowsim.engine.limiter.client": "ray_knowsim.backends.limiter.client",
    "ray_knowsim.engine.limiter.local": "ray_knowsim.backends.limiter.local",
    "ray_knowsim.engine.limiter.service": "ray_knowsim.backends.limiter.service",
    "ray_knowsim.engine.extractor": "ray_knowsim.run.extractor",
    "ray_knowsim.engine.plan": "ray_knowsim.plan.sessions",
    "ray_knowsim.engine.preflight": "ray_knowsim.preflight.checks",
    "ray_knowsim.engine.estimate": "ray_knowsim.preflight.estimate",
    "ray_knowsim.engine.design": "ray_knowsim.preflight.design",
    "ray_knowsim.engine.batch": "ray_knowsim.run.fan_out",
    "ray_knowsim.engine.build": "ray_knowsim.plan.build",
    "ray_knowsim.engine.worker": "ray_knowsim.run.worker",
    "ray_knowsim.engine.resume": "ray_knowsim.run.resume",
    "ray_knowsim.engine.manifest": "ray_knowsim.run.manifest",
    "ray_knowsim.engine.progress": "ray_knowsim.run.progress",
    "ray_knowsim.engine.eta": "ray_knowsim.run.eta",
    "ray_knowsim.engine.failfast": "ray_knowsim.run.fail_fast",
    "ray_knowsim.engine.reduce": "ray_knowsim.tables.reduce",
    "ray_knowsim.engine.outcome_tables": "ray_knowsim.tables.outcome_tables",
    "ray_knowsim.io.cost": "ray_knowsim.tables.cost",
    "ray_knowsim.io.outcomes": "ray_knowsim.tables.outcomes",
    "ray_knowsim.io.sanity": "ray_knowsim.tables.sanity",
    "ray_knowsim.engine.scoring": "ray_knowsim.score.run_stage",
}
REMOVED = ("ray_knowsim.engine.results", "ray_knowsim.engine", "ray_knowsim.engine.runner")
OLD = (*RENAMED, *REMOVED)

CHECK = r"""
import importlib, json, sys
import ray_knowsim
out = {"finders": [type(f).__module__ for f in sys.meta_path if type(f).__module__.startswith("ray_knowsim")]}
for old in sys.argv[1:]:
    try:
        importlib.import_module(old)
        out[old] = "imported"
    except ModuleNotFoundError as exc:
        out[old] = exc.name
print(json.dumps(out))
"""

#: where an old name may still be written: this test and the fixture generators (tests/**/fixtures/) that are run against a checkout of an older release
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".sh", ".txt", ".cfg", ".ini", ".json"}
SCANNED = ("ray_knowsim", "kernels", "tests", "scripts", "docs", "configs", ".ci")
TOP_FILES = ("README.md", "pyproject.toml", "cluster.yaml", "knowsim_tutoring.py")


def old_name_checks() -> list[tuple[tuple[str, ...], re.Pattern[str]]]:
    """Each old name dotted (``ray_knowsim.engine.models``) and as a path (``ray_knowsim/engine/models``,
    and ``engine/models`` for the names below a subpackage), not followed by more of an identifier;
    each with the literal strings a text must hold before its pattern can match (the scan reads ~600
    files against ~300 patterns: the literals keep it to the files that could match)."""
    out = []
    for old in OLD:
        forms = {old, old.replace(".", "/")}
        parts = old.split(".")[1:]
        if len(parts) > 1:
            forms.add("/".join(parts))
        out += [((f,), re.compile(r"(?<![\w/.])" + re.escape(f) + r"(?!\w)")) for f in forms]
        parent, _, leaf = old.rpartition(".")  # and imported from its package: `from ray_knowsim.kernels import batch`
        out.append(((parent, leaf), re.compile(r"\bfrom\s+" + re.escape(parent) + r"\s+import\s+[\w\s,(]*\b"
                                               + re.escape(leaf) + r"\b(?!\.)")))
    return out


def old_name_patterns() -> list[re.Pattern[str]]:
    return [pattern for _, pattern in old_name_checks()]


def scanned_files() -> list[Path]:
    files = [ROOT / f for f in TOP_FILES if (ROOT / f).is_file()]
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*")):
            rel = path.relative_to(ROOT)
            if (path.is_file() and path.suffix in TEXT_SUFFIXES and "__pycache__" not in rel.parts
                    and "fixtures" not in rel.parts and path != Path(__file__).resolve()):
                files.append(path)
    return files


def test_no_old_name_imports_and_no_alias_hook_is_installed():
    proc = subprocess.run([sys.executable, "-c", CHECK, *OLD], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out.pop("finders") == []
    # the name not found is the old module itself (or its package), never something it imports
    for old in OLD:
        assert out[old] != "imported" and old.startswith(out[old]), (old, out[old])
    assert not (ROOT / "ray_knowsim" / "_renamed.py").exists()


def test_the_project_and_its_docs_use_no_old_name():
    checks = old_name_checks()
    bad = []
    for path in scanned_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        patterns = [p for needles, p in checks if all(n in text for n in needles)]
        for n, line in enumerate(text.splitlines() if patterns else (), 1):
            bad += [f"{path.relative_to(ROOT)}:{n}: {p.pattern}" for p in patterns if p.search(line)]
    assert not bad, "\n".join(bad)


def test_the_scan_finds_an_old_name():
    """The scan above is not vacuous: every pattern matches its own name in an import line."""
    patterns = old_name_patterns()
    checks = old_name_checks()
    for old in OLD:
        for line in (f"from {old} import thing", f"see {old.replace('.', '/')}.py"):
            # found by a pattern whose literals the line holds (the scan skips texts without them)
            assert any(all(n in line for n in needles) and p.search(line) for needles, p in checks), line
    assert any(p.search("from ray_knowsim.kernels import update, batch  # noqa") for p in patterns)
    assert not any(p.search("from ray_knowsim.config.model_entries import x") for p in patterns)
    assert not any(p.search("from ray_knowsim.kernels import sessions") for p in patterns)
    assert not any(p.search("from ray_knowsim.schema.chat import ChatRequest") for p in patterns)
