"""Concept coverage: which IUs of an item a conversation touches, human vs simulated (Figure 4).

A *tagger* is any callable ``tagger(text, ius) -> set of IU ids`` where ``ius`` is the item's
``[(id, concept), ...]``; it is applied to each message (user and assistant) separately and a
conversation's coverage is the union over its messages. ``LexicalTagger`` is the shipped default;
``--tagger module:name`` plugs in another (an LLM tagger, an embedding matcher, ...).

Per cell (simulator, arm, task, item, level, condition) we report the Jaccard of the union of
human IU sets and the union of simulated ones, and the mean Jaccard over all (human
conversation, simulated conversation) pairs of the cell, which does not saturate as trials grow.
"""

from __future__ import annotations

from ray_knowsim.registry import load_object
from ray_knowsim.text import content_words

import math
from collections.abc import Callable, Iterable, Sequence
from itertools import product

import pandas as pd

from ray_knowsim.stats.association import jaccard

IUConcept = tuple[str, str]
IUTagger = Callable[[str, Sequence[IUConcept]], Iterable[str]]
CELL_COLS = ["simulator", "arm", "task", "item_id", "level", "condition"]

class LexicalTagger:
    """An IU is mentioned when at least ``min_overlap`` of its concept's content words occur in
    the text (after lower-casing and plural folding). Concepts with no content word never match.
    Crude but transparent, deterministic and fast; it errs towards missing paraphrases."""

    def __init__(self, min_overlap: float = 0.6, min_len: int = 3):
        if not 0 < min_overlap <= 1:
            raise ValueError(f"min_overlap must lie in (0, 1], got {min_overlap}")
        self.min_overlap = min_overlap
        self.min_len = min_len
        self._compiled: dict[tuple[IUConcept, ...], list[tuple[str, frozenset[str], int]]] = {}

    def _compile(self, ius: Sequence[IUConcept]) -> list[tuple[str, frozenset[str], int]]:
        key = tuple(ius)
        got = self._compiled.get(key)
        if got is None:
            got = []
            for iu_id, concept in key:
                words = content_words(concept, self.min_len)
                if words:
                    need = max(1, math.ceil(self.min_overlap * len(words) - 1e-9))
                    got.append((iu_id, words, need))
            self._compiled[key] = got
        return got

    def __call__(self, text: str, ius: Sequence[IUConcept]) -> set[str]:
        if not text:
            return set()
        words = content_words(text, self.min_len)
        return {iu for iu, cw, need in self._compile(ius) if len(cw & words) >= need}


def load_tagger(spec: str) -> IUTagger:
    """'package.module:name' -> the callable (a class is instantiated without arguments)."""
    try:
        obj = load_object(spec)
    except ValueError:
        raise ValueError(f"tagger must be given as 'module:name', got {spec!r}") from None
    if isinstance(obj, type):
        obj = obj()
    if not callable(obj):
        raise ValueError(f"tagger {spec!r} is not callable")
    return obj


def tag_texts(texts: Iterable[str], ius: Sequence[IUConcept], tagger: IUTagger) -> frozenset[str]:
    out: set[str] = set()
    for t in texts:
        if t:
            out |= set(tagger(t, ius))
    return frozenset(out)


def coverage_table(human: dict[tuple, list[frozenset[str]]], sim: dict[tuple, list[frozenset[str]]]) -> pd.DataFrame:
    """Cells (keys: CELL_COLS order) present on both sides -> Jaccard figures."""
    rows = []
    for cell in sorted(set(human) & set(sim), key=lambda k: tuple("" if v is None else str(v) for v in k)):
        hs, ss = human[cell], sim[cell]
        hu, su = frozenset().union(*hs), frozenset().union(*ss)
        pair_j = [j for j in (jaccard(a, b) for a, b in product(hs, ss)) if j is not None]
        rows.append(
            dict(zip(CELL_COLS, cell))
            | dict(
                n_human=len(hs), n_sim=len(ss),
                human_ius=" ".join(sorted(hu)), sim_ius=" ".join(sorted(su)),
                jaccard=jaccard(hu, su),
                mean_pairwise_jaccard=sum(pair_j) / len(pair_j) if pair_j else None,
            )
        )
    return pd.DataFrame(rows, columns=[*CELL_COLS, "n_human", "n_sim", "human_ius", "sim_ius", "jaccard", "mean_pairwise_jaccard"])


def coverage_summary(cov: pd.DataFrame) -> pd.DataFrame:
    """Mean Jaccards per simulator overall / arm / task / level (cells weighted equally)."""
    rows = []
    for simulator, sc in cov.groupby("simulator", dropna=False):
        groups = [("overall", "all", sc)]
        for col in ("arm", "task", "level"):
            groups += [(col, v, g) for v, g in sc.groupby(col)]
        for grouping, group, g in groups:
            rows.append(
                dict(simulator=simulator, grouping=grouping, group=group, n_cells=len(g),
                     mean_jaccard=g["jaccard"].astype(float).mean(),
                     mean_pairwise_jaccard=g["mean_pairwise_jaccard"].astype(float).mean())
            )
    return pd.DataFrame(rows, columns=["simulator", "grouping", "group", "n_cells", "mean_jaccard", "mean_pairwise_jaccard"])
