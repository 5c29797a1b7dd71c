"""The default prompt set is in our own words: no template shares a run of more than
``MAX_SHARED_RUN`` words with the paper-derived texts at hand (spec §12.8), measured by
``scripts/own_words.py`` (the passages spec §12 quotes; the reference implementation's prompt files
when ``shared/knowsim-ref`` has them).
"""

from __future__ import annotations

import pytest

from ray_knowsim.prompts.overlap import longest_shared_run, markdown_section, quoted_passages, template_text, words
from ray_knowsim.prompts.templates import DEFAULT_PROMPTS
from tests.doubles.scripts import load_script

OWN_WORDS = load_script("scripts/own_words.py")


def test_longest_shared_run_finds_the_longest_phrase_and_respects_breaks():
    sources = {"a": "The quick brown fox jumps over the lazy dog.", "b": "a lazy dog sleeps"}
    run = longest_shared_run("Then THE QUICK, brown fox ran; the lazy dog slept", sources)
    assert (run.length, run.phrase, run.source) == (4, "the quick brown fox", "a")
    assert longest_shared_run("nothing here", sources).length == 0
    # a placeholder or a section break interrupts a run: "quick brown {{x}} fox" shares only two words in a row
    assert longest_shared_run("quick brown {{x}} fox jumps", {"a": "quick brown fox jumps"}).length == 2
    assert words("knows_well, it's {{p}} Fine") == ["knows_well", "it's", "\x00", "fine"]
    assert template_text({"system": "over the", "user": "lazy dog"}).count("{{section}}") == 1


def test_quoted_passages_and_sections_of_the_spec():
    md = '# A\n## 12. LLM\nsay "do you know X?" or `Thought: ... Response: ...`, not `id`\n### 12.7 x\nbody\n## 13. next\n"late"'
    section = markdown_section(md, "## 12.")
    assert "### 12.7" in section and "late" not in section
    assert quoted_passages(section) == ["do you know X?", "Thought: ... Response: ..."]
    assert markdown_section(md, "### 12.7").splitlines() == ["### 12.7 x", "body"]


def test_the_default_prompt_set_shares_no_long_run_with_the_paper():
    sources = OWN_WORDS.paper_sources()
    if not sources["quotes"]:
        pytest.skip("spec not found beside the checkout (set RAY_KNOWSIM_SHARED to the 'shared' folder)")
    runs = OWN_WORDS.measure(DEFAULT_PROMPTS, {k: v for k, v in sources.items() if k in ("quotes", "reference")})
    assert len(runs) >= 15  # every template the set serves, the unchanged older files included
    too_long = {name: (kind, run.phrase) for name, by_kind in runs.items() for kind, run in by_kind.items()
                if run.length > OWN_WORDS.MAX_SHARED_RUN}  # fmt: skip
    assert not too_long, too_long


def test_the_check_catches_a_copied_sentence():
    quote = "cannot *use* unaware concepts; struggling concepts require a visible error or hedge"
    sources = {"quotes": {"q": quote}}
    copied = "Rules: you cannot use unaware concepts; struggling concepts require a visible error or hedge."
    assert longest_shared_run(copied, sources["quotes"]).length > OWN_WORDS.MAX_SHARED_RUN
