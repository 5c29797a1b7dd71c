"""A tutor strategy registered from outside the package, as docs/extending.md describes.

Importing this module registers ``checklist``: its own template (not in the package manifest)
and an offline reply, so an offline run can use it.
"""

from __future__ import annotations

import random

from ray_knowsim.prompts.templates import Template, parse_sections
from ray_knowsim.strategies import strategy

TEMPLATE = Template(
    name="assistant_checklist",
    version="v1",
    sections=parse_sections(
        """@@ system
{{task_intro}}

You teach with short checklists: in each reply, list at most three things the student should check next.
@@ task_math
You are a mathematics tutor.
@@ task_expertqa
You are a tutor with expert knowledge.
""",
        "assistant_checklist.v1",
    ),
)


def teach_checklist(lesson, rng: random.Random) -> str:
    """Offline behaviour: the first three IUs not yet taught, as a checklist of concept names."""
    todo = [v for v in lesson.vocab.topo if not lesson.covered[v]][:3] or lesson.vocab.topo[-1:]
    return "Check these next:\n" + "\n".join(f"- {lesson.vocab.ius[v].concept}: {lesson.vocab.ius[v].description}" for v in todo)


@strategy(replace=True)
class CHECKLIST:
    """Short checklists: at most three things to check next."""

    name = "checklist"
    template = TEMPLATE
    offline_reply = teach_checklist
