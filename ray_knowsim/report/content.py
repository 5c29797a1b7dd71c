"""What one report shows, gathered in one object the HTML and Markdown renderers both read."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from typing import Any

from ray_knowsim.io.rundir import Completeness, status_text
from ray_knowsim.tables.sanity import SanityReport
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
    # What went wrong (report/outcomes.py renders them): n of N planned sessions and why not all;
    # failed sessions per (task, condition, error kind) and truncated answers per (task, condition)
    # and role (ray_knowsim.tables.outcomes); the simulator's sanity checks (ray_knowsim.tables.sanity)
    completeness: Completeness | None = None
    status: tuple[str, str] | None = None  # the run's status word and why (io.rundir.status_words: the viewer's word)
    failure_kinds: Any = None  # pandas DataFrame
    truncations: Any = None  # pandas DataFrame
    truncation_totals: dict[str, int] = field(default_factory=dict)  # role -> truncated answers, whole run
    sanity: SanityReport | None = None
    verdicts: Any = None  # report.verdicts.RunVerdicts: the run's own (adaptive) or compare's (fixed) verdicts

    @property
    def variant_text(self) -> str:
        return "at the virtual early stop (*_es columns)" if self.variant == "es" else "final (end of conversation)"

    def truncation_text(self) -> str:
        """Truncated answers per role ("assistant 10, user_sim 0, extractor 0"), or the run's total
        where its rows predate the per-role counts."""
        if not self.truncation_totals:
            return f"{self.summary.drift['llm_truncations']:,}"
        return ", ".join(f"{role} {n:,}" for role, n in self.truncation_totals.items())

    def facts(self) -> list[tuple[str, str]]:
        s = self.summary
        ok, failed = s.n_status("ok"), s.rows - s.n_status("ok")

        def values(col: str) -> str:
            got = sorted(str(v) for v in s.facts.get(col, {}) if v is not None)
            return ", ".join(got[:6]) + (f" (+{len(got) - 6})" if len(got) > 6 else "") if got else "–"

        early = sum(s.early_stops.values())
        status = [("status", status_text(self.status))] if self.status else []
        return status + [
            ("conversations", f"{ok:,} ok" + (f", {failed:,} not ok (excluded)" if failed else "")),
            ("conditions", str(len(s.conditions))),
            ("levels", ", ".join(s.levels)),
            ("tasks", values("task")),
            ("simulator", values("simulator")),
            ("rules", values("rules_preset")),
            ("run", values("run_id")),
            ("metrics", self.variant_text),
            ("virtual early stops", f"{early:,} of {ok:,}" if ok else "–"),
            ("extractor drift", f"{s.drift['extractor_repairs']:,} repaired, {s.drift['extractor_refusals']:,} refused"),
            ("truncated answers", self.truncation_text()),
            ("judge drift", f"{s.drift['judge_repairs']:,} repaired, {s.drift['judge_refusals']:,} refused, "
                            f"{s.drift['judge_warnings']:,} warned"),
        ]
