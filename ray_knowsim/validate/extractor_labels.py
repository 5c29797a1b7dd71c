"""Ask the run's extractor about the tutor replies people labelled per IU, and compare the labels.

``ray-knowsim validate --extractor-agreement`` (and tests) call :func:`label_replies` with the
human data (its ``iu labels`` sheet, :mod:`.knowchat_labels`), the run config's items and IU
graphs, and an extractor model entry. Each labelled reply is one extractor request, rendered by
the simulation's own renderer (``prompts.render.render_extractor``): the item, its IU graph, the
conversation before the reply, the learner's message and the reply. A person's knowledge state
is not known: the extractor is shown the state the run would start a learner of the person's
level from (the init cache's, else the rules' sampler with trial 0's seed), the same for every
reply. Its teaching-quality label is asked to rest on the reply alone (spec §12.5).

Resumable and costed like a judge: every answered reply is a row of ``extractor_replies.parquet``
in the output folder (labels, tokens, cost, calls, prompt version, the model's identity),
written a chunk of replies at a time; a rerun with the same model asks only the replies with no
row or an error row. An unreadable answer (broken JSON past its attempts) is a row with the
named error; its reply is left out of the agreement and counted, never dropped silently.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from ray_knowsim.llm.protocol import ChatModel
from ray_knowsim.prompts.templates import DEFAULT_PROMPTS
from ray_knowsim.schema.graph import IUGraph
from ray_knowsim.schema.items import Item, item_key
from ray_knowsim.schema.price import Price
from ray_knowsim.score.relabel import ANSWER_COLUMNS, Exchange, model_identity, relabel
from ray_knowsim.sim.types import RoleSettings, request_id, request_seed
from ray_knowsim.stats.agreement import label_agreement
from ray_knowsim.validate.knowchat_labels import LABELS
from ray_knowsim.validate.knowchat_models import HumanDataset, HumanIULabel
from ray_knowsim.validate.xlsx import KnowChatFormatError

__all__ = ["REPLIES_FILE", "ExtractorAgreement", "agreement_tables", "label_replies", "model_identity", "reply_key"]

REPLIES_FILE = "extractor_replies.parquet"
KEY = ("arm", "task", "prolific_id", "session", "turn", "item_id")
REPLY_COLUMNS = (*KEY, *ANSWER_COLUMNS)


def reply_key(label: HumanIULabel) -> tuple:
    return (label.arm, label.task, label.prolific_id, str(label.session), label.turn, label.item_id)


@dataclass
class ExtractorAgreement:
    replies: pd.DataFrame  # one row per labelled reply: the extractor's labels, cost, error
    labels: pd.DataFrame  # one row per human label, with the extractor's label beside it
    agreement: pd.DataFrame  # per task and item (and "all"): kappa, TPR/TNR per label
    asked: int = 0  # replies sent to the model by this call (the rest were resumed)
    notes: list[str] = field(default_factory=list)


def _session_as_text(df: pd.DataFrame) -> pd.DataFrame:
    df["session"] = df["session"].astype(str)
    return df


def label_replies(
    human: HumanDataset,
    *,
    items: Mapping[str, Item],
    graphs: Mapping[str, IUGraph],
    initial_state: Callable[[Item, IUGraph, str], Any],
    levels: Mapping[tuple[str, str, str, str], str],
    model: ChatModel,
    model_key: str,
    model_identity: str,
    settings: RoleSettings,
    out_dir: Path,
    price: Price | None = None,
    prompts: str = DEFAULT_PROMPTS,
) -> ExtractorAgreement:
    """The extractor's labels of every reply in ``human.iu_labels`` (resumed from ``out_dir``) and
    their agreement with the people's. ``items`` / ``graphs`` by item key; ``levels``: (arm, task,
    prolific id, session) -> the person's level; ``initial_state(item, graph, level)``: the state
    the extractor is shown. Raises KnowChatFormatError for a label naming an item the run lacks
    or an IU its graph lacks (naming the row)."""
    if not human.iu_labels:
        raise KnowChatFormatError("the human data has no per-IU labels (an 'iu labels' sheet in a workbook; see knowchat_layout.yaml)")
    for lab in human.iu_labels:
        key = item_key(lab.task, lab.item_id)
        if key not in items or key not in graphs:
            raise KnowChatFormatError(f"{lab.where}: item {lab.item_id!r} ({lab.task}) is not among the run's items")
        if lab.iu not in {n.id for n in graphs[key].nodes}:
            raise KnowChatFormatError(f"{lab.where}: IU {lab.iu!r} is not in the graph of {lab.item_id} "
                                      f"({', '.join(n.id for n in graphs[key].nodes)})")
    convs = {(c.arm, c.task, c.prolific_id, str(c.session)): c for c in human.conversations}
    wanted = sorted({reply_key(lab) for lab in human.iu_labels}, key=lambda k: tuple(map(str, k)))
    exchanges = []
    for arm, task, pid, session, turn, item_id in wanted:
        item, graph = items[item_key(task, item_id)], graphs[item_key(task, item_id)]
        prior, user, reply = convs[(arm, task, pid, session)].exchange(turn)
        sid = f"human/{arm}/{task}/{pid}/{session}/{item_id}"
        seed = int(hashlib.sha256(sid.encode()).hexdigest()[:7], 16)
        exchanges.append(Exchange(key=(arm, task, pid, session, turn, item_id), item=item, graph=graph,
                                  states=initial_state(item, graph, levels[(arm, task, pid, session)]), prior=prior,
                                  user=user, reply=reply, seed=request_seed(seed, "extractor", turn),
                                  request_id=request_id(sid, "extractor", turn)))  # fmt: skip
    done = relabel(exchanges, key_columns=KEY, path=Path(out_dir) / REPLIES_FILE, model=model, model_key=model_key,
                   model_identity=model_identity, settings=settings, price=price, prompts=prompts, normalise=_session_as_text)
    labels, agreement, notes = agreement_tables(human.iu_labels, done.answers)
    return ExtractorAgreement(done.answers, labels, agreement, asked=done.asked, notes=notes)


def agreement_tables(human: Sequence[HumanIULabel], replies: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """(one row per human label with the extractor's label, the agreement per task and item, notes).

    Labels of replies the extractor could not answer are left out of the agreement (the notes
    count them). Agreement rows: per task, per item and ``all`` items: n, raw agreement, Cohen's
    kappa over the three labels, and for each label TPR/TNR with the people as the reference
    (:func:`ray_knowsim.stats.agreement.label_agreement`, the one implementation)."""
    by_reply = {tuple(r[: len(KEY)]): (r[len(KEY)], None if pd.isna(r[len(KEY) + 1]) else r[len(KEY) + 1])
                for r in replies[[*KEY, "labels_json", "error"]].itertuples(index=False, name=None)}
    rows = []
    for lab in human:
        got = by_reply.get(reply_key(lab))
        extracted = None if got is None or got[1] is not None else json.loads(got[0]).get(lab.iu)
        rows.append(lab.model_dump(exclude={"where"}) | {"session": str(lab.session), "extractor_label": extracted,
                                                          "extractor_error": None if got is None else got[1], "where": lab.where})
    labels = pd.DataFrame(rows, columns=[*HumanIULabel.model_fields, "extractor_label", "extractor_error"])
    notes = []
    failed = labels["extractor_label"].isna()
    if failed.any():
        notes.append(f"extractor agreement: {int(failed.sum())} of {len(labels)} human labels left out "
                     f"({labels.loc[failed, ['prolific_id', 'session', 'turn']].drop_duplicates().shape[0]} replies the extractor "
                     "did not answer readably; see extractor_replies.error)")
    ok = labels[~failed]
    out = []
    for task, group in ok.groupby("task", sort=True):
        scopes = [("all", group), *((item, g) for item, g in group.groupby("item_id", sort=True))]
        for item, g in scopes:
            out.append({"task": task, "item_id": item, "n_replies": g[["arm", "prolific_id", "session", "turn"]].drop_duplicates().shape[0],
                        **label_agreement(list(g["extractor_label"]), list(g["label"]), LABELS)})
    columns = ["task", "item_id", "n_replies", "n", "agreement", "kappa",
               *(f"{k}_{c}" for c in LABELS for k in ("n_ref", "n", "tpr", "tnr"))]
    table = pd.DataFrame(out, columns=columns)
    if not ok.empty and table["kappa"].map(lambda v: isinstance(v, float) and math.isnan(v)).any():
        notes.append("extractor agreement: kappa is undefined (NaN) where the people and the extractor each gave one label to every IU")
    return labels, table, notes
