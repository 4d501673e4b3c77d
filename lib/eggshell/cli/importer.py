"""`egg import codex|claude`: start full, with the history an agent already recorded itself.

Codex and Claude Code keep a transcript of every chat. This reads them (the host's parser
in hosts/transcripts_HOST.py rebuilds each turn as the host's hooks would have reported
it) and saves each turn into the store of the project the chat ran in, exactly as live
capture would have: the same caps (graph/events.py), the same redaction (the built-in
rules and the project's `redact` and `never_record`, applied to each event as the hook
applies them), the same turn compiler and commit (graph/save.save_turn), with the session
and turn ids the hooks use and the time the turn ran.

It is idempotent and incremental: a turn the store already holds with its answer (saved
live or imported before) is skipped; a turn held only in part (interrupted, or still
running at the last import) is completed, reusing what the store holds of each call (so a
call captured live, with its freshness fingerprint, is not stored a second time); a turn the
hooks are recording right now (its journal file exists) is left to them. Imported calls
carry no freshness fingerprint, so they are advice only: they never deny a call.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import sys
import time
from dataclasses import dataclass, field

from eggshell.cli.common import PROG, CliError, count, say
from eggshell.paths import Paths

HOSTS = ("codex", "claude")
DESCRIPTION = """\
Import the chats an agent already recorded in its own transcripts: each turn (the request,
every tool call with its output, the final answer; an interrupted turn without one) is
saved into the store of the project the chat ran in (the write store of its
.eggshell.toml, as the hooks would have chosen), or into --egg PATH.

Without FILE or DIR: every Codex rollout file under $CODEX_HOME/sessions (default
~/.codex), or every Claude Code session file under ~/.claude/projects (under
$CLAUDE_CONFIG_DIR/projects when that is set). A DIR is searched for transcripts below it.

Running it again adds only what is new. Imported calls are advice for later chats, never a
reason to deny a call (they carry no record of what their inputs were). docs/import.md
says what is read, what is left out and why."""
EPILOG = """\
examples:
  egg import codex --dry-run             what would be imported, per project
  egg import claude --since 2026-11-01   only turns from that day on
  egg import codex ~/old-rollouts --egg .eggs/work.egg

exit status: 0 done (turns the hooks are recording, turns already stored and lines that are
not JSON are skipped and counted); 1 a named file is not a transcript of this host, or a
turn or a store could not be written (each is named; the rest was imported); 2 a usage
error or a path that does not exist."""


def register(sub) -> None:
    """Add `egg import` to the CLI's subcommands (cli/main.py)."""
    s = sub.add_parser("import", help="import the chats Codex or Claude Code recorded before Eggshell was installed",
                       description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("host", choices=HOSTS, help="whose transcripts to read")
    s.add_argument("paths", nargs="*", metavar="FILE|DIR", help="transcripts, or folders to search (default: the host's own)")
    s.add_argument("--egg", metavar="PATH", help="save every turn into this store instead of each project's")
    s.add_argument("--since", type=since_arg, metavar="DATE", help="only turns from DATE on (YYYY-MM-DD, local time, or an ISO 8601 time)")
    s.add_argument("--project", metavar="DIR", help="only chats that ran in DIR or below it")
    s.add_argument("--dry-run", action="store_true", help="say what would be imported, per project (sessions, turns, store); write nothing")
    s.set_defaults(fn=cmd_import)
    s.__class__ = _Intermixed


class _Intermixed(argparse.ArgumentParser):
    """`egg import codex --since D DIR`: options may come between the host and the paths, which a
    positional list otherwise refuses (argparse takes every positional at the first one)."""

    _inner = False

    def parse_known_args(self, args=None, namespace=None):
        if self._inner:  # parse_known_intermixed_args parses in two passes through this method
            return super().parse_known_args(args, namespace)
        self._inner = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._inner = False


def since_arg(text: str) -> _dt.datetime:
    try:
        d = _dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a date: give YYYY-MM-DD or an ISO 8601 time such as 2026-11-30T14:00" % text) from None
    return (d.astimezone() if d.tzinfo is None else d).astimezone(_dt.timezone.utc)


def parse_time(text: str) -> _dt.datetime | None:
    try:
        d = _dt.datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return None
    return (d.replace(tzinfo=_dt.timezone.utc) if d.tzinfo is None else d).astimezone(_dt.timezone.utc)


def commit_time(text: str) -> str | None:
    """A transcript's time as a commit's (store.now_iso's form), or None (then: now)."""
    d = parse_time(text)
    return d.strftime("%Y-%m-%dT%H:%M:%S.%fZ") if d is not None else None


# -- what the store already holds ------------------------------------------------------


@dataclass
class Held:
    """What a store holds of one turn: whether an answered form of it, and each call by its id."""

    answered: bool = False
    calls: dict = field(default_factory=dict)  # use id -> the call as a turn record holds it


def held(store, sessions: set[str]) -> dict[tuple[str, str], Held]:
    """What `store` (an AppendStore or a Store) holds of the turns of these sessions.

    One pass over the file: commit lines name their session and turn and list their roots,
    and an answered turn's Receipt line ends with the id of the receipt mark, so whether a
    turn is whole is known without loading a node. Only for a turn held in part are its
    roots loaded (an AppendStore reads each from its line, checked against its id). A line
    that only looks like a Receipt can at most make a turn look whole: skipped, never harmed.
    """
    import ujson

    from eggshell.core.identity import content_hex
    from eggshell.core.values import Atom, Op, readable
    from eggshell.graph.turns import RECEIPT_MARK, observed_text, receipt_of, split_work, tool_occurrence

    mark = content_hex(Atom.text(RECEIPT_MARK))
    receipt = b'"op":"%s"' % Op.RECEIPT.value.encode()
    roots: dict[tuple[str, str], list[str]] = {}
    whole: set[str] = set()
    try:
        f = open(store.path, "rb")
    except FileNotFoundError:
        return {}
    with f:
        for line in f:
            if line.startswith(b'{"node":'):
                if receipt in line[:100] and line.rstrip().endswith(b'"%s"]]}' % mark.encode()):
                    try:
                        whole.add(ujson.loads(line)["node"])
                    except (ValueError, KeyError, TypeError):
                        pass
                continue
            if not line.startswith(b'{"commit":'):
                continue
            try:
                c = ujson.loads(line)
            except ValueError:
                continue
            if c.get("session") in sessions and isinstance(c.get("roots"), list):
                roots.setdefault((c["session"], c.get("turn")), []).extend(c["roots"])
    out: dict[tuple[str, str], Held] = {}
    for key, ids in roots.items():
        h = out[key] = Held(answered=any(r in whole for r in ids))
        if h.answered:
            continue
        for rid in ids:
            v = store.graph.nodes.get(rid)
            if v is None:
                continue
            rec = receipt_of(v)
            if rec is not None:
                h.answered = h.answered or rec.answer is not None
                continue
            occ = tool_occurrence(v)
            work = split_work(readable(v.args[0].target)) if occ is not None else None
            if work is None or (occ.session, occ.turn) != key:
                continue
            call = {"name": work[0], "id": occ.use_id, "input": work[1], "output": readable(v.args[1].target)}
            seen = observed_text(v)
            if seen is not None:
                call["observed"] = ujson.loads(seen)
            h.calls.setdefault(occ.use_id, call)
    return out


# -- a transcript's turn as live capture would have kept it ----------------------------------


def captured(record: dict, rules) -> tuple[dict, int]:
    """(the turn record as the hooks would have journaled it, how many calls cannot be stored).

    Each part goes through what its hook event goes through (runtime/turnflow.py): the
    output cut past events.OUTPUT_CHARS, lone surrogates made U+FFFD, then the redaction of
    that one payload, with the built-in rules and the project's; a call no turn can store
    (events.tool_problem) is left out, as the hook would have quarantined it.
    """
    from eggshell.core.redact import redact_payload
    from eggshell.graph.events import capped_output, tool_problem, well_formed

    base = {"session_id": record["session"], "turn_id": record["turn"], "cwd": record["cwd"]}

    def hook(event: str, **kw) -> dict | None:
        try:
            payload, _ = well_formed({**base, "hook_event_name": event, **kw})
        except RecursionError:
            return None
        return redact_payload(payload, rules)

    prompt = hook("UserPromptSubmit", prompt=record["prompt"])
    tools, dropped = [], 0
    for t in record["tools"]:
        p = hook("PostToolUse", tool_name=t["name"], tool_input=t["input"], tool_response=capped_output(t["output"]),
                 tool_use_id=t["id"])
        ev = None if p is None else {"name": p["tool_name"], "id": p["tool_use_id"], "input": p["tool_input"], "output": p["tool_response"]}
        if ev is None or tool_problem(ev) is not None:
            dropped += 1
            continue
        tools.append(ev)
    answer = record["answer"]
    if isinstance(answer, str):
        stop = hook("Stop", last_assistant_message=answer)
        answer = stop["last_assistant_message"] if stop is not None else None
    return {"session": record["session"], "turn": record["turn"], "cwd": record["cwd"],
            "prompt": prompt["prompt"] if prompt is not None else "", "tools": tools, "answer": answer}, dropped


def merged(record: dict, have: Held) -> dict:
    """The record with each call the store holds taken as stored (fingerprint included), so a
    turn saved in part before is completed, never given a second copy of a call."""
    ids = {t["id"] for t in record["tools"]}
    tools = [have.calls.get(t["id"], t) for t in record["tools"]]
    tools += [c for uid, c in have.calls.items() if uid not in ids]
    return dict(record, tools=tools)


def replayed(store, record: dict, root: str | None) -> bool:
    """Whether committing this record would add nothing (every root of it is stored)."""
    from eggshell.core.identity import content_hex
    from eggshell.core.redact import redact_record
    from eggshell.graph.turns import Turn, compile_turn, parse_turn, relative_cwd
    from eggshell.paths import find_project

    t = parse_turn(redact_record(record))
    if t.cwd:
        t = Turn(t.session, t.turn, relative_cwd(t.cwd, root if root is not None else find_project(t.cwd)), t.prompt, t.tools, t.answer)
    return all(content_hex(r) in store.graph.root_ids for r in compile_turn(t).roots)


# -- the command ---------------------------------------------------------------------------


@dataclass
class Target:
    """One store turns go to, with the project it belongs to and that project's redaction rules."""

    path: str
    root: str | None
    rules: object
    turns: list = field(default_factory=list)  # (Found, file)
    sessions: set = field(default_factory=set)
    imported: int = 0
    present: int = 0
    into: set = field(default_factory=set)  # sessions with a turn imported


@dataclass
class Counts:
    bad_lines: int = 0
    live: int = 0
    empty: int = 0
    no_result: int = 0
    orphans: int = 0
    sidechain: int = 0
    unstorable: int = 0
    promptless: int = 0
    open: int = 0  # turns imported while their transcript ends inside them
    failed: list = field(default_factory=list)
    skipped: dict = field(default_factory=dict)  # Skip -> sessions
    imported: int = 0  # so far, for the progress line
    into: set = field(default_factory=set)


@dataclass(frozen=True)
class Skip:
    """Why a chat's turns go to no store; `refused`: a store Eggshell may not write (an exit status of 1)."""

    why: str
    refused: bool = False


class Progress:
    """One line on stderr, rewritten at most five times a second, only when it is a terminal."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.start = time.monotonic()
        self.last = 0.0
        self.shown = False

    def __call__(self, turns: int, sessions: int) -> None:
        now = time.monotonic()
        if not self.tty or now - self.last < 0.2:
            return
        self.last, self.shown = now, True
        print("\r%s import: %s from %s, %.0f s" % (PROG, count(turns, "turn"), count(sessions, "session"), now - self.start), end="",
              file=self.stream, flush=True)

    def clear(self) -> None:
        if self.shown:
            print("\r\033[K", end="", file=self.stream, flush=True)


def _files(mod, given: list[str], env, codex_home: str) -> tuple[list[str], set[str], list[str]]:
    """(transcript files, those named on the command line, default folders that do not exist)."""
    roots = [os.path.abspath(os.path.expanduser(p)) for p in given] if given else mod.default_roots(env, codex_home)
    files, named, missing = [], set(), []
    for r in roots:
        if os.path.isfile(r):
            files.append(r)
            named.add(r)
        elif os.path.isdir(r):
            for d, dirs, names in os.walk(r):
                dirs[:] = sorted(x for x in dirs if not mod.skip_dir(x))
                files.extend(os.path.join(d, n) for n in sorted(names) if mod.is_transcript_name(n))
        elif given:
            raise CliError("%s: no such file or directory" % r)
        else:
            missing.append(r)
    return list(dict.fromkeys(files)), named, missing


def _inside(path: str, top: str) -> bool:
    a, t = os.path.realpath(path), os.path.realpath(top)
    return a == t or a.startswith(t.rstrip(os.sep) + os.sep)


def _plural(n: int, word: str) -> str:
    return "%d %s%s" % (n, word, "" if n == 1 else "s")


def _route(cwd: str, a, paths: Paths, targets: dict[str, Target]) -> Target | Skip:
    """The store a chat that ran in `cwd` goes to, or why it goes nowhere."""
    from eggshell import config as _config
    from eggshell.core.redact import rules
    from eggshell.paths import store_problem

    if not cwd and not a.egg:
        return Skip("its transcript names no working directory")
    cfg = None
    if cwd:  # the settings in force there, as the hooks load them (the global file's rules too)
        try:
            cfg = _config.load(paths, cwd)
        except _config.ConfigError as e:
            return Skip("the config in force there cannot be read: %s" % e)
    if a.egg:
        path, root = os.path.abspath(a.egg), (cfg.project_root if cfg is not None else None)
    elif cfg is None or cfg.project_root is None:
        return Skip("not in an Eggshell project (run `egg init` there, or name a store with --egg)")
    elif not cfg.enabled:
        return Skip("memory is off in %s (enabled = false)" % cfg.project_root)
    elif cfg.write_egg is None:
        return Skip("the default profile %r of %s records nothing" % (cfg.default, cfg.project_root))
    else:
        path, root = cfg.write_egg, cfg.project_root
    problem = store_problem(path)
    if problem is not None:
        return Skip(problem, refused=True)
    if path not in targets:
        redact = rules(cfg.redact, cfg.never_record) if cfg is not None else rules()
        targets[path] = Target(path, root, redact)
    return targets[path]


def cmd_import(a, paths: Paths) -> int:
    mod = __import__("eggshell.hosts.transcripts_" + a.host, fromlist=["parse"])
    if a.project and not os.path.isdir(a.project):
        raise CliError("%s: no such directory (--project)" % a.project)
    files, named, missing = _files(mod, a.paths, os.environ, paths.codex_home)
    if not files:
        where = ", ".join(a.paths or missing or mod.default_roots(os.environ, paths.codex_home))
        say("no %s transcripts found in %s; nothing to import" % (mod.LABEL, where))
        return 0
    c = Counts()
    targets: dict[str, Target] = {}
    routes: dict[str, Target | Skip] = {}
    status = 0
    for path in files:
        try:
            with open(path, "rb") as f:
                t = mod.parse(f, path)
        except OSError as e:
            say("%s: %s: cannot be read (%s); skipped" % (PROG, path, e.strerror or e), err=True)
            status = max(status, 1 if path in named else 0)
            continue
        if t.problem is not None:
            say("%s: %s: %s; skipped" % (PROG, path, t.problem), err=True)
            status = max(status, 1 if path in named else 0)
            continue
        c.bad_lines += t.bad_lines
        if t.bad_lines:
            at = ", ".join(map(str, t.bad_at)) + (", ..." if t.bad_lines > len(t.bad_at) else "")
            say("%s: %s: %s not a JSON object (line %s); skipped, the rest was read" % (
                PROG, path, _plural(t.bad_lines, "line") + (" is" if t.bad_lines == 1 else " are"), at), err=True)
        c.no_result += t.no_result
        c.orphans += t.orphans
        c.sidechain += t.sidechain
        c.promptless += t.promptless
        cwd = t.cwd or (t.turns[0].record["cwd"] if t.turns else "")
        if a.project and not (cwd and _inside(cwd, a.project)):
            continue
        turns = [x for x in t.turns if a.since is None or (parse_time(x.time) or a.since) >= a.since]
        if not turns:
            continue
        if cwd not in routes:
            routes[cwd] = _route(cwd, a, paths, targets)
        target = routes[cwd]
        if isinstance(target, Skip):
            c.skipped.setdefault(target, set()).add(t.session)
            continue
        target.turns.extend((x, path) for x in turns)
        target.sessions.add(t.session)
    bar = Progress()
    for target in targets.values():
        _into(target, paths, a.dry_run, c, bar)
    bar.clear()
    return max(status, _report(a, targets, c))


def _into(target: Target, paths: Paths, dry: bool, c: Counts, bar: Progress) -> None:
    """Save (or, dry, weigh) every turn bound for one store, oldest first."""
    from eggshell.graph.commitindex import AppendStore
    from eggshell.graph.save import save_turn
    from eggshell.graph.turns import TurnError
    from eggshell.runtime.journal import Journal

    exists = os.path.exists(target.path)
    store = AppendStore.open(target.path, paths.data_root) if exists or not dry else None
    start = store.offset if store is not None else 0
    try:
        have = held(store, target.sessions) if exists else {}
        journal = Journal(paths.journal_dir)
        for found, src in sorted(target.turns, key=lambda x: x[0].time):
            r = found.record
            key = (r["session"], r["turn"])
            if journal.has(*key):
                c.live += 1  # the hooks are recording it: theirs to save, with fingerprints
                continue
            h = have.get(key)
            if h is not None and h.answered:
                target.present += 1
                continue
            record, dropped = captured(r, target.rules)
            c.unstorable += dropped
            if h is not None:
                record = merged(record, h)
            if not record["tools"] and record["answer"] is None:
                c.empty += 1  # nothing observed yet (an open turn is imported once it shows something)
                continue
            try:
                if dry:
                    new = not (h is not None and store is not None and replayed(store, record, target.root))
                else:
                    new = save_turn(store, record, target.root, commit_time(found.time)).commit_id is not None
            except TurnError as e:
                c.failed.append("%s: turn %s of session %s: %s" % (src, r["turn"], r["session"], e))
                continue
            if new:
                c.open += found.open
                target.imported += 1
                target.into.add(r["session"])
                c.imported += 1
                c.into.add(r["session"])
                bar(c.imported, len(c.into))
            else:
                target.present += 1
    finally:
        if store is not None:
            if not dry:
                from eggshell.search.turnindex import index_appended

                index_appended(store, start, lambda m: say("egg import: %s" % m, err=True))
            store.close()


def _report(a, targets: dict[str, Target], c: Counts) -> int:
    verb = "would import" if a.dry_run else "imported"
    for t in targets.values():
        where = t.path if t.root is None else "%s (project %s)" % (t.path, t.root)
        say("%s: %s %s from %s%s" % (where, verb, _plural(t.imported, "turn"), _plural(len(t.into), "session"),
                                     ", %d already present" % t.present if t.present else ""))
    for skip, sessions in c.skipped.items():
        if skip.refused:
            say("%s: skipped %s: %s" % (PROG, _plural(len(sessions), "session"), skip.why), err=True)
        else:
            say("skipped %s: %s" % (_plural(len(sessions), "session"), skip.why))
    notes = [
        (c.live, "turn", "the hooks are recording right now (they save them themselves)"),
        (c.empty, "turn", "with neither a tool call nor an answer yet"),
        (c.open, "turn", "still running (or cut short) imported as far as its transcript goes; a later import completes it"),
        (c.promptless, "turn", "without a user request (started by the agent itself): left out"),
        (c.no_result, "call", "the transcript shows no result for (interrupted or still running): left out"),
        (c.unstorable, "call", "that cannot be stored (too deeply nested, or not JSON): left out"),
        (c.orphans, "tool result", "whose call is not in its transcript: left out"),
        (c.sidechain, "subagent line", "skipped (side conversations are not imported; docs/import.md)"),
    ]
    for n, word, text in notes:
        if n:
            say("%s %s" % (_plural(n, word), text))
    for line in c.failed:
        say("%s: %s; not imported" % (PROG, line), err=True)
    turns = sum(t.imported for t in targets.values())
    sessions = len(set().union(*(t.into for t in targets.values()))) if targets else 0
    stores = sum(1 for t in targets.values() if t.imported)
    present = sum(t.present for t in targets.values())
    say("%s%s %s from %s into %s, skipped %d already present, %s%s" % (
        "dry run: " if a.dry_run else "", verb, _plural(turns, "turn"), _plural(sessions, "session"), _plural(stores, "store"),
        present, _plural(c.bad_lines, "bad line"), "; nothing was written" if a.dry_run else ""))
    if turns and not a.dry_run:
        say("`egg index` in a project embeds its new turns for semantic search now; otherwise they are embedded a few at a time as prompts come")
    return 1 if c.failed or any(skip.refused for skip in c.skipped) else 0
