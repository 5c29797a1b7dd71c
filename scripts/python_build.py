"""Which CPython build runs this, and whether it is one of the fast ones.

The client's CPU per request is interpreter work (rendering, JSON, the event loop), so the build
of CPython decides a good part of it. Measured on the development machine (docs/performance.md,
"The ninth round"): the same code costs 15-20 % less CPU per request, and the bare HTTP transport
about a third less, on Debian's python3.11 (built with profile-guided optimisation and link-time
optimisation, libpython linked into the executable) than on a pyenv build made without
``--enable-optimizations`` and with ``--enable-shared`` (libpython as a position-independent
shared library, every call into it through the dynamic linker's tables).

A build counts as optimised when it was configured with ``--enable-optimizations`` (python.org's
images, conda-forge, python-build-standalone, pyenv with that option), or when libpython is part
of the executable rather than a shared library it loads (Debian's and Ubuntu's python3.x, which
they build with PGO and LTO without saying so in ``CONFIG_ARGS``). It is a preference, not a
measurement: ``scripts/_venv.sh`` builds the project's venv on the first optimised CPython it
finds (``$PYTHON`` overrides it), and the benches print the build beside their figures, so two
figures are compared only on the same build.

Run by any interpreter (no imports of the project):
    python3 scripts/python_build.py              one JSON object describing this build
    python3 scripts/python_build.py --venv       "optimized <executable>" or "plain <executable>",
                                                 exit 1 when this interpreter cannot build the venv
                                                 (older than 3.11, or no venv/ensurepip)
    python3 scripts/python_build.py --pick C...  the interpreter to build the venv on, of the
                                                 candidates C (commands or paths, in order of
                                                 preference): the first optimised one, else the
                                                 first that can build it; nothing when none can
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import sysconfig

MIN_VERSION = (3, 11)


def loads_shared_libpython() -> bool | None:
    """Whether this process mapped a shared libpython (None where /proc cannot tell)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            return any("libpython" in line for line in maps)
    except OSError:
        return None


def describe() -> dict:
    """This interpreter's build, as the benches report it beside their figures."""
    configured = sysconfig.get_config_var("CONFIG_ARGS") or ""
    pgo = "--enable-optimizations" in configured
    shared = loads_shared_libpython()
    return {
        "python_version": platform.python_version(),
        "python_executable": sys.executable,
        "python_enable_optimizations": pgo,
        "python_shared_libpython": shared,
        "python_optimized_build": bool(pgo or shared is False),
    }


def warn_if_plain(out=sys.stderr) -> None:
    """A bench's note, before its figures, when it runs on a plain build: its CPU figures read
    higher than on an optimised one (measured here: 10-15 % of the client's CPU per request)."""
    build = describe()
    if not build["python_optimized_build"]:
        print(f"NOTE: {build['python_executable']} (Python {build['python_version']}) is a plain CPython build (no "
              "--enable-optimizations, libpython a shared library): CPU figures read 10-15 % higher than on an "
              "optimised one; `source scripts/_venv.sh` builds .venv on one where the machine has it", file=out, flush=True)


def _can_build_venv() -> bool:
    if sys.version_info < MIN_VERSION:
        return False
    try:
        import ensurepip  # noqa: F401  (Debian strips it unless python3.x-venv is installed)
        import venv  # noqa: F401
    except ImportError:
        return False
    return True


def pick(candidates: list[str]) -> str:
    """The interpreter to build the venv on (see the module docstring); "" when none can."""
    first = ""
    for candidate in candidates:
        try:
            done = subprocess.run([candidate, __file__, "--venv"], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            continue
        kind, _, executable = done.stdout.strip().partition(" ")
        if done.returncode != 0 or kind not in ("optimized", "plain") or not executable:
            continue
        if kind == "optimized":
            return executable
        first = first or executable
    return first


def main(argv: list[str]) -> int:
    if argv[1:2] == ["--pick"]:
        chosen = pick(argv[2:])
        if chosen:
            print(chosen)
        return 0 if chosen else 1
    if argv[1:] == ["--venv"]:
        if not _can_build_venv():
            return 1
        build = describe()
        print(("optimized" if build["python_optimized_build"] else "plain"), build["python_executable"])
        return 0
    print(json.dumps(describe(), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
