"""Benchmark items (spec §1.1): MATH and ExpertQA rows, normalised into one Item."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

TaskName = Literal["math", "expertqa"]
#: task name -> key of the init-state cache (spec §1.3)
INIT_CACHE_TASK_KEYS: dict[str, str] = {"math": "competition_math", "expertqa": "expertqa"}


class MathRow(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str = Field(min_length=1)
    problem: str = Field(min_length=1)
    solution: str = ""
    split: list[str] = Field(default_factory=list)
    source_index: int | None = None
    level: str | None = None
    type: str | None = None


class ExpertQAAnswer(BaseModel):
    model_config = ConfigDict(extra="allow")
    answer_string: str | None = None
    revised_answer_string: str | None = None


class ExpertQARow(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str = Field(min_length=1)
    question: str = Field(min_length=1)
    split: list[str] = Field(default_factory=list)
    source_index: int | None = None
    annotator_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    answers: dict[str, ExpertQAAnswer] = Field(default_factory=dict)

    def reference_answer(self) -> tuple[str, str | None, str | None]:
        """(answer, variant, source): first variant (dict order) with a non-empty revised answer,
        else the first variant's answer_string (spec §1.1)."""
        for variant, ans in self.answers.items():
            if ans.revised_answer_string:
                return ans.revised_answer_string, variant, "revised_answer_string"
        for variant, ans in self.answers.items():
            return ans.answer_string or "", variant, "answer_string"
        return "", None, None


class Item(BaseModel):
    """A question the simulated learner works on, whatever dataset it came from."""

    model_config = ConfigDict(extra="forbid")
    id: str
    task: TaskName
    question: str
    reference_answer: str = ""
    splits: list[str] = Field(default_factory=list)
    source_index: int | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


def item_key(task: str, item_id: str) -> str:
    """The one key of an item (and its graph) across tasks: ``"<task>/<item_id>"`` (item ids are
    unique within a task only)."""
    return f"{task}/{item_id}"


def item_from_row(task: TaskName, row: dict[str, Any]) -> Item:
    if task == "math":
        m = MathRow.model_validate(row)
        return Item(
            id=m.id,
            task="math",
            question=m.problem,
            reference_answer=m.solution,
            splits=m.split,
            source_index=m.source_index,
            metadata={k: v for k, v in (("level", m.level), ("type", m.type)) if v is not None},
        )
    e = ExpertQARow.model_validate(row)
    answer, variant, source = e.reference_answer()
    meta = dict(e.metadata)
    meta.update({"answer_variant": variant, "answer_source": source, "annotator_id": e.annotator_id})
    return Item(
        id=e.id,
        task="expertqa",
        question=e.question,
        reference_answer=answer,
        splits=e.split,
        source_index=e.source_index,
        metadata=meta,
    )
