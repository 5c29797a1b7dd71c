"""`ray-knowsim report`: a run directory's results as one offline HTML page plus Markdown tables.

reader (streaming Parquet) -> aggregate (per-cell moments, failure modes, sample) -> tables
(per level, level-marginalised, ranks) -> explain (per-turn IU moves) -> plots (PNG data URIs)
-> html_page / markdown; build ties them together. synthetic writes test runs in the contract.
"""
