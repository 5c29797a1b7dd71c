"""The one statistics module: every mean, interval, rank, paired test and sequential decision of
the tables, the report, ``compare`` and adaptive runs is computed here (pure: numpy, pandas and
scipy; no Ray, no I/O).

* :mod:`.winrate` — THE quantity every verdict is about: per pair, the wins / losses / ties of
  item means over matched items, and the item win rate;
* :mod:`.descriptive` — streaming moments and the **item-clustered** mean and 95 % interval of a
  cell (one level) or of the level-marginal (the unweighted mean of level means);
* :mod:`.tables` — the run's ``level_means`` / ``marginal`` / ``ranks`` tables from per-item sums
  (the run's Ray Data reduction, ``tables/reduce.py``, and the report's streaming pass both hand
  their sums here);
* :mod:`.ranks` — competition ranks, the ONE definition of the paper's mean rank
  (``paper_mean_ranks``) and the mean item rank (the Borda count of the item win rates);
* :mod:`.leaderboard` — one metric's leaderboard from its verdicts: tiers (from significant verdicts, cycles
  named), the descriptive order inside a tier, and the ★ (beats every other condition);
* :mod:`.signs` — the fixed-design paired verdict: exact sign test over items with its
  Clopper–Pearson interval for the win rate (one verdict by construction), minimum items and
  minimum detectable effects;
* :mod:`.group_sequential` — the adaptive verdict over a known pool: the exact group-sequential
  sign test (binomial DP over the looks, alpha spending, repeated intervals from the boundaries);
* :mod:`.sequential` — the anytime-valid verdict for open-ended pools: a Krichevsky–Trofimov
  mixture confidence sequence, and anytime-valid equivalence on the tie-inclusive win rate;
* :mod:`.multiplicity` — Bonferroni (compare's fixed design) and Holm's exact closure over
  sequential tests (adaptive runs);
* :mod:`.feasibility` — can a design decide at all (minimum items), items needed for an effect;
* :mod:`.per_decision` — a run's cost per decision it reached (the dry run's: per decision its
  design can reach at most), in dollars or tokens, and the sentence every surface prints;
* :mod:`.coverage` — the measured coverage of the item-clustered interval at few items;
* :mod:`.rates` — whether two conditions' failure rates differ enough to bias a comparison
  (Fisher's exact test with a floor on the difference; compare's failure warnings);
* :mod:`.decide` — decisions (best = beats every other directly / ranking / pairs), cycles named;
* :mod:`.adaptive` — the procedure: the family's sequential tests, looks and what stays in play;
* :mod:`.agreement` — agreement between raters (Kendall's tau-b, Krippendorff's alpha, Cohen's
  kappa, label rates): simulator agreement, the judges' block of the report, sweeps' rank stability;
* :mod:`.association` — Spearman rho, Cliff's delta, the one-sided binomial test against chance,
  z-scores and Jaccard: the human-study validation and the report's judge agreement.
"""
