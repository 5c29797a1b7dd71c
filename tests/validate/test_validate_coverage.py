"""The lexical IU tagger, coverage Jaccards and pluggable taggers."""

from __future__ import annotations

import pytest

from ray_knowsim.validate.coverage import LexicalTagger, coverage_summary, coverage_table, load_tagger, tag_texts

IUS = [("IU1", "Binomial coefficients"), ("IU2", "Classical probability via counting"), ("IU3", "of the")]


def test_lexical_tagger_matches_content_words_with_plural_folding():
    tag = LexicalTagger()
    assert tag("The binomial coefficient counts subsets.", IUS) == {"IU1"}
    # 2 of 3 content words (classical, probability, counting) >= 60 %
    assert tag("Use probabilities and counting here", IUS) == {"IU2"}
    assert tag("Probability alone", IUS) == set()
    assert LexicalTagger(min_overlap=0.3)("Probability alone", IUS) == {"IU2"}
    assert tag("", IUS) == set()  # IU3 has no content word and never matches
    assert tag_texts(["binomial coefficient", None, "classical counting"], IUS, tag) == {"IU1", "IU2"}
    with pytest.raises(ValueError):
        LexicalTagger(min_overlap=0)


def test_coverage_table_union_and_pairwise():
    cell = ("structured", "strategy", "math", "math_001", "novice", "Socratic")
    human = {cell: [frozenset({"IU1"}), frozenset({"IU2"})], cell[:1] + ("model",) + cell[2:]: [frozenset({"IU1"})]}
    sim = {cell: [frozenset({"IU1", "IU3"})]}
    table = coverage_table(human, sim)
    assert len(table) == 1  # only cells both sides have
    row = table.iloc[0]
    assert row.jaccard == pytest.approx(1 / 3)  # {1,2} vs {1,3}
    assert row.mean_pairwise_jaccard == pytest.approx((1 / 2 + 0) / 2)
    assert (row.n_human, row.n_sim, row.human_ius, row.sim_ius) == (2, 1, "IU1 IU2", "IU1 IU3")
    summary = coverage_summary(table)
    assert set(summary.grouping) == {"overall", "arm", "task", "level"}
    assert summary[summary.grouping == "overall"].mean_jaccard.iloc[0] == pytest.approx(1 / 3)


def always_first(text, ius):
    return {ius[0][0]}


def test_custom_tagger_by_import_path():
    tagger = load_tagger(f"{__name__}:always_first")
    assert tagger("anything", IUS) == {"IU1"}
    assert isinstance(load_tagger("ray_knowsim.validate.coverage:LexicalTagger"), LexicalTagger)
    with pytest.raises(ValueError, match="module:name"):
        load_tagger("no_colon")
