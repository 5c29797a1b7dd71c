"""Longest run of words every template of a prompt set shares with the paper-derived texts at hand.

The prompts must be our own wording (spec §12.8): any run shared with the paper is at most a short
technical phrase. Sources, each reported on its own:

* ``quotes``: every passage the spec's §12 (the LLM-side steps) puts in quotes; in the spec these
  are the paper's own words;
* ``reference``: the reference implementation's prompt files, when ``shared/knowsim-ref`` has a
  ``prompts`` folder, plus any ``--paper PATH`` (a file, or a folder read recursively);
* ``spec``: the prose of spec §12.7 and §12.8, which restates the paper's appendix element by
  element (informational: the elements' own names, e.g. "connectable unknowns", are shared on
  purpose).

    python scripts/own_words.py                    # prompt set v3 (the default set)
    python scripts/own_words.py --prompts v2 --paper /path/to/reference/prompts

Prints one line per template and source, then one JSON line: ``{"prompts": ..., "max_shared_run":
{source: n}, "worst": {source: [template, phrase]}}``. ``tests/prompts/test_own_words.py`` holds the
default set to :data:`MAX_SHARED_RUN` against ``quotes`` and ``reference``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ray_knowsim.prompts.overlap import SharedRun, longest_shared_run, markdown_section, quoted_passages, template_text  # noqa: E402
from ray_knowsim.prompts.templates import DEFAULT_PROMPTS, in_prompt_set, load_template, template_names  # noqa: E402

#: the longest run of words a template may share with the paper (spec §12.8: "short technical phrases")
MAX_SHARED_RUN = 5
_TEXT_SUFFIXES = {".txt", ".md", ".py", ".json", ".yaml", ".yml"}


def shared_root() -> Path:
    env = os.environ.get("RAY_KNOWSIM_SHARED")
    return Path(env) if env else ROOT.parent / "shared"


def _text_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in _TEXT_SUFFIXES)


def paper_sources(shared: Path | None = None, extra: list[Path] = ()) -> dict[str, dict[str, str]]:
    """``{kind: {name: text}}`` for kinds ``quotes``, ``reference`` and ``spec`` (a kind is empty
    when its files are absent)."""
    shared = shared or shared_root()
    spec_path = shared / "spec" / "knowsim-rules.md"
    spec = spec_path.read_text(encoding="utf-8") if spec_path.is_file() else ""
    llm_steps = markdown_section(spec, "## 12.")
    quotes = {f"spec §12 quote {k}": q for k, q in enumerate(quoted_passages(llm_steps), 1)}
    prose = {
        "spec §12.7": markdown_section(spec, "### 12.7"),
        "spec §12.8": markdown_section(spec, "### 12.8"),
    }
    reference: dict[str, str] = {}
    ref = shared / "knowsim-ref"
    folders = [p for p in ref.rglob("prompts") if p.is_dir()] if ref.is_dir() else []
    for path in [*folders, *extra]:
        for f in _text_files(Path(path)):
            reference[str(f)] = f.read_text(encoding="utf-8", errors="replace")
    return {"quotes": quotes, "reference": reference, "spec": {k: v for k, v in prose.items() if v}}


def set_templates(prompts: str) -> dict[str, str]:
    """``{"name@version": text}`` of every template prompt set ``prompts`` serves."""
    out = {}
    for name in template_names():
        if in_prompt_set(name, prompts):
            tpl = load_template(name, prompts)
            out[tpl.prompt_version] = template_text(tpl.sections)
    return out


def measure(prompts: str, sources: dict[str, dict[str, str]]) -> dict[str, dict[str, SharedRun]]:
    """``{template: {kind: longest shared run}}`` over every template of the set."""
    return {
        name: {kind: longest_shared_run(text, texts) for kind, texts in sources.items() if texts}
        for name, text in set_templates(prompts).items()
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", default=DEFAULT_PROMPTS)
    ap.add_argument("--shared", type=Path, default=None, help="the shared/ folder (default: beside the checkout)")
    ap.add_argument("--paper", type=Path, action="append", default=[], help="more paper-derived text (file or folder)")
    args = ap.parse_args(argv)
    sources = paper_sources(args.shared, args.paper)
    for kind, texts in sources.items():
        print(f"source {kind}: {len(texts)} text(s)")
    runs = measure(args.prompts, sources)
    worst: dict[str, tuple[int, str, str]] = {}
    for name, by_kind in runs.items():
        for kind, run in by_kind.items():
            print(f"{name:34s} {kind:9s} {run.length:2d}  {run.phrase!r}  [{run.source}]")
            if run.length > worst.get(kind, (-1, "", ""))[0]:
                worst[kind] = (run.length, name, run.phrase)
    print(json.dumps({
        "prompts": args.prompts,
        "max_shared_run": {kind: w[0] for kind, w in worst.items()},
        "worst": {kind: [w[1], w[2]] for kind, w in worst.items()},
        "bound": MAX_SHARED_RUN,
    }))  # fmt: skip
    over = [kind for kind in ("quotes", "reference") if worst.get(kind, (0,))[0] > MAX_SHARED_RUN]
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
