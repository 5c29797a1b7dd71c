"""Power of the item win-rate sign test against a paired t-test on mean differences (docs/decisions.md):
statistics only, no model calls. Usage: .venv/bin/python scripts/decisions_power.py"""
import numpy as np
from scipy import stats as st
rng = np.random.default_rng(0)
def run(n, gen, reps=4000, alpha=0.05):
    sa = sb = ta = tb = 0
    for _ in range(reps):
        d = gen(n)
        pos, neg = int((d > 0).sum()), int((d < 0).sum())
        p = st.binomtest(pos, pos + neg).pvalue if pos + neg else 1
        if p < alpha: sa += pos > neg; sb += neg > pos
        t = st.ttest_1samp(d, 0)
        if t.pvalue < alpha: ta += t.statistic > 0; tb += t.statistic < 0
    return sa / reps, sb / reps, ta / reps, tb / reps
mix = lambda n: np.where(rng.random(n) < 0.65, 1.0, -3.0)
for n in (30, 100):
    print("mixture +1@65%/-3@35%", n, "sign A,B", run(n, mix)[:2], "t A,B", run(n, mix)[2:])
# KG-like discrete skewed: per-item mean over 2 trials of Poisson counts, shift of +0.5 on a's rate
def kg(n, shift=0.6):
    lam = rng.gamma(2.0, 1.0, n)
    a = rng.poisson(lam + shift, (2, n)).mean(0); b = rng.poisson(lam, (2, n)).mean(0)
    return a - b
for n in (10, 20, 40):
    r = run(n, kg, 2000)
    print("kg-like shift", n, "sign power", r[0], "t power", r[2])
