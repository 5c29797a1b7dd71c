"""Scoring as its own stage: judges read a run's finished transcripts and write their own columns.

The simulation (``sim/``) writes transcripts and states; this package turns them into judge
scores without re-simulating:

* :mod:`.judges` — the judge registry (``JUDGES``) with the built-in Interaction Quality rater
  and the baseline termination judge;
* :mod:`.transcripts` — what a judge reads of one session, rebuilt from the Parquet rows;
* :mod:`.stage` — one pass of the registered judges over many transcripts (no Ray, no I/O);
* :mod:`.store` — the ``scores/<name>/`` Parquet dataset (per-shard commits, resume) and the
  join that puts scores beside the session rows for tables and reports.

The run-directory orchestration (which shards, which models) is ``score/run_stage.py``.
"""
