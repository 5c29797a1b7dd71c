"""What a Ray cluster that ray-knowsim starts on this machine is told before ``ray.init``.

Why: Ray 2.60 turns token authentication on for a cluster that ``ray.init()`` starts while
``RAY_AUTH_MODE`` is unset, and then logs a warning about it on every start. Nothing is wrong;
the mode was just never chosen. So the run chooses Ray's own default explicitly, token
authentication (the token in ``~/.ray/auth_token``, created when missing), and Ray starts
without the warning. A ``RAY_AUTH_MODE`` the user set is left as it is.
"""

from __future__ import annotations

import os

AUTH_MODE_ENV = "RAY_AUTH_MODE"


def choose_auth_mode() -> None:
    """Call right before ``ray.init(address="local", ...)``."""
    if AUTH_MODE_ENV in os.environ:
        return
    os.environ[AUTH_MODE_ENV] = "token"
    from ray._raylet import Config

    Config.initialize("")  # re-read the environment, as ray.init does itself when it turns token auth on


__all__ = ["choose_auth_mode"]
