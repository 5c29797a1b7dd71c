"""What one report shows, gathered in one object the HTML and Markdown renderers both read."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ray_knowsim.report.aggregate import RunSummary
from ray_knowsim.report.explain import ConversationView
from ray_knowsim.report.metrics import MetricSpec
from ray_knowsim.report.tables import FailureRow, LevelBlock, MarginalRow


@dataclass
class ReportContent:
    title: str
    run_dir: Path
    variant: str  # "final" | "es"
    specs: tuple[MetricSpec, ...]
    summary: RunSummary
    per_level: list[LevelBlock]
    marginal: list[MarginalRow]
    failures: list[FailureRow]
    conversations: list[ConversationView]
    generated: str
    figures: dict[str, str | None] = field(default_factory=dict)  # name -> data URI
    trajectories: list[str | None] = field(default_factory=list)  # per conversation
    sample_note: str = ""    # decision sections (report/decisions.py): who beats whom, cost
    decisions_html: list[str] = field(default_factory=list)
    decisions_md: list[str] = field(default_factory=list)
    task: str | None = None  # the task this content's tables cover (None: the whole run)
    # One content per task: math and ExpertQA are never pooled in a table or chart.
    sections: list["ReportContent"] = field(default_factory=list)
    # Shown on top when the numbers came from the offline model (a wiring check, not a measurement).
    banner: str | None = None

    @property
    def variant_text(self) -> str:
        return "at the virtual early stop (*_es columns)" if self.variant == "es" else "final (end of conversation)"

    def facts(self) -> list[tuple[str, str]]:
        s = self.summary
        ok, failed = s.n_status("ok"), s.rows - s.n_status("ok")

        def values(col: str) -> str:
            got = sorted(str(v) for v in s.facts.get(col, {}) if v is not None)
            return ", ".join(got[:6]) + (f" (+{len(got) - 6})" if len(got) > 6 else "") if got else "–"

        early = sum(s.early_stops.values())
        return [
            ("conversations", f"{ok:,} ok" + (f", {failed:,} not ok (excluded)" if failed else "")),
            ("conditions", str(len(s.conditions))),
            ("levels", ", ".join(s.levels)),
            ("tasks", values("task")),
            ("simulator", values("simulator")),
            ("rules", values("rules_preset")),
            ("run", values("run_id")),
            ("metrics", self.variant_text),
            ("virtual early stops", f"{early:,} of {ok:,}" if ok else "–"),
            ("extractor drift", f"{s.drift['extractor_repairs']:,} repaired, {s.drift['extractor_refusals']:,} refused; "
                                f"{s.drift['llm_truncations']:,} answers truncated"),
            ("judge drift", f"{s.drift['judge_repairs']:,} repaired, {s.drift['judge_refusals']:,} refused, "
                            f"{s.drift['judge_warnings']:,} warned"),
        ]
