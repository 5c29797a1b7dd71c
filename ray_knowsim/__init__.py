"""ray_knowsim: KnowSim evaluation of information calibration, at cluster scale on Ray.

Where things live: ``schema/`` the data formats; ``rules/`` the state update, metrics and
termination (pure); ``kernels`` (the top-level ``kernels/`` folder) the numba state update;
``prompts/`` what each role is sent; ``llm/`` model clients, parsers and the offline test double;
``strategies/`` and ``simulators/`` the tutor strategies and learner simulators with their
registries; ``sim/`` one conversation's turn loop; ``graph_extraction/`` IU-graph extraction for
new items; ``score/`` the judges; ``stats/`` every statistic; ``io/`` the run directory and
``tables/`` its tables; ``cluster/`` what talks to Ray as a cluster; ``backends/`` the model
backends; ``config/`` the run config; ``plan/`` what a run will do; ``preflight/`` the checks and
estimate before spending; ``run/`` the run on Ray; the commands above them (``sweep``,
``validate``, ``report``, ``compare``, ``view``, ``adaptive``, ``training``, ``cli``).
"""
