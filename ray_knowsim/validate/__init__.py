"""Human validation (KnowChat format): does the simulator rank conditions the way people do?

conditions  arms, condition codes, levels (LevelCuts), metric directions, math KG
xlsx        strict sheet reading with file/sheet/row/column errors
knowchat    the release layout (documented there) -> HumanDataset
simdata     streaming reads of RUN_DIR/sessions and RUN_DIR/turns
mapping     sim sessions -> human (arm, condition): convention or --sim-map
stats       Cliff's delta, one-sided binomial, Spearman, z-scores, Jaccard (pure)
agreement   the paper's procedure: cells, pairs, Table 3, Spearman
coverage    IU taggers and concept-coverage Jaccard
tables      Parquet/CSV/JSON outputs and the printed table
pipeline    glue used by `ray-knowsim validate`
"""
