"""What the report's tables must show, computed independently (pandas on the same Parquet), and a
reader of the table cells in the page's HTML text."""

from __future__ import annotations

DECIMALS = {"kg": 3, "co": 3, "dc": 3, "iq": 2}


def expected_tables(run_dir, variant: str = "final") -> dict:
    """{"per_level": {(cond, level, key): float}, "marginal": {(cond, key): float}, "rank": {(cond, key): int}}"""
    import pandas as pd

    sfx = "_es" if variant == "es" else ""
    cols = {"kg": f"kg{sfx}", "co": f"co{sfx}", "dc": f"dc{sfx}", "iq": "iq"}
    df = pd.read_parquet(run_dir / "sessions", columns=["condition", "knowledge_level", "status", *cols.values()])
    df = df[df["status"] == "ok"]
    cell = df.groupby(["condition", "knowledge_level"])[list(cols.values())].mean()
    marginal = cell.groupby(level="condition").mean()  # unweighted over levels, NaN skipped
    out = {"per_level": {}, "marginal": {}, "rank": {}}
    for (cond, level), row in cell.iterrows():
        for key, col in cols.items():
            out["per_level"][(cond, level, key)] = row[col]
    for key, col in cols.items():
        ranks = marginal[col].rank(method="min", ascending=(key == "co"))
        for cond in marginal.index:
            out["marginal"][(cond, key)] = marginal.loc[cond, col]
            out["rank"][(cond, key)] = None if pd.isna(ranks[cond]) else int(ranks[cond])
    return out


def formatted(value, key: str) -> str:
    return "–" if value is None or value != value else f"{value:.{DECIMALS[key]}f}"


def page_cells(html_text: str) -> dict:
    """Cells of the two result tables, read from the HTML text: {(table, key, cond, level): text}."""
    from html.parser import HTMLParser

    class P(HTMLParser):
        def __init__(self):
            super().__init__()
            self.table = None
            self.cell = None
            self.grab = False
            self.out = {}

        def handle_starttag(self, tag, attrs):
            a = dict(attrs)
            if tag == "table":
                self.table = a.get("id")
            elif tag == "td" and "data-metric" in a:
                self.cell = (self.table, a["data-metric"], a["data-condition"], a.get("data-level"))
            elif tag == "td" and "data-rank" in a:  # the paper's mean rank table: ranks of the means
                self.cell = (self.table, "rank:" + a["data-rank"], a["data-condition"], a.get("data-level"))
                self.grab = True
                self.out[self.cell] = ""
            elif tag == "span" and self.cell and "mean" in (a.get("class") or "").split():
                self.grab = True
                self.out[self.cell] = ""

        def handle_endtag(self, tag):
            if tag == "span" and self.grab and not self.cell[1].startswith("rank:"):
                self.grab = False
            if tag == "td":
                self.cell, self.grab = None, False

        def handle_data(self, data):
            if self.grab and self.cell:
                self.out[self.cell] += data

    p = P()
    p.feed(html_text)
    return p.out
