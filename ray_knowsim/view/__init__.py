"""`ray-knowsim view`: a local web app over run folders (runs, sweeps, comparisons).

data (the one module that reads files; containment) -> discover (what lies where; run status)
-> query (server-side filter/sort/page of session rows) -> html / pages_runs / pages_outputs
(escaped HTML; a conversation is drawn by report.conversation_html) -> routes (URL -> page)
-> server (aiohttp, security headers, loopback only by default).
"""
