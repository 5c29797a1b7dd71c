"""Offline IU-graph extraction for new items: a model proposes each item's graph before any run
uses it (``ray-knowsim extract-graphs``). Its own package because it is a stage of its own (before
any run, with its own command and cache), above the loop whose ``ask`` naming it uses; named for
what it does, not ``graphs`` (the IU-graph data format is :mod:`ray_knowsim.schema.graph`)."""
