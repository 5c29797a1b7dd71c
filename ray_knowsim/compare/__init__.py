"""Decision-grade results: paired condition comparisons, leaderboards across runs, costs."""
