"""`ray-knowsim report`: a run directory's results as one offline HTML page plus Markdown tables.

io.rundir (streaming Parquet) -> aggregate (per-cell moments, failure modes, sample) -> tables
(per level, level-marginalised, ranks) -> explain (per-turn IU moves) -> plots (PNG data URIs)
-> decisions (who beats whom, cost) and judges (agreement of score sets) -> html_page / markdown;
build ties them together, one section per task.
"""
