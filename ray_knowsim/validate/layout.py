"""The KnowChat data layout as one pydantic object (``KnowChatLayout``).

The built-in default is ``knowchat_layout.yaml`` beside this module: the layout the dataset card
describes (documented in that file). ``--layout FILE`` (YAML) is merged over it, so a file names
only what differs from the card: sheet names, column names, record field names, message roles
and which raw condition code means which condition. Unknown keys are errors with their path.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ray_knowsim.io.yamltext import load_yaml
from ray_knowsim.validate.conditions import ARMS, CONDITION_CODES, TASKS, norm_token

DEFAULT_LAYOUT_FILE = Path(__file__).with_name("knowchat_layout.yaml")

#: logical record fields / columns / sheets the loader asks for
RECORD_FIELDS = ("prolific_id", "session", "condition", "topic", "questions", "messages")
COLUMN_KEYS = ("prolific_id", "session", "condition", "topic", "score", "max_score", "question_id", "item_id", "dc", "co", "iq",
               "turn", "iu", "label")
SHEET_KEYS = ("summary", "background", "prescreening", "pretest", "posttest", "main", "survey", "questions", "iu_labels")
ROLES = ("user", "assistant", "system")


class LayoutError(ValueError):
    """A layout file that cannot be read or does not validate; the message names file and key."""


#: the matching key of a header, field or sheet name: lower-case alphanumerics only
name_key = norm_token


def _names(v: object) -> object:
    """A single name is a one-element list."""
    return [v] if isinstance(v, str) else v


Names = list[str]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _nonempty_names(v: dict[str, list[str]] | list[str]) -> Any:
    items = v.values() if isinstance(v, dict) else [v]
    for names in items:
        if not names or any(not name_key(n) for n in names):
            raise ValueError("every name list needs at least one name with a letter or digit")
    return v


class FilesLayout(_Strict):
    arms: dict[str, Names] = Field(default_factory=dict)
    tasks: dict[str, Names] = Field(default_factory=dict)

    @field_validator("arms", "tasks", mode="before")
    @classmethod
    def _lists(cls, v: object) -> object:
        return {k: _names(x) for k, x in v.items()} if isinstance(v, dict) else v

    @model_validator(mode="after")
    def _known(self) -> "FilesLayout":
        for what, have, known in (("arms", self.arms, ARMS), ("tasks", self.tasks, TASKS)):
            if set(have) != set(known):
                raise ValueError(f"files.{what} must name exactly {', '.join(known)} (got {', '.join(have) or 'nothing'})")
            _nonempty_names(have)
        return self


class SheetLayout(_Strict):
    names: Names
    tasks: list[str] = Field(default_factory=list)  # tasks for which the sheet is required
    columns: dict[str, Names] = Field(default_factory=dict)  # overrides of the shared columns
    item_pattern: str | None = None
    max_score: float | None = Field(default=None, gt=0)  # a fixed maximum when the sheet has none

    @field_validator("names", mode="before")
    @classmethod
    def _one(cls, v: object) -> object:
        return _names(v)

    @field_validator("columns", mode="before")
    @classmethod
    def _lists(cls, v: object) -> object:
        return {k: _names(x) for k, x in v.items()} if isinstance(v, dict) else v

    @field_validator("tasks")
    @classmethod
    def _tasks(cls, v: list[str]) -> list[str]:
        bad = [t for t in v if t not in TASKS]
        if bad:
            raise ValueError(f"unknown task(s) {', '.join(bad)} (expected {', '.join(TASKS)})")
        return v

    @field_validator("columns")
    @classmethod
    def _cols(cls, v: dict[str, list[str]]) -> dict[str, list[str]]:
        bad = [k for k in v if k not in COLUMN_KEYS]
        if bad:
            raise ValueError(f"unknown column key(s) {', '.join(bad)} (expected {', '.join(COLUMN_KEYS)})")
        return _nonempty_names(v)


class KnowChatLayout(_Strict):
    """Where the loader finds each thing in a KnowChat release (see knowchat_layout.yaml)."""

    version: int = 1
    name: str = "custom"
    files: FilesLayout
    records: dict[str, Names]
    roles: dict[str, Names]
    conditions: dict[str, dict[str, str]]
    columns: dict[str, Names]
    item_pattern: str
    sheets: dict[str, SheetLayout]
    question_index_base: int = Field(default=0, ge=0)

    @field_validator("records", "roles", "columns", mode="before")
    @classmethod
    def _lists(cls, v: object) -> object:
        return {k: _names(x) for k, x in v.items()} if isinstance(v, dict) else v

    @field_validator("conditions", mode="before")
    @classmethod
    def _code_keys(cls, v: object) -> object:
        # YAML reads `0: Socratic` with an int key; codes are matched as text
        if isinstance(v, dict):
            return {arm: ({str(k): str(x) for k, x in m.items()} if isinstance(m, dict) else m) for arm, m in v.items()}
        return v

    @field_validator("item_pattern")
    @classmethod
    def _regex(cls, v: str) -> str:
        try:
            re.compile(v)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression: {exc}") from None
        return v

    @model_validator(mode="after")
    def _complete(self) -> "KnowChatLayout":
        for what, have, known in (
            ("records", self.records, RECORD_FIELDS),
            ("roles", self.roles, ROLES),
            ("columns", self.columns, COLUMN_KEYS),
            ("sheets", self.sheets, SHEET_KEYS),
        ):
            missing, unknown = set(known) - set(have), set(have) - set(known)
            if missing or unknown:
                parts = ([f"missing {', '.join(sorted(missing))}"] if missing else []) + (
                    [f"unknown {', '.join(sorted(unknown))}"] if unknown else []
                )
                raise ValueError(f"{what}: {'; '.join(parts)} (expected {', '.join(known)})")
        for names in (self.records, self.roles, self.columns):
            _nonempty_names(names)
        if set(self.conditions) != set(ARMS):
            raise ValueError(f"conditions must name exactly the arms {', '.join(ARMS)}")
        for arm, codes in self.conditions.items():
            labels = {norm_token(v): v for v in CONDITION_CODES[arm].values()}
            seen: dict[str, str] = {}
            for code, label in codes.items():
                if norm_token(label) not in labels:
                    raise ValueError(
                        f"conditions.{arm}.{code}: unknown condition {label!r} (expected one of "
                        f"{', '.join(CONDITION_CODES[arm].values())})"
                    )
                canon = labels[norm_token(label)]
                if canon in seen:
                    raise ValueError(f"conditions.{arm}: codes {seen[canon]!r} and {code!r} both mean {canon!r}")
                seen[canon] = code
            if len(seen) != len(labels):
                raise ValueError(f"conditions.{arm}: every condition needs a code (missing {', '.join(sorted(set(labels.values()) - set(seen)))})")
        return self

    # ------------------------------------------------------------------ lookups used by the loader

    def sheet_columns(self, sheet: str) -> dict[str, list[str]]:
        return {**self.columns, **self.sheets[sheet].columns}

    def sheet_item_pattern(self, sheet: str) -> re.Pattern:
        return re.compile(self.sheets[sheet].item_pattern or self.item_pattern)

    def condition(self, arm: str, code: object) -> str:
        """The condition a raw code (int, integral float, numeric text or label) stands for.

        Raises ValueError (the caller adds file/sheet/row) for anything not in the arm's map.
        """
        codes = self.conditions[arm]
        labels = {norm_token(v): v for v in CONDITION_CODES[arm].values()}
        if isinstance(code, bool) or code is None:
            raise ValueError(self._unknown(arm, code))
        if isinstance(code, float) and code.is_integer():
            code = int(code)
        text = str(code).strip()
        try:
            as_num = float(text)
            if as_num.is_integer():
                text = str(int(as_num))  # '1.0' -> '1'
        except ValueError:
            pass
        if text in codes:
            return labels[norm_token(codes[text])]
        by_key = {name_key(k): v for k, v in codes.items()}
        if name_key(text) and name_key(text) in by_key:
            return labels[norm_token(by_key[name_key(text)])]
        if norm_token(text) in labels and text:
            return labels[norm_token(text)]
        raise ValueError(self._unknown(arm, code))

    def _unknown(self, arm: str, code: object) -> str:
        return (
            f"unknown {arm}-arm condition code {code!r} (expected one of "
            + ", ".join(f"{k} ({v})" for k, v in self.conditions[arm].items())
            + ")"
        )

    def role(self, raw: object) -> str | None:
        key = name_key(raw)
        for role, names in self.roles.items():
            if key in {name_key(n) for n in names}:
                return role
        return None


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict) and k != "conditions":
            out[k] = _merge(out[k], v)
        elif k == "conditions" and isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = {**out[k], **v}  # an arm's code map is replaced whole
        else:
            out[k] = v
    return out


def _read_yaml(path: Path) -> dict:
    try:
        raw = load_yaml(Path(path).read_text(encoding="utf-8"), str(path))
    except OSError as exc:
        raise LayoutError(f"{path}: cannot read the layout file ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        raise LayoutError(f"{Path(path).name}: not valid YAML: {exc}") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise LayoutError(f"{Path(path).name}: a layout file is a YAML mapping, got {type(raw).__name__}")
    return raw


def _validate(raw: dict, label: str) -> KnowChatLayout:
    try:
        return KnowChatLayout.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'layout'}: {e['msg']}" for e in exc.errors()[:6])
        raise LayoutError(f"{label}: {problems}") from None


@lru_cache(maxsize=1)
def default_layout() -> KnowChatLayout:
    """The card's layout (knowchat_layout.yaml shipped with the package)."""
    return _validate(_read_yaml(DEFAULT_LAYOUT_FILE), DEFAULT_LAYOUT_FILE.name)


def load_layout(path: Path | None) -> KnowChatLayout:
    """The default layout, or ``path`` (YAML) merged over it; LayoutError names file and key."""
    if path is None:
        return default_layout()
    over = _read_yaml(Path(path))
    base = _read_yaml(DEFAULT_LAYOUT_FILE)
    over.setdefault("name", Path(path).name)
    return _validate(_merge(base, over), Path(path).name)
