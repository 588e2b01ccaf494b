#!/usr/bin/env python3
"""Writes the generated parts of docs/reference/ from what the code defines, so the reference
cannot drift from the build (ctest docs_reference_matches_build runs it with --check):

    reference.py --build BUILD --source SRC [--check]

- docs/reference/cli.md: every option of cprecord, cpreplay and cpworker, from each tool's
  --help in BUILD/tools (run as `TOOL --help` with a fixed environment, so neither the build's
  path nor the terminal shapes the text; CLI11 does not wrap by width).
- docs/reference/schema.md: the store's tables, columns, views and indexes, from
  SRC/schema/schema.sql (the text compiled into cprr, schema/CMakeLists.txt) and kSchemaVersion
  (SRC/schema/store.h). Columns, types, keys and defaults are what SQLite makes of the text (an
  in-memory database); the descriptions are its comments.

The hand-written parts are guarded, not written: docs/reference/verdicts.md must name every
verdict of analysis/verdict.h's `enum class Verdict`, and docs/reference/json.md every key the
--json documents put out (cli/report.cpp, commands/record_plan.cpp's --list,
commands/replay_command.cpp, replayer/replay_{all,list}.cpp).

Without --check the generated files are written under SRC. With --check nothing is written:
exits 1 naming each file that differs from what would be generated (or each guard that fails).
"""
import argparse
import os
import re
import sqlite3
import subprocess
import sys
import tempfile

TOOLS = ("cprecord", "cpreplay", "cpworker")
CLI_MD = "docs/reference/cli.md"
SCHEMA_MD = "docs/reference/schema.md"
VERDICTS_MD = "docs/reference/verdicts.md"
JSON_MD = "docs/reference/json.md"
# Where the --json documents are built; (file, function) reads only that function of the file
# (record_plan.cpp also builds the worker's --script and --pytest specs, which are no output).
JSON_SOURCES = (("cli/report.cpp", None), ("commands/record_plan.cpp", "void print_plan("),
                ("commands/replay_command.cpp", None), ("replayer/replay_all.cpp", None),
                ("replayer/replay_list.cpp", None))
# CLI11 puts an option's description at this column (its default column width).
DESC_COLUMN = 30


def cell(text):
    """`text` fit for one cell of a Markdown table."""
    return text.replace("|", "\\|").strip()


def code(text):
    """`text` as inline code in a table cell (a backquote inside is left as it is)."""
    return f"`{text}`" if text else ""


# ---- the command lines ----

def help_text(build, tool):
    """`tool --help` as a user who ran `tool` from PATH sees it: argv[0] is the bare name, the
    environment fixed (no colour, C locale, a fixed width should a later CLI11 read it)."""
    path = os.path.join(build, "tools", tool)
    env = {"PATH": "/usr/bin:/bin", "LANG": "C", "LC_ALL": "C", "COLUMNS": "100",
           "NO_COLOR": "1", "TERM": "dumb"}
    with tempfile.TemporaryDirectory() as cwd:
        p = subprocess.run([tool, "--help"], executable=path, cwd=cwd, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise SystemExit(f"reference.py: {path} --help exited {p.returncode}: {p.stderr.strip()}")
    return p.stdout


def parse_help(text):
    """CLI11's help as (summary, usage, groups, footer): groups a list of (title, entries), each
    entry (names, takes, description)."""
    lines = text.rstrip("\n").split("\n")
    summary, usage, groups, footer = "", "", [], []
    i = 0
    while i < len(lines):
        line = lines[i]
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if not line.strip():
            i += 1
        elif line.startswith("Usage: "):
            usage = line[len("Usage: "):]
            i += 1
        elif not line.startswith(" ") and line.endswith(":") and nxt.startswith("  ") \
                and not nxt.startswith(" " * DESC_COLUMN):
            entries = []
            i += 1
            while i < len(lines) and lines[i].startswith("  "):
                # CLI11 pads "  NAME" to the description's column, or, when it reaches that
                # column, puts the description on the next line: a name with single spaces
                # inside ("--nproc-per-node INT:INT in [1 - 1024]") may pass the column.
                head = lines[i]
                then = lines[i + 1] if i + 1 < len(lines) else ""
                padded = re.match(r"  \S.*?( {2,})\S", head)
                if padded and padded.end(1) == DESC_COLUMN or (
                        len(head) > DESC_COLUMN and head[DESC_COLUMN - 2] != " "
                        and head[DESC_COLUMN - 1] == " " and head[DESC_COLUMN] != " "
                        and not then.startswith(" " * DESC_COLUMN)):
                    name, desc = head[:DESC_COLUMN].strip(), [head[DESC_COLUMN:].strip()]
                else:
                    name, desc = head.strip(), []
                i += 1
                while i < len(lines) and lines[i].startswith(" " * DESC_COLUMN):
                    desc.append(lines[i].strip())
                    i += 1
                names, _, takes = name.partition(" ")
                entries.append((names, takes.strip(), " ".join(desc)))
            groups.append((line[:-1], entries))
        elif not groups and not summary:
            summary = line
            i += 1
        else:
            footer.append(line)
            i += 1
    if not usage or not groups:
        raise SystemExit("reference.py: cannot read this --help (no Usage line or no option "
                         "group): has CLI11's format changed?\n" + text)
    return summary, usage, groups, footer


def cli_md(build):
    out = ["# Command-line reference", "",
           "Generated by `tools/docs/reference.py` from each tool's `--help`; do not edit by "
           "hand (ctest `docs_reference_matches_build` fails when this file and the build "
           "disagree). How the options fit together: [the guide](../GUIDE.md).", ""]
    out += [f"- [{tool}](#{tool})" for tool in TOOLS]
    for tool in TOOLS:
        summary, usage, groups, footer = parse_help(help_text(build, tool))
        out += ["", f"## {tool}", "", summary, "", "```text", usage, "```"]
        for title, entries in groups:
            out += ["", f"### {title}", "", "| option | takes | what it does |",
                    "| --- | --- | --- |"]
            for names, takes, desc in entries:
                shown = ", ".join(code(n) for n in names.split(","))
                out.append(f"| {cell(shown)} | {cell(code(takes))} | {cell(desc)} |")
        if footer:
            out.append("")
            for line in footer:
                out += [line, ""]
            out.pop()
    return "\n".join(out) + "\n"


# ---- the store's schema ----

def schema_version(source):
    with open(os.path.join(source, "schema", "store.h")) as f:
        found = re.search(r"kSchemaVersion\s*=\s*(\d+)\s*;", f.read())
    if not found:
        raise SystemExit("reference.py: no kSchemaVersion in schema/store.h")
    return int(found.group(1))


def comment(line):
    """The text of a `--` comment line, or None for any other line."""
    s = line.strip()
    return s[2:].strip() if s.startswith("--") else None


def statements(sql):
    """(kind, name, comment lines before it, its lines) for each CREATE statement, in order; and
    the file's opening comment as paragraphs."""
    lines = sql.split("\n")
    opening, para, i = [], [], 0
    while i < len(lines) and comment(lines[i]) is not None:
        text = comment(lines[i])
        if text:
            para.append(text)
        elif para:
            opening.append(" ".join(para))
            para = []
        i += 1
    if para:
        opening.append(" ".join(para))
    found, before = [], []
    while i < len(lines):
        line = lines[i]
        m = re.match(r"CREATE (TABLE|VIEW|INDEX) (\w+)", line)
        if m:
            body = [line]
            while comment(body[-1]) is not None or \
                    not body[-1].split("--", 1)[0].rstrip().endswith(";"):
                i += 1
                body.append(lines[i])
            found.append((m.group(1).lower(), m.group(2), before, body))
            before = []
        elif comment(line) is not None:
            if comment(line) and not comment(line).startswith("----"):
                before.append(comment(line))
        else:
            before = []
        i += 1
    return opening, found


def column_comments(body, columns, defaults):
    """Each column's comment in a CREATE TABLE body: the comment lines before it (indented as
    the columns are) and its own trailing comment with the more indented lines that go on
    with it."""
    notes = {c: [] for c in columns}
    pending, last, leading = [], None, set()
    for line in body[1:]:
        stripped = line.strip()
        if stripped.startswith("--"):
            indent = len(line) - len(line.lstrip())
            if last is not None and indent > 2:
                notes[last].append(comment(line))
            else:
                pending.append(comment(line))
            continue
        word = stripped.split(" ", 1)[0] if stripped else ""
        if word in notes:
            last = word
            if pending:
                leading.add(word)
            notes[word] += pending
            pending = []
            if "--" in line:
                notes[word].append(line.split("--", 1)[1].strip())
        else:
            last = None
    # A column with no comment of its own, after one whose comment came before it, shares that
    # comment when the two have one default ("read_spans", "write_spans") or the comment names
    # it ("peer", "epoch").
    out, previous = {}, None
    for c in columns:
        out[c] = " ".join(t for t in notes[c] if t)
        if not out[c] and previous in leading and (
                defaults[c] is not None and defaults[c] == defaults[previous]
                or re.search(rf"\b{c}\b", out[previous])):
            out[c] = f"See `{previous}`."
        previous = c
    return out


def schema_md(source):
    path = os.path.join(source, "schema", "schema.sql")
    with open(path) as f:
        sql = f.read()
    db = sqlite3.connect(":memory:")
    db.executescript(sql)
    opening, found = statements(sql)
    tables = [s for s in found if s[0] == "table"]
    views = [s for s in found if s[0] == "view"]
    indexes = [s for s in found if s[0] == "index"]
    out = ["# Store reference: tables, columns, views", "",
           "Generated by `tools/docs/reference.py` from `schema/schema.sql`, the text compiled "
           "into cprr, and `kSchemaVersion` in `schema/store.h`; do not edit by hand (ctest "
           "`docs_reference_matches_build` fails when this file and the source disagree). How "
           "the store is written and migrated: [ARCHITECTURE.md](../ARCHITECTURE.md#the-store-schema).",
           "", f"Schema version: {schema_version(source)} (`PRAGMA user_version`).", ""]
    # The opening comment's first paragraph is the version history, which the columns' own
    # "(version N)" notes say again; the rest is how a run is written.
    out += [p + "\n" for p in opening[1:]]
    out += ["Tables: " + ", ".join(f"[`{s[1]}`](#{s[1]})" for s in tables) + ". Views: "
            + ", ".join(f"[`{s[1]}`](#{s[1]})" for s in views) + ".", ""]
    for _, name, before, body in tables:
        info = db.execute(f"PRAGMA table_info({name})").fetchall()
        refs = {row[3]: f"{row[2]}({row[4]})"
                for row in db.execute(f"PRAGMA foreign_key_list({name})").fetchall()}
        notes = column_comments(body, [row[1] for row in info], {row[1]: row[4] for row in info})
        without_rowid = "WITHOUT ROWID" in body[-1]
        out += [f"## {name}", "", " ".join(before), ""]
        out += ["| column | type | null | default | key | description |",
                "| --- | --- | --- | --- | --- | --- |"]
        for cid, col, typ, notnull, default, pk in info:
            key = []
            if pk:
                key.append("primary key" if sum(1 for r in info if r[5]) == 1
                           else f"primary key ({pk})")
            if col in refs:
                key.append(f"-> {refs[col]}")
            out.append(f"| `{col}` | {typ} | {'no' if notnull or pk else 'yes'} | "
                       f"{cell(code(default or ''))} | {cell(', '.join(key))} | "
                       f"{cell(notes[col])} |")
        if without_rowid:
            out += ["", "`WITHOUT ROWID`."]
        mine = [s for s in indexes if re.search(rf"\bON {name}\(", s[3][0])]
        for _, index, _, ibody in mine:
            cols = re.search(r"\((.*)\)", " ".join(ibody)).group(1)
            out += ["", f"Index `{index}` on ({cols})."]
        out.append("")
    for _, name, before, body in views:
        cols = [row[1] for row in db.execute(f"PRAGMA table_info({name})").fetchall()]
        out += [f"## {name}", "", " ".join(before), "",
                "Columns: " + ", ".join(f"`{c}`" for c in cols) + ".", "", "```sql"]
        out += [line.rstrip() for line in body] + ["```", ""]
    return "\n".join(out).rstrip("\n") + "\n"


# ---- guards on the hand-written parts ----

def read(source, rel):
    """The text of SRC/rel; '' when it is missing."""
    try:
        with open(os.path.join(source, rel)) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def guards(source):
    """A line per thing the hand-written reference lacks."""
    problems = []
    with open(os.path.join(source, "analysis", "verdict.h")) as f:
        enum = re.search(r"enum class Verdict[^{]*\{([^}]*)\}", f.read())
    verdicts = re.findall(r"(\w+)\s*,?", enum.group(1)) if enum else []
    if not verdicts:
        problems.append("analysis/verdict.h: no enum class Verdict found")
    text = read(source, VERDICTS_MD)
    problems += [f"{VERDICTS_MD} does not name the verdict `{v}` (analysis/verdict.h)"
                 for v in verdicts if f"`{v}`" not in text]
    keys = set()
    for name, function in JSON_SOURCES:
        src = read(source, name)
        if function:
            start = src.find(function)
            src = src[start:src.find("\n}\n", start)] if start >= 0 else ""
        if not src:
            problems.append(f"{name}: not found, or no {function} in it")
        keys |= set(re.findall(r'\{"([a-z0-9_]+)",', src))
        keys |= set(re.findall(r'\w\["([a-z0-9_]+)"\]', src))
    text = read(source, JSON_MD)
    problems += [f"{JSON_MD} does not name the --json key `{k}` (written in one of "
                 f"{', '.join(n for n, _ in JSON_SOURCES)})"
                 for k in sorted(keys) if f"`{k}`" not in text]
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", required=True, help="the build folder (its tools/ holds cprecord)")
    ap.add_argument("--source", required=True, help="the source tree (docs/ is written there)")
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 naming each file that differs")
    a = ap.parse_args()
    build, source = os.path.abspath(a.build), os.path.abspath(a.source)
    generated = {CLI_MD: cli_md(build), SCHEMA_MD: schema_md(source)}
    problems = []
    for rel, text in generated.items():
        path = os.path.join(source, rel)
        if os.path.exists(path) and read(source, rel) == text:
            continue
        if a.check:
            problems.append(f"{rel} differs from what the build generates: run "
                            f"tools/docs/reference.py --build BUILD --source SRC and commit it")
        else:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
            print(f"wrote {rel}")
    problems += guards(source)
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
