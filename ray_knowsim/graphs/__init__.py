"""Offline IU-graph extraction for new items: a model proposes each item's graph before any run
uses it (``ray-knowsim extract-graphs``)."""
