"""cluster/codecheck.py: the code fingerprint is one for a checkout and its install, differs for
any change to the package's code or data, and a worker on other code refuses to run a shard; on
Ray, the probe reaches every node and its functions travel by value (the worker computes its own
identity, never the driver's cached one)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ray_knowsim.cluster.codecheck import CodeMismatch, cluster_mismatches, differs, explain, fingerprint, identity, run_checked

ROOT = Path(__file__).resolve().parents[2]


def installed_layout(dst: Path) -> Path:
    """The package as a wheel installs it: kernels inside, no stand-in."""
    pkg = dst / "ray_knowsim"
    shutil.copytree(ROOT / "ray_knowsim", pkg, ignore=shutil.ignore_patterns("__pycache__", "kernels"))
    shutil.copytree(ROOT / "kernels", pkg / "kernels", ignore=shutil.ignore_patterns("__pycache__"))
    return pkg


def test_a_checkout_and_its_install_have_one_fingerprint(tmp_path):
    pkg = installed_layout(tmp_path / "site")
    source = fingerprint(ROOT / "ray_knowsim", ROOT / "kernels")
    assert fingerprint(pkg, pkg / "kernels") == source
    (pkg / "NOTES.org").write_text("not part of the package")  # a stray file changes nothing
    (pkg / "run" / "__pycache__").mkdir(exist_ok=True)
    (pkg / "run" / "__pycache__" / "x.py").write_text("cache")
    assert fingerprint(pkg, pkg / "kernels") == source


@pytest.mark.parametrize("changed", ["text.py", "prompts/templates/assistant_minimal.v1.txt", "kernels/update.py"])
def test_any_change_to_code_or_data_changes_it(tmp_path, changed):
    pkg = installed_layout(tmp_path / "site")
    before = fingerprint(pkg, pkg / "kernels")
    target = pkg / changed
    target.write_bytes(target.read_bytes() + b"\n")
    assert fingerprint(pkg, pkg / "kernels") != before
    assert fingerprint(pkg, None) != before  # kernels that cannot be imported differ too


def test_a_worker_on_other_code_refuses_with_both_copies_named():
    here = identity()
    assert here["error"] is None and here["fingerprint"] == fingerprint(ROOT / "ray_knowsim", ROOT / "kernels")
    assert run_checked(here, lambda a, b: a + b, 2, 3) == 5
    other = dict(here, fingerprint="0" * 16, package="/srv/old/ray_knowsim")
    with pytest.raises(CodeMismatch) as err:
        run_checked(other, lambda: pytest.fail("ran on mixed code"))
    assert "/srv/old/ray_knowsim" in str(err.value) and here["package"] in str(err.value)
    assert differs(here, dict(here, error="import ray_knowsim.kernels: ModuleNotFoundError"))
    assert "changed between" in explain(here, dict(here, fingerprint="1" * 16), "a worker")


def test_the_probe_reaches_every_node_and_computes_there(ray_local):
    assert cluster_mismatches(identity()) == ([], [])
    other = dict(identity(), fingerprint="f" * 16, package="/elsewhere/ray_knowsim")
    mismatched, unanswered = cluster_mismatches(other)
    # the worker computed its own identity (the driver's checkout), and said how to fix it
    assert len(mismatched) == len(ray_local.nodes()) and not unanswered
    assert "/elsewhere/ray_knowsim" in mismatched[0] and str(ROOT / "ray_knowsim") in mismatched[0]
    assert "python -m ray_knowsim" in mismatched[0]
