"""The index of everything under the viewer's folders, and the pages of sweeps and comparisons.

The index is the one page that links every run, sweep and leaderboard found; each sweep and
comparison links back to the runs it read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from ray_knowsim.view.discover import Entry, RunInfo
from ray_knowsim.view.html import e, fmt_value, href, page, status_badge, table


def entry_url(entry: Entry) -> str:
    return href(f"/{entry.kind}/{entry.id}")


def file_url(entry: Entry, rel: str) -> str:
    return href(f"/file/{entry.id}/{rel}")


def index(roots: Sequence[str], runs: Sequence[RunInfo], broken: Sequence[tuple[Entry, str]], sweeps: Sequence[tuple[Entry, dict]],
          compares: Sequence[tuple[Entry, dict]]) -> str:
    rows = []
    for info in runs:
        time = "–" if info.seconds is None else f"{info.seconds / 60:,.1f} min"
        rows.append([
            f'<a class="run-link" href="{e(entry_url(info.entry))}">{e(info.entry.label)}</a><br><span class="note">{e(info.name)}</span>',
            status_badge(info.status, info.status_detail, info.sanity_flag), e(info.progress), e(f"{info.ok:,}"), e(f"{info.failed:,}"),
            e(", ".join(info.models) or "–"), e(info.cost_text), e(time), e(info.created_at or "–"),
        ])  # fmt: skip
    for entry, why in broken:
        rows.append([e(entry.label), status_badge("unknown", why), e(why), "", "", "", "", "", ""])
    body = [f'<section id="runs"><h2>Runs ({len(runs):,})</h2>']
    if rows:
        body.append(table(["run", "status", "sessions (n of N planned)", "ok", "failed", "models", "cost", "time", "created"], rows,
                          "run-table", [False, False, True, True, True, False, True, True, False]))
    else:
        body.append('<p class="lead">No run directory found (a folder holding manifest.json or sessions/).</p>')
    body.append("</section>")
    if sweeps:
        srows = [[f'<a href="{e(entry_url(en))}">{e(en.label)}</a>', e(m.get("name")), e(m.get("status")), e(fmt_value(m.get("n_settings"))),
                  e(fmt_value(m.get("n_conversations"))), e(m.get("source"))] for en, m in sweeps]
        body.append(f'<section id="sweeps"><h2>Sweeps ({len(sweeps)})</h2>'
                    + table(["sweep", "name", "status", "settings", "conversations", "source"], srows, "sweep-table", [False, False, False, True, True, False]) + "</section>")
    if compares:
        crows = [[f'<a href="{e(entry_url(en))}">{e(en.label)}</a>', e(", ".join(str(r.get("label")) for r in m.get("runs") or []))] for en, m in compares]
        body.append(f'<section id="compares"><h2>Comparisons ({len(compares)})</h2>' + table(["comparison", "runs"], crows, "compare-table") + "</section>")
    sub = "folders: " + ", ".join(roots)
    return page("ray-knowsim view", "".join(body), [("all outputs", None)], sub)


def _links(related: Sequence[tuple[str, str]]) -> str:
    if not related:
        return ""
    return '<p>Runs read: ' + ", ".join(f'<a href="{e(u)}">{e(t)}</a>' for t, u in related) + "</p>"


def sweep(entry: Entry, manifest: dict[str, Any], related: Sequence[tuple[str, str]], images: Sequence[str],
          tables: Sequence[tuple[str, str]], files: Sequence[str]) -> str:
    """A sweep's folder: its manifest, plots (``report/*.png``) and tables (``report/*.csv``)."""
    keys = ("name", "status", "source", "n_settings", "n_conversations", "conversations_per_block", "blocks", "backend",
            "seconds", "identity")
    shown = {k: manifest[k] for k in keys if k in manifest}
    runs = manifest.get("runs") or []
    if runs:  # the last invocation's layout: pieces are cut for the cluster each run met
        shown.update({f"last run: {k}": runs[-1][k] for k in ("cpus", "settings_per_piece", "pieces") if k in runs[-1]})
    facts = "".join(f"<span><b>{e(k)}</b>{e(fmt_value(v))}</span>" for k, v in shown.items())
    body = [f'<section id="sweep-summary"><h2>Sweep {e(manifest.get("name") or entry.label)}</h2><div class="facts">{facts}</div>{_links(related)}</section>']
    if images:
        figs = "".join(f'<figure><img alt="{e(rel)}" src="{e(file_url(entry, rel))}"><figcaption>{e(rel)}</figcaption></figure>' for rel in images)
        body.append(f'<section id="sweep-plots"><h2>Plots</h2>{figs}</section>')
    if tables:
        parts = "".join(f'<h3>{e(rel)} <a href="{e(file_url(entry, rel))}">(CSV)</a></h3>{html}' for rel, html in tables)
        body.append(f'<section id="sweep-tables"><h2>Tables</h2>{parts}</section>')
    if files:
        body.append('<section id="sweep-files"><h2>Files</h2><ul class="files">'
                    + "".join(f'<li><a href="{e(file_url(entry, rel))}">{e(rel)}</a></li>' for rel in files) + "</ul></section>")
    return page(f"sweep {manifest.get('name') or entry.label}", "".join(body), [("all outputs", "/"), (entry.label, None)], entry.label)


def compare(entry: Entry, info: dict[str, Any], related: Sequence[tuple[str, str]], tables: Sequence[tuple[str, str]], has_html: bool) -> str:
    """A comparison folder: the leaderboard first, then the paired tests, P(best) and MDE tables."""
    runs = "".join(f"<li>{e(r.get('label'))}: {e(r.get('path'))} ({e(', '.join(map(str, r.get('conditions') or [])))})</li>" for r in info.get("runs") or [])
    extra = f'<p><a href="{e(file_url(entry, "leaderboard.html"))}">leaderboard.html</a> (the page compare wrote; shown without scripts)</p>' if has_html else ""
    body = [f'<section id="compare-summary"><h2>Comparison {e(entry.label)}</h2><ul>{runs}</ul>{_links(related)}'
            f'<p class="note">{e(info.get("test") or "")}</p>{extra}</section>']
    for name, html in tables:
        body.append(f'<section id="compare-{e(name)}"><h2>{e(name)} <a href="{e(file_url(entry, name + ".csv"))}">(CSV)</a></h2>{html}</section>')
    return page(f"comparison {entry.label}", "".join(body), [("all outputs", "/"), (entry.label, None)], entry.label)


def sweep_source(manifest: dict[str, Any]) -> Path | None:
    """The run directory a sweep read (its config's source.run_dir against its config folder)."""
    cfg = manifest.get("config") or {}
    raw = (cfg.get("source") or {}).get("run_dir")
    if not raw:
        return None
    p = Path(raw)
    return p if p.is_absolute() else Path(cfg.get("config_dir") or ".") / p


def error_page(status: int, message: str) -> str:
    return page(f"{status}", f'<section><p class="lead" id="error-message">{e(message)}</p><p><a href="/">all outputs</a></p></section>',
                [("all outputs", "/")])


__all__ = ["compare", "entry_url", "error_page", "file_url", "index", "sweep", "sweep_source"]
