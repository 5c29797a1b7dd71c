"""Expand a sweep's parameter space into validated rule settings.

Parameters are paths into a ``RuleConfig`` (``capacity_ratio``, ``termination.window``,
``init_ratios.novice.known``, ``init_ratios.*.partial``, ``w_state.0``, ``w_state``). Every setting
is built as preset + base overrides + its own overrides and validated through ``RuleConfig``
*here*, so a setting that breaks a rule precondition (a negative weight, a zero softening) stops
the sweep before any task is submitted. Setting 0 is always the default (the base); a generated
setting that resolves to the same rules as an earlier one is dropped (it would add nothing).
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import itertools
import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import ValidationError

from ray_knowsim.rules.config import PRESETS, RuleConfig
from ray_knowsim.sweep.config import BaseRules, ParamDist, SpaceConfig, SweepConfigError

#: rule fields that only matter for drawing initial states
INIT_FIELDS: tuple[str, ...] = ("init_ratios", "init_placement", "init_partial_demotion", "include_struggling")


@dataclass(frozen=True)
class Setting:
    index: int
    origin: str  # "default" | "grid" | "random" | "list"
    overrides: dict[str, Any]  # as written in the config (paths -> values)
    rules: RuleConfig
    key: str  # content hash of the resolved rules: equal rules, equal key
    params: dict[str, Any] = field(default_factory=dict)  # swept path -> resolved value

    @property
    def rules_json(self) -> str:
        return canonical_json(self.rules.model_dump(mode="json"))


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def rules_key(rules: RuleConfig) -> str:
    return hashlib.sha256(canonical_json(rules.model_dump(mode="json")).encode()).hexdigest()[:16]


# --- paths into a rule-config dict --------------------------------------------------------------


def _suggest(word: str, options: list[str]) -> str:
    close = difflib.get_close_matches(word, options, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _children(node: Any, part: str, path: str) -> list[Any]:
    """Keys/indices ``part`` selects in ``node`` ('*' = every key of a mapping)."""
    if isinstance(node, dict):
        if part == "*":
            return list(node)
        if part not in node:
            raise SweepConfigError(f"unknown rule parameter {path!r}: no field {part!r}{_suggest(part, list(node))}")
        return [part]
    if isinstance(node, list):
        if part.isdigit() and int(part) < len(node):
            return [int(part)]
        raise SweepConfigError(f"unknown rule parameter {path!r}: {part!r} is not an index 0..{len(node) - 1}")
    raise SweepConfigError(f"unknown rule parameter {path!r}: {part!r} goes below a plain value")


def set_path(tree: dict[str, Any], path: str, value: Any) -> None:
    """Set ``path`` in a rule-config dict (``model_dump(mode="json")`` shape) in place.

    A mapping value assigned to a mapping field is merged into it (``termination: {window: 4}``
    keeps the other termination fields)."""
    parts = path.split(".")

    def walk(node: Any, depth: int) -> None:
        for key in _children(node, parts[depth], path):
            if depth == len(parts) - 1:
                if isinstance(value, dict) and isinstance(node[key], dict):
                    merged = copy.deepcopy(node[key])
                    for k, v in value.items():
                        set_path(merged, str(k), v)
                    node[key] = merged
                else:
                    node[key] = copy.deepcopy(value)
            else:
                walk(node[key], depth + 1)

    walk(tree, 0)


def get_path(tree: dict[str, Any], path: str) -> Any:
    """The value at ``path`` (for a '*', the first matching key's: wildcards set all alike)."""
    node: Any = tree
    for part in path.split("."):
        node = node[_children(node, part, path)[0]]
    return node


def check_paths(paths: list[str]) -> None:
    tree = RuleConfig().model_dump(mode="json")
    for path in paths:
        if path == "preset":
            continue
        get_path(tree, path)


# --- building settings ---------------------------------------------------------------------------


def _start(preset: str) -> dict[str, Any]:
    if preset not in PRESETS:
        raise SweepConfigError(f"unknown rule preset {preset!r}; choose one of {sorted(PRESETS)}")
    return PRESETS[preset]().model_dump(mode="json")


def build_rules(base: BaseRules, overrides: dict[str, Any]) -> RuleConfig:
    """Preset (the setting's own ``preset`` if it names one) + base overrides + ``overrides``."""
    tree = _start(str(overrides.get("preset", base.preset)))
    for path, value in base.overrides.items():
        set_path(tree, path, value)
    for path, value in overrides.items():
        if path == "preset":
            tree["preset"] = value
        else:
            set_path(tree, path, value)
    return RuleConfig.model_validate(tree)


def _draw(dist: ParamDist, rng: np.random.Generator) -> Any:
    if dist.uniform is not None:
        return float(rng.uniform(*dist.uniform))
    if dist.log_uniform is not None:
        lo, hi = dist.log_uniform
        return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))
    if dist.integer is not None:
        return int(rng.integers(dist.integer[0], dist.integer[1] + 1))
    if dist.choice is None:
        raise ValueError(f"distribution {dist!r} names no range, integer range or choices")
    return copy.deepcopy(dist.choice[int(rng.integers(len(dist.choice)))])


def candidates(space: SpaceConfig) -> list[tuple[str, dict[str, Any]]]:
    """(origin, overrides) in order: default, grid (row-major), random draws, explicit list."""
    out: list[tuple[str, dict[str, Any]]] = [("default", {})]
    if space.grid:
        names = list(space.grid)
        for combo in itertools.product(*(space.grid[n] for n in names)):
            out.append(("grid", dict(zip(names, combo))))
    if space.random is not None:
        rng = np.random.default_rng(space.random.seed)
        for _ in range(space.random.n):
            out.append(("random", {name: _draw(d, rng) for name, d in space.random.params.items()}))
    for entry in space.explicit or []:
        if not isinstance(entry, dict):
            raise SweepConfigError(f"space.list entries must be mappings of parameter -> value, got {entry!r}")
        out.append(("list", dict(entry)))
    return out


def swept_params(space: SpaceConfig) -> list[str]:
    names: list[str] = []
    for source in (space.grid or {}, space.random.params if space.random else {}, *(space.explicit or [])):
        for name in source:
            if name not in names:
                names.append(str(name))
    return names


def _short(overrides: dict[str, Any]) -> str:
    text = canonical_json(overrides)
    return text if len(text) < 160 else text[:157] + "..."


def expand(space: SpaceConfig, base: BaseRules, *, max_errors: int = 10) -> list[Setting]:
    """All settings, validated; raises ``SweepConfigError`` listing every broken one."""
    names = swept_params(space)
    check_paths(names + [p for p in base.overrides])
    try:
        default = build_rules(base, {})
    except ValidationError as exc:
        raise SweepConfigError(f"the base rules are invalid: {_brief(exc)}") from exc
    default_tree = default.model_dump(mode="json")
    settings: list[Setting] = []
    seen: dict[str, int] = {}
    errors: list[str] = []
    n_errors = 0
    for k, (origin, overrides) in enumerate(candidates(space)):
        try:
            rules = default if origin == "default" else build_rules(base, overrides)
        except ValidationError as exc:
            n_errors += 1
            if len(errors) < max_errors:
                errors.append(f"  {origin} setting #{k} {_short(overrides)}: {_brief(exc)}")
            continue
        key = rules_key(rules)
        if key in seen:
            continue
        seen[key] = len(settings)
        tree = rules.model_dump(mode="json") if origin != "default" else default_tree
        params = {name: _plain(tree.get("preset") if name == "preset" else get_path(tree, name)) for name in names}
        settings.append(Setting(len(settings), origin, dict(overrides), rules, key, params))
    if n_errors:
        more = f"\n  ... and {n_errors - len(errors)} more" if n_errors > len(errors) else ""
        raise SweepConfigError(
            f"{n_errors} of {len(candidates(space)) - 1} settings break a rule precondition; nothing was run:\n"
            + "\n".join(errors)
            + more
        )
    return settings


def _plain(value: Any) -> Any:
    """Parameter values as table cells: scalars stay, lists/mappings become canonical JSON text."""
    return value if isinstance(value, (bool, int, float, str)) or value is None else canonical_json(value)


def _brief(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ())) or "(rules)"
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    return "; ".join(parts)


def changes_init(rules: RuleConfig, default: RuleConfig) -> bool:
    """Does this setting draw initial states differently from the default?"""
    return any(getattr(rules, f) != getattr(default, f) for f in INIT_FIELDS)


def init_key(rules: RuleConfig) -> str:
    """Settings with equal init rules draw equal initial states (one cache entry)."""
    dump = rules.model_dump(mode="json")
    return canonical_json({f: dump[f] for f in INIT_FIELDS})


__all__ = [
    "INIT_FIELDS",
    "Setting",
    "build_rules",
    "candidates",
    "canonical_json",
    "changes_init",
    "check_paths",
    "expand",
    "get_path",
    "init_key",
    "rules_key",
    "set_path",
    "swept_params",
]
