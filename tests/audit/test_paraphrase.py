"""The audit reads a tutor who teaches in other words: the labelled paraphrases of
tests/doubles/audit_paraphrases.py (50 taught IUs over the 4 demo maths items) set the 'about' rule's
thresholds, and worked expressions and short final answers are recognised as written."""

from __future__ import annotations

import pytest

from ray_knowsim.audit.checks import asked_noun, states_answer
from ray_knowsim.audit.wording import about, content_words, graph_words, math_atoms
from ray_knowsim.demo import demo_graphs
from tests.doubles.audit_paraphrases import PARAPHRASES, TUNING
from tests.doubles.audit_sessions import ITEMS


def labelled(items: tuple[str, ...]) -> tuple[int, int, int, int]:
    """(taught IUs found, taught IUs, other IUs found, other IUs) for the tutor paraphrases of ``items``."""
    found = n = wrong = others = 0
    for item in items:
        ius = graph_words(demo_graphs("math")[item], "", ITEMS[item]["solution"])
        for iu, p in PARAPHRASES[item].items():
            words = content_words(p["tutor"])
            got = set(about(p["tutor"], ius)) | {i for i, w in ius.items() if w.covered(words)}
            negatives = [o for o in ius if o != iu and o not in p["also"]]
            found, n = found + (iu in got), n + 1
            wrong, others = wrong + len(got & set(negatives)), others + len(negatives)
    return found, n, wrong, others


@pytest.mark.parametrize("half", ["tuning", "held_out"])
def test_taught_ius_are_found_in_other_words(half):
    items = TUNING if half == "tuning" else tuple(i for i in PARAPHRASES if i not in TUNING)
    found, n, wrong, others = labelled(items)
    # measured: tuning 23/25 found, 0/269 others; held out 24/25, 0/265 (docs/audit.md)
    assert found >= 0.9 * n and wrong <= 0.01 * others, (found, n, wrong, others)


def test_worked_expressions_are_normalised():
    assert {"=6w+6=54", "=2(3w+3)=54", "=6w+6"} <= math_atoms("so 2(3w + 3) = 54, which opens up to 6w + 6 = 54.")
    assert "=c(6,3)" in math_atoms("6 choose 3 ways") and "=c(6,3)" in math_atoms(r"$\binom{6}{3}$")
    assert "=9/100" in math_atoms(r"$\dfrac{6\cdot6}{20\cdot20}=\dfrac{9}{100}$") and "=7^100=2^100" in math_atoms("7^100 ≡ 2^100 (mod 5)")
    assert math_atoms("the distance-round formula and the 3 lamps") == frozenset()


PROBLEM = "A right triangle has legs of length 9 and 12. What is the radius of the circle inscribed in the triangle?"


@pytest.mark.parametrize("text", ["I think the radius is 3.", "So the final answer is 3, right?", r"Is it just $\boxed{3}$?",
                                  "Then 54 over 18, so it's 3.", "the radius of the circle is 3 cm"])
def test_a_short_answer_stated_as_the_answer_is_found(text):
    assert asked_noun(PROBLEM) == "radius" and states_answer(text, "3", "radius")


@pytest.mark.parametrize("text", ["The legs are 9 and 12, and 3 of the sides touch the circle.", "It is the 3-4-5 triple times 3: 9-12-15.",
                                  "So r = 3 times something?", "the radius is 3 times smaller than what?"])
def test_a_short_answer_in_working_is_not(text):
    assert states_answer(text, "3", "radius") == ""
