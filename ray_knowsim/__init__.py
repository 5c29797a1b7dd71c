"""ray_knowsim: KnowSim evaluation of information calibration, at cluster scale on Ray.

Where things live: ``schema/`` the data formats; ``rules/`` the state update, metrics and
termination (pure); ``kernels`` (the top-level ``kernels/`` folder) the numba state update;
``prompts/`` what each role is sent; ``llm/`` model clients, parsers and the offline test double;
``strategies/`` and ``simulators/`` the tutor strategies and learner simulators with their
registries; ``sim/`` one conversation's turn loop; ``graphs/`` IU-graph extraction for new items;
``score/`` the judges; ``stats/`` every statistic; ``io/`` the run directory; ``engine/`` the Ray
orchestration; the commands above them (``sweep``, ``validate``, ``report``, ``compare``,
``view``, ``adaptive``, ``cli``).
"""
