"""Adapters of the training environment to RL libraries; each imports its library only when used
(``pip install 'ray-knowsim[training]'``)."""
