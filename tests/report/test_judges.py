"""The judge section: per-condition IQ under each score set and their agreement, worked by hand."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from ray_knowsim.report.judges import judge_blocks, judges_html, judges_markdown


def sessions() -> pd.DataFrame:
    rows = [
        # condition, iq (primary), iq@j2
        ("A", 8, 7), ("A", 9, 8),
        ("B", 5, 6), ("B", 6, 7),
        ("C", 2, 9), ("C", 3, 9),
    ]
    df = pd.DataFrame(
        [{"session_id": f"s{k}", "task": "math", "condition": c, "status": "ok", "iq": a, "iq@j2": b}
         for k, (c, a, b) in enumerate(rows)]
    )
    extra = pd.DataFrame([
        {"session_id": "f", "task": "math", "condition": "A", "status": "failed", "iq": 1.0, "iq@j2": 1.0},  # ignored
        {"session_id": "u", "task": "math", "condition": "B", "status": "ok", "iq": 5.5, "iq@j2": None},  # j2 has no score
    ])
    return pd.concat([df, extra], ignore_index=True)


def test_means_and_agreement_match_a_hand_computation():
    [block] = judge_blocks(sessions(), "sim", ["sim", "j2"])
    assert block.task == "math" and block.sets == ["sim", "j2"]
    m = block.means
    assert m.loc["A", "sim"] == 8.5 and m.loc["B", "sim"] == 5.5 and m.loc["C", "sim"] == 2.5
    assert m.loc["A", "j2"] == 7.5 and m.loc["B", "j2"] == 6.5 and m.loc["C", "j2"] == 9.0
    assert m.loc["B", "n_sim"] == 3 and m.loc["B", "n_j2"] == 2  # the unscored session counts for sim only
    [a] = block.agreements
    assert a.score_set == "j2" and a.n_sessions == 6
    # ranks sim [5,6,3,4,1,2], j2 [2.5,4,1,2.5,5.5,5.5]: rho = -7.5 / sqrt(17.5 * 16.5)
    assert a.rho == pytest.approx(-7.5 / math.sqrt(17.5 * 16.5))
    # condition order sim A>B>C, j2 C>A>B: 1 concordant, 2 discordant pairs
    assert a.tau == pytest.approx(-1 / 3)
    assert a.same_best is False


def test_rendered_in_both_formats_and_absent_with_one_judge():
    blocks = judge_blocks(sessions(), "sim", ["sim", "j2"])
    md = "\n".join(judges_markdown(blocks))
    assert "## Judges" in md and "| A | 8.50 (n=2) | 7.50 (n=2) |" in md
    assert "j2 vs sim: rho -0.44 over 6 sessions, tau -0.33 over conditions, highest mean IQ differs" in md
    page = "".join(judges_html(blocks))
    assert 'id="judges"' in page and "<td>C</td>" in page
    assert judge_blocks(sessions(), "sim", ["sim"]) == []
    assert judges_html([]) == [] and judges_markdown([]) == []


def test_a_judge_that_gives_everyone_the_same_score_has_no_rank_agreement(recwarn):
    df = sessions()
    df["iq@j2"] = 5.0
    [block] = judge_blocks(df, "sim", ["sim", "j2"])
    [a] = block.agreements
    assert math.isnan(a.rho) and math.isnan(a.tau) and a.n_sessions == 7  # the failed session is left out
    assert a.same_best is None  # every condition ties for first
    assert not [w for w in recwarn if "constant" in str(w.message).lower()]
    assert "rho – over 7 sessions, tau – over conditions, highest mean IQ –" in "\n".join(judges_markdown([block]))
