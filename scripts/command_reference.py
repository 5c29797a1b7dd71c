"""Build docs/commands.md, the command reference, from the `ray-knowsim` parsers themselves.

The page is made from the same argparse parsers `ray-knowsim --help` prints
(`ray_knowsim.cli.main.build_parser`): every subcommand's usage, its description and each
argument's help. So it cannot drift from the CLI: tests/onboarding/test_command_reference.py
builds it again in memory and fails when the committed page differs.

    python scripts/command_reference.py           # write docs/commands.md
    python scripts/command_reference.py --check   # exit 1 when docs/commands.md is out of date

The usage lines come from argparse's own formatter at a width nothing wraps at; the argument
lists are rendered here, from the parsers' actions, so the page reads the same on every Python
version argparse's help layout differs between.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "commands.md"
REFRESH = "python scripts/command_reference.py"
WIDTH = 100

HEADER = f"""# Command reference

Every `ray-knowsim` subcommand with its usage and the help of each argument. This page is
generated from the CLI's own parsers (`ray_knowsim/cli/`) by `{REFRESH}`, so it
says what `ray-knowsim <command> --help` says. Do not edit it by hand: change the parser's help, then run
that command. A test (`tests/onboarding/test_command_reference.py`) fails when the page and the
parsers differ.

What each command does and writes, one line each: [overview.md](overview.md). What the commands
are for, with worked examples: the [README](../README.md),
[decisions](decisions.md) (`compare`, `--dry-run`), [running](running.md) (checks before spending,
stopping early), [cluster](cluster.md), [sweep](sweep.md), [adaptive](adaptive.md),
[audit](audit.md) (`agreement`, `score --judges simulator_review`) and [training](training.md)
(`env serve`).
"""


def _md(text: str) -> str:
    """Plain text for a Markdown line outside a code block: one line, and no character that
    Markdown would read as markup (``scores/<name>/`` would otherwise vanish as an HTML tag)."""
    text = " ".join(text.split())
    return "".join("\\" + c if c in "\\`*_[]<>#|" else c for c in text)


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(prog=parser.prog, width=10**6)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, prefix="usage: ")
    return formatter.format_help().strip()


def _description(parser: argparse.ArgumentParser) -> str:
    text = (parser.description or "").strip("\n")
    if not text:
        return ""
    if issubclass(parser.formatter_class, argparse.RawDescriptionHelpFormatter):
        return textwrap.dedent(text).strip()
    paragraphs = [" ".join(p.split()) for p in text.split("\n\n")]
    return "\n\n".join(textwrap.fill(p, WIDTH) for p in paragraphs if p)


def _help(action: argparse.Action, prog: str) -> str:
    """The action's help with argparse's ``%(default)s``-style fields filled in, as --help does."""
    text = action.help or ""
    if "%" in text:
        params = {k: v for k, v in vars(action).items() if v is not argparse.SUPPRESS}
        params["prog"] = prog
        if params.get("choices") is not None:
            params["choices"] = ", ".join(str(c) for c in params["choices"])
        text = text % params
    return " ".join(text.split())


def _name(action: argparse.Action) -> str:
    formatter = argparse.HelpFormatter(prog="", width=10**6)
    if not action.option_strings:
        return formatter._format_args(action, action.dest)
    if action.nargs == 0:
        return ", ".join(action.option_strings)
    return ", ".join(action.option_strings) + " " + formatter._format_args(action, action.dest.upper())


def _arguments(parser: argparse.ArgumentParser) -> list[str]:
    lines = []
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        name = _name(action)
        text = _help(action, parser.prog)
        if not text:
            lines.append(f"  {name}")
            continue
        wrapped = textwrap.wrap(text, WIDTH - 6)
        lines.append(f"  {name}")
        lines += [f"      {w}" for w in wrapped]
    return lines


def _section(parser: argparse.ArgumentParser, summary: str, level: int) -> list[str]:
    out = [f"{'#' * level} `{parser.prog}`", ""]
    if summary:
        out += [_md(summary[:1].upper() + summary[1:] + ("" if summary.endswith(".") else ".")), ""]
    block = [_usage(parser)]
    description = _description(parser)
    if description:
        block += ["", description]
    arguments = _arguments(parser)
    if arguments:
        block += ["", "arguments:", *arguments]
    sub = _subparsers(parser)
    if sub is not None:
        block += ["", "commands:"]
        helps = {a.dest: a.help for a in sub._choices_actions}
        block += [f"  {name}    {' '.join((helps.get(name) or '').split())}".rstrip() for name in sub.choices]
    out += ["```text", *block, "```", ""]
    if sub is not None:
        helps = {a.dest: a.help or "" for a in sub._choices_actions}
        for name, child in sub.choices.items():
            out += _section(child, helps.get(name, ""), level + 1)
    return out


def render() -> str:
    """The whole page, from the parsers as they are now."""
    from ray_knowsim.cli.main import build_parser

    parser = build_parser()
    lines = [HEADER]
    sub = _subparsers(parser)
    helps = {a.dest: a.help or "" for a in sub._choices_actions}
    lines += ["## Commands", ""]
    lines += [f"* [`{name}`](#{_anchor(sub.choices[name].prog)}): {_md(helps.get(name, ''))}" for name in sub.choices]
    lines.append("")
    lines += ["## `ray-knowsim`", "", "```text", _usage(parser), "", _description(parser), "", "arguments:", *_arguments(parser), "```", ""]
    for name, child in sub.choices.items():
        lines += _section(child, helps.get(name, ""), 2)
    return "\n".join(lines).rstrip("\n") + "\n"


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading `` `ray-knowsim env serve` ``: lower case, spaces to hyphens,
    punctuation other than hyphens dropped."""
    text = heading.lower().replace(" ", "-")
    return "".join(c for c in text if c.isalnum() or c in "-_")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write docs/commands.md from the ray-knowsim parsers.")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when docs/commands.md is out of date")
    args = parser.parse_args(argv)
    page = render()
    if args.check:
        current = PAGE.read_text(encoding="utf-8") if PAGE.is_file() else ""
        if current != page:
            print(f"docs/commands.md is out of date: run `{REFRESH}`", file=sys.stderr)
            return 1
        print("docs/commands.md is up to date")
        return 0
    PAGE.write_text(page, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
