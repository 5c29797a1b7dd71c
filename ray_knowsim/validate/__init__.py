"""Human validation (KnowChat format): does the simulator rank conditions the way people do?

conditions         arms, condition codes, levels (LevelCuts), metric directions, math KG
layout             the data layout as one pydantic object; knowchat_layout.yaml is the card's (default)
xlsx               sheet reading with file/sheet/row/column errors, names matched through the layout
knowchat           KnowChat files (layout in words there) -> HumanDataset, with a PairReport per (arm, task)
knowchat_models    its records and results (HumanSession, PairReport, HumanDataset ...), canon_session
knowchat_files     which .jsonl/.xlsx file is which (arm, task): discover, discover_files
knowchat_jsonl     conversation records from the JSONL file
knowchat_workbook  the workbook's sheets: participants, session rows, scores, prescreening, ratings, questions
inspection         `validate --inspect`: what was read, per (arm, task)
simdata            streaming reads of RUN_DIR/sessions and RUN_DIR/turns
mapping            sim sessions -> human (arm, condition): convention or --sim-map
stats              Cliff's delta, one-sided binomial, Spearman, z-scores, Jaccard (pure)
agreement          the paper's procedure: cells, pairs, Table 3, Spearman
coverage           IU taggers and concept-coverage Jaccard
tables             Parquet/CSV/JSON outputs and the printed table
pipeline           glue used by `ray-knowsim validate`
"""
