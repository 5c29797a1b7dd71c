"""The warning a report (and the viewer) shows on top of results that no real model produced,
read from a run's manifest. Kept apart from report.build so a reader that only needs the banner
does not import the report's plotting and statistics."""

from __future__ import annotations

from typing import Any

#: the heading every surface puts before the banner (report HTML and Markdown, viewer, terminal)
BANNER_HEADING = "Not a real-model measurement."


def manifest_banner(manifest: dict[str, Any]) -> str | None:
    """The banner text for a manifest already read: the roles a test double (the offline model)
    answered, and a replaced shard function. Manifests written before ``test_doubles`` existed
    name the built-in ``offline`` backend in their config, which is read instead."""
    if "test_doubles" in manifest:
        doubles = sorted(manifest["test_doubles"])
    else:
        doubles = sorted(role for role, backend in _config_backends(manifest.get("config") or {}).items() if backend == "offline")
    notes = []
    if doubles:
        notes.append("These results come from the OFFLINE model (roles: " + ", ".join(doubles) + "): a deterministic "
                     "test double designed to exhibit the paper's qualitative patterns. They check the pipeline; they "
                     "are not measurements of any real model.")
    if manifest.get("replaced_shard_fn"):
        notes.append(f"The sessions were written by engine.shard_fn = {manifest['replaced_shard_fn']}, not by the "
                     "simulation loop of ray_knowsim: its rows need not follow the method at all.")
    return " ".join(notes) or None


def _config_backends(cfg: dict[str, Any]) -> dict[str, str]:
    models = cfg.get("models") or {}
    roles = cfg.get("roles") or {}
    out = {}
    for role, rc in roles.items():
        key = rc.get("model") if isinstance(rc, dict) else rc
        if key in models:
            out[role] = models[key].get("backend", "")
    default = (roles.get("assistant") or {}).get("model")
    for cond in cfg.get("conditions") or []:
        key = cond.get("assistant") or default
        if key in models:
            out[f"assistant:{key}"] = models[key].get("backend", "")
    return out


__all__ = ["BANNER_HEADING", "manifest_banner"]
