"""Reading model replies, one module per role: find the JSON (:mod:`.json_extract`), the learner
simulator's turn (:mod:`.user_turn`), the extractor's signals (:mod:`.signals`), the judges
(:mod:`.judges`) and extracted graphs (:mod:`.graphs`).

Every ``parse_*`` function returns a :class:`~.result.ParseResult`: a value, or a named failure
reason with a precise message that is sent back to the model once
(:func:`ray_knowsim.prompts.repair.build_retry`). What was normalised to read a reply is listed in
``repairs`` and anything odd that was accepted in ``warnings``, so a run records them.
"""

from ray_knowsim.llm.parse.graphs import parse_graph_extraction
from ray_knowsim.llm.parse.json_extract import LATEX_SHADOWED, JsonExtraction, extract_json, repair_backslashes
from ray_knowsim.llm.parse.judges import parse_rating, parse_termination
from ray_knowsim.llm.parse.result import ParseResult
from ray_knowsim.llm.parse.signals import INVALID_SIGNALS, SignalAnalysis, parse_signal_report
from ray_knowsim.llm.parse.user_turn import parse_user_turn

__all__ = [
    "INVALID_SIGNALS",
    "JsonExtraction",
    "LATEX_SHADOWED",
    "ParseResult",
    "SignalAnalysis",
    "extract_json",
    "parse_graph_extraction",
    "parse_rating",
    "parse_signal_report",
    "parse_termination",
    "parse_user_turn",
    "repair_backslashes",
]
