"""Counterfactual parameter sweeps: re-score recorded conversations under many rule settings.

config (SweepConfig, YAML) -> space (validated settings) + source (conversations of a run or of
reference records) -> rescore (kernel or plain-Python rules, one row per setting x conversation)
-> runner (Ray tasks per (settings block, conversation chunk), Parquet, resume) -> aggregate
(per-setting sums) -> identity (setting 0 vs the recorded metrics) -> report (sensitivity tables
and plots). Entry point: ``ray-knowsim sweep CONFIG`` (cli/sweep.py).
"""
