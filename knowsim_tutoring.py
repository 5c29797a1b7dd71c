"""The verifiers plugin ``knowsim-tutoring``: verifiers resolves a taskset or environment id by
importing the top-level module of that name and taking the Taskset and Env subclasses it exports,
so ``vf-eval knowsim-tutoring ...`` (or ``--env.taskset.id knowsim-tutoring``) runs KnowSim
episodes. The code is :mod:`ray_knowsim.training.adapters.verifiers`; this module only names it
(``pip install 'ray-knowsim[verifiers]'``)."""

from ray_knowsim.training.adapters.verifiers import KnowSimEnv, KnowSimTaskset

__all__ = ["KnowSimEnv", "KnowSimTaskset"]
