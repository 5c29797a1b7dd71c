"""Source-tree stand-in for ``ray_knowsim.kernels`` (never installed: see pyproject.toml).

The kernel modules live in the top-level ``kernels/`` folder (the layout the users asked for) and
an install maps that folder to ``ray_knowsim.kernels``. A process that imports ``ray_knowsim``
straight from a checkout gets no such mapping: ``python -m ray_knowsim`` from the checkout's root,
and every Ray worker of a job started there or shipped with ``--working-dir .`` (Ray puts the
driver's current directory, or the unpacked working directory, first on the workers' path). This
package makes the checkout importable as it is: its search path is the top-level ``kernels/``
folder, and it runs that folder's ``__init__``, so ``ray_knowsim.kernels.sessions`` is
``kernels/sessions.py``. A wheel's ``ray_knowsim/kernels/`` holds the real files instead (the
package-dir mapping), so this file is never part of an install.
"""

from pathlib import Path as _Path

_KERNELS = _Path(__file__).resolve().parent.parent.parent / "kernels"
if not (_KERNELS / "__init__.py").is_file():
    raise ImportError(
        f"ray_knowsim.kernels: {_KERNELS} is missing. This ray_knowsim folder ({_Path(__file__).resolve().parent.parent}) "
        "is a copy of the source tree without the top-level kernels/ folder beside it: ship the whole checkout "
        "(`ray job submit --working-dir .`), or install the project (`pip install .`)"
    )
__path__ = [str(_KERNELS)]
__file__ = str(_KERNELS / "__init__.py")
exec(compile((_KERNELS / "__init__.py").read_bytes(), __file__, "exec"))  # the real package's own __init__
del _Path, _KERNELS
