"""`ray-knowsim view`: a local web app over run folders (runs, sweeps, comparisons).

data (the one module that reads files; containment) -> discover (what lies where; run status)
-> query (server-side filter/sort/page of session rows) -> html / pages_runs / pages_outputs
(escaped HTML; a conversation is drawn by report.conversation_html, a run's results tables by
report.html_page through view.results) -> routes (URL -> page)
-> server (aiohttp, security headers, loopback only by default).
"""
