"""Day one (issue 29, item 2): what a new chat is handed when the project's store is small.

The `handoff` set measures a store of 500 runs; a user's first day has one to a few. Here
each swe `related` pair gets stores of its own, and the prompt hook's own code
(eggeval.NewChat.ask_in, i.e. runtime.turnflow.answer on UserPromptSubmit) answers:

- stores: the prior run alone (1), then with 4 and with 49 unrelated runs added (5, 50). The
  added runs are drawn deterministically from the other records: ordered by
  sha256(query id, record id), leaving out the query's relevant and same_issue records; the
  5-run store's fillers are the first 4 of the 50-run store's. They may come from the same
  repository (a real project's store does), never from the same issue.
- forms of the query: `full` (the later task's issue text), `title` (title_of: its first
  non-empty line, cut at the first sentence end when over TITLE_CHARS), `chat` (a follow-up
  a user would type about the prior run's work, written by hand in dayone-chat.jsonl).
- scenarios: the related queries that have a hand-written follow-up (every 4th related query
  in file order: 45, spread over the repositories); --limit N keeps the first N.
- halves: split_halves orders the scenario ids by sha256 and gives the first half (rounded
  up) to `choose`, the rest to `held-out`. Later work chooses thresholds on `choose` only and
  reports `held-out`; both are reported here, as is their union.
- unrelated prompts: LoCoMo questions (eggeval.unrelated_questions) and CODE_QUESTIONS,
  short questions about code in no store (a web framework, a game engine, ...). At each size,
  prompt i asks the store of scenario i mod n, so the 1-run stores are asked too.

A related question is a hit when its handoff holds a display key of the prior run (its turn
or a tool call; eggeval.linked_state: shown or only listed as over the budget). The gold
share is the share of related handoffs naming a file the later fix changes (eggeval.named).
Nothing here is tuned: the product runs with its defaults.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import eggeval as ev
import hostroute

SIZES = (1, 5, 50)
FORMS = ("full", "title", "chat")
HALVES = ("choose", "held-out")
TITLE_CHARS = 200
CHAT_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dayone-chat.jsonl")

# Coding questions about repositories none of the stores hold (the swe runs are astropy,
# django, matplotlib, requests, xarray, pylint, pytest, scikit-learn, sphinx, sympy, ...).
CODE_QUESTIONS = (
    "How do I add a middleware in Express that logs every request's duration?",
    "In our Godot game, why does the player fall through the floor when the frame rate drops?",
    "Where does the Rails router decide which controller action handles a nested resource?",
    "How would I make the Unity camera follow the player smoothly without jitter?",
    "Can you add a React hook that debounces the search box input?",
    "Why does our Spring Boot service start twice when the profile is set to dev?",
    "In the Bevy engine, how do I spawn an entity with a sprite and a collider?",
    "How do I configure nginx to proxy websocket connections to the backend?",
    "Where in the Vue app is the user's language picked on first load?",
    "Write a Flutter widget test for the login button being disabled until the form is valid",
    "Why does the Kubernetes pod keep restarting with exit code 137?",
    "How can I stream a large file download in FastAPI without loading it into memory?",
    "In Unreal, where should damage be applied so it replicates to every client?",
    "Add rate limiting to the Gin handlers so one client cannot send more than 10 requests a second",
    "Why is the Laravel queue worker not picking up jobs after a deploy?",
    "How do I make the Phaser sprite animation loop only while the arrow key is held?",
    "Where does Next.js decide whether a page is rendered statically or on each request?",
    "Can you write a migration in Prisma that renames the email column without losing data?",
    "How do I bind a keyboard shortcut in the Electron app's menu to toggle dark mode?",
    "Why does the Svelte store not update the component when I push to the array?",
)


# -- building the scenarios ----------------------------------------------------------------


def title_of(text: str, cap: int = TITLE_CHARS) -> str:
    """The query as its title: an issue's first non-empty line is its title in SWE-bench;
    when it runs long (no title line), its first sentence, and at most `cap` characters."""
    line = next((x.strip() for x in text.splitlines() if x.strip()), "")
    if len(line) <= cap:
        return line
    for end in (". ", "? ", "! "):
        at = line.find(end)
        if 0 < at < cap:
            return line[: at + 1]
    return line[:cap]


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()


def split_halves(ids: Iterable[str]) -> dict[str, str]:
    """Each id's half, by the order of sha256(id): the first half (rounded up) `choose`, the rest
    `held-out`. Deterministic, and independent of file order and of --limit (the split is made
    before the limit). Adding follow-ups can move ids across the cut: say so when you do."""
    order = sorted(dict.fromkeys(ids), key=_digest)
    cut = (len(order) + 1) // 2
    return {i: HALVES[0] if n < cut else HALVES[1] for n, i in enumerate(order)}


def fillers(query_id: str, record_ids: Iterable[str], exclude: Iterable[str], n: int) -> list[str]:
    """The n unrelated runs added to a query's store: the others in sha256(query, record) order."""
    out = set(exclude)
    return sorted((r for r in dict.fromkeys(record_ids) if r not in out), key=lambda r: _digest(query_id, r))[:n]


def store_runs(q: ev.Question, record_ids: Sequence[str], sizes: Sequence[int] = SIZES) -> dict[int, tuple[str, ...]]:
    """The runs in each of a question's stores: its prior run, then the first size-1 fillers.

    Never a filler: a relevant or same_issue run, nor the later task's own run (`msa:<its
    instance>`, when the data holds it): its request is the query itself."""
    later = "msa:" + q.id.partition(":")[2]
    fill = fillers(q.id, record_ids, {q.linked or "", later, *q.drop, *q.relevant}, max(sizes) - 1)
    return {s: (q.linked or "", *fill[: s - 1]) for s in sizes}


def read_chat(path: str = CHAT_FILE) -> dict[str, dict]:
    """The hand-written follow-ups, by query id: {"id", "intent", "text"}."""
    out: dict[str, dict] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                out[row["id"]] = row
    return out


class NoScenarios(ValueError):
    """The data holds no related query with a hand-written follow-up (a tiny or other data set)."""


@dataclass(frozen=True, slots=True)
class Scenario:
    """One related pair on day one: its question, the query's forms, its half, the runs per store size."""

    question: ev.Question
    forms: dict[str, str]
    half: str
    runs: dict[int, tuple[str, ...]]
    intent: str = ""  # the follow-up's: change | why | test | where


def scenarios(queries: list[dict], records: list[dict], chat: dict[str, dict], sizes: Sequence[int] = SIZES,
              limit: int | None = None) -> list[Scenario]:
    """The related questions that have a follow-up, in file order, each with its stores' runs."""
    ids = [str(r.get("id")) for r in records]
    qs = [q for q in ev.related_questions(queries, records) if q.id in chat]
    halves = split_halves(q.id for q in qs)
    qs = qs[:limit] if limit else qs
    return [Scenario(q, {"full": q.text, "title": title_of(q.text), "chat": chat[q.id]["text"]}, halves[q.id],
                     store_runs(q, ids, sizes), chat[q.id].get("intent", "")) for q in qs]


def unrelated_prompts(locomo_path: str) -> list[ev.Question]:
    """LoCoMo questions and coding questions about code in no store."""
    code = [ev.Question("code#%d" % n, t, "unrelated") for n, t in enumerate(CODE_QUESTIONS)]
    return [*ev.unrelated_questions(locomo_path), *code]


# -- asking ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Asked:
    """One prompt on one store: what it was handed and how it scores."""

    id: str
    kind: str  # "related" | "locomo" | "code"
    size: int
    form: str  # FORMS for related; "" for unrelated
    half: str  # HALVES for related; "" for unrelated
    chars: int  # the handoff's length (0: nothing handed)
    hit: bool  # related: the prior run's key is in the handoff
    shown: bool  # related: its evidence is shown, not only listed
    gold: bool  # related: the handoff names a gold file
    intent: str = ""  # related: its follow-up's intent (change | why | test | where)


def score_related(q: ev.Question, text: str, keys: frozenset[str], size: int, form: str, half: str, intent: str = "") -> Asked:
    """Whether a related question's handoff holds the prior run (any of its keys) and names a gold file."""
    state = ev.linked_state(text, keys) if text else "absent"
    return Asked(q.id, "related", size, form, half, len(text), state != "absent", state == "shown", bool(ev.named(text, q.gold)), intent)


def score_unrelated(q: ev.Question, text: str, size: int) -> Asked:
    kind = "code" if q.id.startswith("code#") else "locomo"
    return Asked(q.id, kind, size, "", "", len(text), False, False, False)


@dataclass
class HostRun:
    """One host's route: the stores recorded through its hooks (hostroute.py), and what its prompts were handed."""

    host: str
    recorded: hostroute.Recorded
    asked: list[Asked] = field(default_factory=list)
    ask_s: float = 0.0


@dataclass
class DayOneRun:
    asked: list[Asked] = field(default_factory=list)
    scenarios: int = 0
    stores: int = 0
    stored_turns: int = 0
    written: int = 0  # turns written (a run in three stores is written three times)
    write_s: float = 0.0
    embed_s: float = 0.0
    ask_s: float = 0.0
    settings: str = ""
    notes: list[str] = field(default_factory=list)
    hosts: list[HostRun] = field(default_factory=list)  # with --hosts: the same stores through each host's hooks
    hosts_write_s: float = 0.0  # recording every host's stores (workers in parallel)
    host_workers: int = 0


def store_jobs(scens: list[Scenario]) -> list[tuple[str, str, int, tuple[str, ...]]]:
    """(store name, query id, size, its runs) of every store, in the order they are written."""
    return [("dayone-%d-%d" % (i, size), s.question.id, size, s.runs[size]) for i, s in enumerate(scens) for size in sorted(s.runs)]


def write_stores(chat: ev.NewChat, scens: list[Scenario], by_id: dict[str, dict], progress: Callable[[int, int], None]) -> dict[tuple[str, int], str]:
    """Each scenario's stores, one per size, written by the product's writer: (query id, size) -> path."""
    paths: dict[tuple[str, int], str] = {}
    jobs = store_jobs(scens)
    for n, (name, qid, size, runs) in enumerate(jobs):
        paths[(qid, size)] = chat.write_store(name, [by_id[r] for r in runs if r in by_id])
        progress(n + 1, len(jobs))
    return paths


def record_hosts(hosts: Sequence[str], root: str, swe_path: str, scens: list[Scenario], by_id: dict[str, dict],
                 workers: int) -> dict[str, hostroute.Recorded]:
    """Each host's stores (the same runs as write_stores'), recorded through its hooks: in this process, or
    one worker process per host, `workers` at a time (each host's recording is one core's work)."""
    jobs = [(name, list(runs)) for name, _, _, runs in store_jobs(scens)]
    root = os.path.join(root, "hosts")
    if workers <= 1:
        out = {}
        for h in hosts:
            prog = ev.Progress("dayone %s" % h, every=60.0)
            out[h] = hostroute.record_host(h, root, [(name, [by_id[r] for r in rids if r in by_id]) for name, rids in jobs],
                                           lambda d, t: prog(d, t, "stores recorded through its hooks"))
        return out
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {h: pool.submit(hostroute.record_host_from, h, root, swe_path, jobs) for h in hosts}
        return {h: f.result() for h, f in futures.items()}


def host_stores(run: hostroute.Recorded, scens: list[Scenario]) -> tuple[dict[tuple[str, int], str], dict[tuple[str, str], frozenset[str]], list]:
    """(query id, size) -> the host's store, (store, record id) -> the run's keys there, and every stored turn (to embed)."""
    paths, keys, views = {}, {}, []
    for name, qid, size, runs in store_jobs(scens):
        path = paths[(qid, size)] = run.stores[name]
        for rid, got in hostroute.stored_views(run.host, name, path, runs).items():
            views += got
            if len(got) == 1:
                keys[(path, rid)] = hostroute.keys_of(got[0])
    return paths, keys, views


def ask_all(chat: ev.NewChat, scens: list[Scenario], unrelated: list[ev.Question], paths: dict[tuple[str, int], str],
            sizes: Sequence[int], progress: Callable[[int, int], None],
            keys_of: Callable[[str, str], frozenset[str]] | None = None) -> list[Asked]:
    """Every related form and every unrelated prompt, at every store size. `keys_of(record id, store)`: the
    display keys of a run's turn in that store (default: the egg-save route's, NewChat.keys_of)."""
    keys_of = keys_of or (lambda rid, path: chat.keys_of(rid))
    out: list[Asked] = []
    total = len(sizes) * (len(scens) * len(FORMS) + len(unrelated))
    for size in sizes:
        for s in scens:
            keys = keys_of(s.question.linked or "", paths[(s.question.id, size)])
            for form in FORMS:
                text, _ = chat.ask_in(s.forms[form], (paths[(s.question.id, size)],))
                out.append(score_related(s.question, text, keys, size, form, s.half, s.intent))
                progress(len(out), total)
        for i, q in enumerate(unrelated):
            text, _ = chat.ask_in(q.text, (paths[(scens[i % len(scens)].question.id, size)],))
            out.append(score_unrelated(q, text, size))
            progress(len(out), total)
    return out


def run_dayone(swe_path: str, locomo_path: str, cache: str, root: str, *, mode: str = "hybrid", model: str | None = None,
               limit: int | None = None, chat_path: str = CHAT_FILE, sizes: Sequence[int] = SIZES, hosts: Sequence[str] = (),
               workers: int | None = None) -> DayOneRun:
    """Build every scenario's stores in a new project and ask its prompt hook each form and the unrelated prompts.

    `hosts`: the same stores recorded through each of these hosts' hooks as well (hostroute.py), each
    store a project of its own, asked the same prompts; `workers` processes record them (default: one
    per host, at most one per core)."""
    records, queries = ev.read_swe(swe_path)
    scens = scenarios(queries, records, read_chat(chat_path), sizes, limit)
    if not scens:
        raise NoScenarios("no day-one scenario: no related query in %s has a follow-up in %s" % (swe_path, chat_path))
    unrelated = unrelated_prompts(locomo_path)
    by_id = {str(r.get("id")): r for r in records}
    chat = ev.NewChat(root, cache, mode, model, log=lambda m: print("%s: dayone: %s" % (ev.PROG, m), file=sys.stderr, flush=True))
    c = chat.cfg
    out = DayOneRun(scenarios=len(scens), settings="mode %s, top_k %d, min_coverage %g, handoff_chars %d" % (
        c.mode, c.top_k, c.min_coverage, c.selection().handoff_chars))
    prog = ev.Progress("dayone")
    try:
        t0 = time.perf_counter()
        paths = write_stores(chat, scens, by_id, lambda d, t: prog(d, t, "stores written"))
        out.write_s, out.stores, out.stored_turns = time.perf_counter() - t0, len(paths), len(chat.views)
        out.written = sum(len(runs) for *_, runs in store_jobs(scens))
        routes: list[tuple[HostRun, dict, dict]] = []
        if hosts:
            out.host_workers = max(1, min(len(hosts), workers or os.cpu_count() or 1))
            t0 = time.perf_counter()
            recorded = record_hosts(hosts, root, swe_path, scens, by_id, out.host_workers)
            out.hosts_write_s = time.perf_counter() - t0
            for h in hosts:
                for p in recorded[h].problems[:20]:
                    chat._note("%s: %s" % (h, p))
                hpaths, hkeys, hviews = host_stores(recorded[h], scens)
                routes.append((HostRun(h, recorded[h]), hpaths, hkeys))
                chat.extra_views += hviews
        t0 = time.perf_counter()
        chat.embed(lambda d, t: prog(d, t, "new windows embedded"))
        out.embed_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        out.asked = ask_all(chat, scens, unrelated, paths, sizes, lambda d, t: prog(d, t, "prompts"))
        out.ask_s = time.perf_counter() - t0
        for hr, hpaths, hkeys in routes:
            chat.renew()  # the last route's searchers are let go: one route's stores in memory at a time
            t0 = time.perf_counter()
            hr.asked = ask_all(chat, scens, unrelated, hpaths, sizes, lambda d, t: prog(d, t, "prompts (%s)" % hr.host),
                               keys_of=lambda rid, path, k=hkeys: k.get((path, rid), frozenset()))
            hr.ask_s = time.perf_counter() - t0
            out.hosts.append(hr)
    finally:
        chat.close()
    out.notes = list(dict.fromkeys(chat.notes))
    return out


# -- report ----------------------------------------------------------------------------------


def share(xs: Iterable[Asked], pick: Callable[[Asked], bool]) -> tuple[float, int]:
    """(share of xs for which pick holds, how many xs)."""
    xs = list(xs)
    return (sum(map(pick, xs)) / len(xs) if xs else 0.0, len(xs))


def _cell(v: tuple[float, int]) -> str:
    return "%.3f (%d)" % v if v[1] else "-"


def report(run: DayOneRun, sizes: Sequence[int] = SIZES) -> list[str]:
    rel = [a for a in run.asked if a.kind == "related"]
    unrel = [a for a in run.asked if a.kind != "related"]
    cols = " | ".join("%d run%s" % (s, "" if s == 1 else "s") for s in sizes)
    head = ["| form | half | %s |" % cols, "| --- | --- |" + " ---: |" * len(sizes)]
    out = ["", "## Day one (issue 29): related follow-ups on stores of %s runs; %d scenarios" % (", ".join(map(str, sizes)), run.scenarios), ""]
    for title, pick in (("handoff holds the prior run's key (share (n))", lambda a: a.hit),
                        ("... its evidence shown, not only listed as over the budget", lambda a: a.shown),
                        ("handoff names a gold file of the later fix", lambda a: a.gold),
                        ("given any handoff", lambda a: a.chars > 0)):
        out += ["### %s" % title, ""] + head
        for form in FORMS:
            for half in (*HALVES, "all"):
                row = [_cell(share((a for a in rel if a.size == s and a.form == form and half in ("all", a.half)), pick)) for s in sizes]
                out.append("| %s | %s | %s |" % (form, half, " | ".join(row)))
        out.append("")
    out += ["### Chat follow-ups handed the prior run's key, by intent (both halves)", "", "| intent | %s |" % cols, "| --- |" + " ---: |" * len(sizes)]
    for intent in sorted({a.intent for a in rel if a.form == "chat"}):
        row = [_cell(share((a for a in rel if a.size == s and a.form == "chat" and a.intent == intent), lambda a: a.hit)) for s in sizes]
        out.append("| %s | %s |" % (intent or "-", " | ".join(row)))
    out += ["", "### Unrelated prompts given any handoff (share (n))", "", "| prompts | %s |" % cols, "| --- |" + " ---: |" * len(sizes)]
    for kind in ("locomo", "code", "all"):
        row = [_cell(share((a for a in unrel if a.size == s and kind in ("all", a.kind)), lambda a: a.chars > 0)) for s in sizes]
        out.append("| %s | %s |" % (kind, " | ".join(row)))
    out += ["", "| day-one step | seconds |", "| --- | ---: |",
            "| write %d stores (%d distinct runs) | %.1f |" % (run.stores, run.stored_turns, run.write_s),
            "| embed the stored turns (cached windows skipped) | %.1f |" % run.embed_s,
            "| %d prompts through the prompt hook | %.1f |" % (len(run.asked), run.ask_s), "",
            "- prompt path: runtime.turnflow.answer with the product's defaults (%s), each prompt a new chat reading one store" % run.settings]
    out += ["- %s" % n for n in run.notes[:10]]
    if run.hosts:
        out += report_hosts(run, sizes)
    return out


ROUTE = "egg-save"  # today's route: the product's writer, every call Bash {"command"} with the record's output


def _related(asked: list[Asked]) -> list[Asked]:
    return [a for a in asked if a.kind == "related"]


def _share(asked: Iterable[Asked], size: int, form: str, half: str = "all") -> tuple[float, int]:
    """Share of a route's related prompts handed the prior run's key (form ""; its unrelated ones given any handoff)."""
    if not form:
        return share((a for a in asked if a.kind != "related" and a.size == size), lambda a: a.chars > 0)
    return share((a for a in asked if a.kind == "related" and a.size == size and a.form == form and half in ("all", a.half)),
                 lambda a: a.hit)


def _pair(host: tuple[float, int], base: tuple[float, int]) -> str:
    if not host[1]:
        return "-"
    return "%.3f / %.3f (%d)" % (host[0], base[0], host[1]) if host[0] != base[0] else "%.3f = (%d)" % host


def report_hosts(run: DayOneRun, sizes: Sequence[int] = SIZES) -> list[str]:
    """The same stores recorded through each host's hooks, beside the egg-save route."""
    label = {"codex": "Codex", "claude": "Claude Code", "opencode": "OpenCode", "gemini": "Gemini CLI"}
    routes = [(ROUTE, run.asked)] + [(h.host, h.asked) for h in run.hosts]
    out = ["", "## Day one through each host's hooks: %s" % ", ".join(label.get(h.host, h.host) for h in run.hosts), "",
           "Each store recorded again as one chat per run of each host, its payloads fed to egg-hook's own code "
           "(runtime.hookflow.managed with the host's adapter, in this process; tests/eval/hostroute.py), each store a project "
           "of its own; then asked the same prompts. egg-save is the route above.", "",
           "### Handed the prior run's key (related, both halves) and unrelated prompts given any handoff (share)", ""]
    cols = ["%s %d" % (f, z) for f in FORMS for z in sizes] + ["unrelated %d" % z for z in sizes]
    out += ["| route | %s |" % " | ".join(cols), "| --- |" + " ---: |" * len(cols)]
    for name, asked in routes:
        cells = [_share(asked, z, f) for f in FORMS for z in sizes] + [_share(asked, z, "") for z in sizes]
        out.append("| %s | %s |" % (name, " | ".join("%.3f" % c[0] if c[1] else "-" for c in cells)))
    n_rel = sum(1 for a in _related(run.asked) if a.size == sizes[0] and a.form == FORMS[0])
    n_unrel = sum(1 for a in run.asked if a.kind != "related" and a.size == sizes[0])
    out += ["", "(n = %d related prompts per form and size, %d unrelated per size)" % (n_rel, n_unrel)]
    cols = " | ".join("%d run%s" % (z, "" if z == 1 else "s") for z in sizes)
    for h in run.hosts:
        out += ["", "### %s: handed the prior run's key (this host / egg-save (n); `=`: the same)" % label.get(h.host, h.host), "",
                "| form | half | %s |" % cols, "| --- | --- |" + " ---: |" * len(sizes)]
        for form in FORMS:
            for half in (*HALVES, "all"):
                out.append("| %s | %s | %s |" % (form, half, " | ".join(_pair(_share(h.asked, z, form, half), _share(run.asked, z, form, half))
                                                                     for z in sizes)))
        out.append("| unrelated, any handoff | all | %s |" % " | ".join(_pair(_share(h.asked, z, ""), _share(run.asked, z, "")) for z in sizes))
        base = {(a.id, a.size, a.form): a for a in run.asked}
        moved = [(a, base[(a.id, a.size, a.form)]) for a in h.asked if (a.id, a.size, a.form) in base
                 and (a.hit, a.chars > 0) != (base[(a.id, a.size, a.form)].hit, base[(a.id, a.size, a.form)].chars > 0)]
        if moved:
            out += ["", "Prompts answered otherwise than on egg-save's store (%d):" % len(moved), ""]
            for a, b in moved[:20]:
                what = "key" if a.kind == "related" else "any handoff"
                out.append("- %s %s%s, %d run%s: %s %s here, %s on egg-save's" % (
                    a.id, a.form, " (%s)" % a.intent if a.intent else "", a.size, "" if a.size == 1 else "s", what,
                    "handed" if (a.hit if a.kind == "related" else a.chars) else "not handed",
                    "handed" if (b.hit if b.kind == "related" else b.chars) else "not handed"))
            if len(moved) > 20:
                out.append("- ... and %d more" % (len(moved) - 20))
    out += ["", "### What each route stored, and the time it took", "",
            "| route | stores | turns | calls stored | hook events | calls denied at PreToolUse | check problems | hook.log lines | record s | prompts s |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
            "| %s | %d | %d | | | | | | %.1f | %.1f |" % (ROUTE, run.stores, run.written, run.write_s, run.ask_s)]
    for h in run.hosts:
        r = h.recorded
        out.append("| %s | %d | %d | %d | %d | %d | %d | %d | %.1f | %.1f |" % (
            h.host, len(r.stores), r.chats, r.calls, r.events, r.denied, len(r.problems), len(r.log_lines), r.write_s, h.ask_s))
    out += ["", "- the host routes were recorded by %d worker process%s in %.1f s (wall); the embedding step above covers every "
            "route's distinct stored texts" % (run.host_workers, "" if run.host_workers == 1 else "es", run.hosts_write_s)]
    for h in run.hosts:
        for p in h.recorded.problems[:10]:
            out.append("- %s: %s" % (h.host, p))
        for line in h.recorded.log_lines[:5]:
            out.append("- %s hook.log: %s" % (h.host, line[:300]))
    return out
