"""Day one through each host's hooks (issue 29, item 2): the same runs recorded as each host sends them.

dayone.py writes its stores with the product's writer (egg-save's `save_turn`), every call a
`Bash {"command"}` with the record's output. Here each run is one chat of a host instead, fed
to the product's hook entry point in this process: `runtime.hookflow.managed(host, payload)`,
what `egg-hook HOST` runs between reading stdin and writing stdout (helpers/hooks.py does the
same for the unit tests). Every event goes through the host's adapter (hosts/*.py), is
journaled, answered and, at the turn's end, saved into the project's store, as with
EGGSHELL_MANAGER=off (the hook that seals a turn saves it after its reply).

What each host sends for one chat (the run's prompt, its calls in order, its answer):

- codex (0.169, tests/e2e/README.md): SessionStart, UserPromptSubmit (turn_id), per call
  PreToolUse and PostToolUse with `Bash {"command"}` (Codex's exec_command, as its hooks name
  it) and the output as a plain string, Stop (last_assistant_message), SessionEnd.
- claude (Claude Code 2.1.328, docs/hosts/claude.md): the same events keyed by `prompt_id`;
  PostToolUse's tool_response `{stdout, stderr, interrupted, isImage, noOutputExpected}`; a
  non-zero exit is PostToolUseFailure with `error: "Exit code N\\n<output>"` (grep and rg
  exiting 1, no match, are not failures there).
- opencode (1.18.33, through opencode_plugin.js's payloads): session.created, chat.message
  (the prompt as a text part; the turn is the user message id), tool.execute.before and
  tool.execute.after with OpenCode's `bash {"command"}` and `{title, output, exit}`,
  session.idle with the answer the plugin kept; no end event.
- gemini (0.61.0, its bundle's shell tool): SessionStart, BeforeAgent, BeforeTool and
  AfterTool with `run_shell_command {"command"}` and tool_response `{llmContent,
  returnDisplay}`, llmContent being `<untrusted_context>\\nOutput: ...[\\nExit Code: N]\\nProcess
  Group PGID: P\\n</untrusted_context>`; AfterAgent (prompt_response), SessionEnd. It names no
  turn and no call: the journal gives them ids of its own.

A record's output is mini-swe-agent's rendering (`<returncode>N</returncode>` then the
output in `<output>` tags, or a warning with its head and tail): split_output takes the exit
code and the text the command printed, which each host then shapes as above. The records
carry no call descriptions (Claude Code's and OpenCode's models write one): none is sent.

Each store is a project of its own (`.eggshell.toml` as `egg init` writes it, a store at
.eggs/work.egg); the chats of one host share its data root (journal, chat state, hook.log) as
one user's machine does. The data root's global config says `mode = "lexical"`: the measure
embeds the stored turns itself into the shared vector cache (NewChat.embed), so no hook starts
an `egg-index` per saved turn (turnflow._pre_index), and the answers the recording hooks give
(not measured) rank lexically, as a hook with no manager does. One Resources per project is
kept across its events, as the warm manager keeps its own: a cold one per event would read
the whole store again at every call (quadratic in the run's calls).

Why in-process: recording the first 5 runs of a day-one store (186 calls, 392 events) took
8.1 s this way and 174.5 s as one `bin/egg-hook codex` process per event (445 ms an event,
EGGSHELL_MANAGER=off; 6 Dec 2026, 2 shared cores). A full `--hosts all` run sends about
830,000 events: days as processes. In-process, an event still costs what the hook's own
answer does (the reuse engine over the turn's calls so far and the store, about 60 ms at 50
runs), so each host's recording is one core's work for about an hour (dayone.record_hosts
runs the hosts in parallel worker processes).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable, Iterable

HOSTS = ("codex", "claude", "opencode", "gemini")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GLOBAL_CONFIG = """# written by tests/eval/hostroute.py: the recording hooks rank lexically and start no egg-index
mode = "lexical"
"""
_RC = re.compile(r"<returncode>(-?\d+)</returncode>\n?")
NO_MATCH_OK = ("grep", "egrep", "fgrep", "rg")  # Claude Code: exit 1 of these is "no match", not a failure


def split_output(text: object) -> tuple[int | None, str]:
    """(exit code or None, the text the command printed) of a mini-swe-agent tool output."""
    s = text if isinstance(text, str) else ("" if text is None else json.dumps(text))
    m = _RC.match(s)
    if m is None:
        return None, s
    body = s[m.end():]
    if body.startswith("<output>"):
        body = body[len("<output>"):].removeprefix("\n")
        end = body.rfind("</output>")
        if end >= 0 and not body[end + len("</output>"):].strip():
            body = body[:end]
    return int(m.group(1)), body


def _id(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()


def _uuid(*parts: str) -> str:
    return str(uuid.UUID(_id(*parts)[:32]))


def _claude_fails(command: str, rc: int | None) -> bool:
    if not rc:
        return False
    first = command.strip().split(None, 1)[0] if command.strip() else ""
    return not (rc == 1 and os.path.basename(first) in NO_MATCH_OK)


def gemini_llm_content(body: str, rc: int | None, pgid: int) -> str:
    """What Gemini CLI's shell tool gives the model (and AfterTool's llmContent)."""
    parts = ["Output: %s" % (body or "(empty)")]
    if rc:
        parts.append("Exit Code: %d" % rc)
    parts.append("Process Group PGID: %d" % pgid)
    text = "\n".join(parts).replace("</untrusted_context>", "&lt;/untrusted_context&gt;")
    return "<untrusted_context>\n%s\n</untrusted_context>" % text


def session_of(host: str, chat: str) -> str:
    """The session id `host` gives the chat named `chat` (as it names its chats: a UUID, OpenCode's ses_...)."""
    return "ses_" + _id(host, chat)[:26] if host == "opencode" else _uuid(host, chat)


def chat_events(host: str, rec: dict, cwd: str, chat: str) -> list[dict]:
    """The payloads `host` sends for one chat that asked the run's prompt, made its calls and gave its answer.

    `chat` names the chat (ids are derived from it, so the same chat gets the same ids)."""
    prompt = rec.get("prompt") or ""
    answer = rec.get("answer") or None
    calls = []
    for n, t in enumerate(rec.get("tools") or []):
        inp = t.get("input") if isinstance(t.get("input"), dict) else {"command": str(t.get("input"))}
        rc, body = split_output(t.get("output"))
        calls.append((n, str(inp.get("command", "")), rc, body))
    if host == "codex":
        base = {"session_id": session_of(host, chat), "cwd": cwd,
                "transcript_path": "/home/u/.codex/sessions/2026/12/06/rollout-%s.jsonl" % session_of(host, chat),
                "model": "gpt-5-codex", "permission_mode": "default"}
        turn = _uuid(host, chat, "turn")
        out = [dict(base, hook_event_name="SessionStart", source="startup"),
               dict(base, hook_event_name="UserPromptSubmit", turn_id=turn, prompt=prompt)]
        for n, cmd, rc, body in calls:
            call = dict(base, turn_id=turn, tool_name="Bash", tool_input={"command": cmd}, tool_use_id="call_" + _id(host, chat, str(n))[:24])
            out += [dict(call, hook_event_name="PreToolUse"), dict(call, hook_event_name="PostToolUse", tool_response=body)]
        out.append(dict(base, hook_event_name="Stop", turn_id=turn, stop_hook_active=False, last_assistant_message=answer))
        out.append({k: base[k] for k in ("session_id", "transcript_path", "cwd")} | {"hook_event_name": "SessionEnd", "reason": "other"})
        return out
    if host == "claude":
        session = session_of(host, chat)
        base = {"session_id": session, "transcript_path": "/home/u/.claude/projects/p/%s.jsonl" % session, "cwd": cwd,
                "permission_mode": "default"}
        turn = {"prompt_id": _uuid(host, chat, "prompt")}
        out = [dict(base, hook_event_name="SessionStart", source="startup"),
               dict(base, **turn, hook_event_name="UserPromptSubmit", prompt=prompt)]
        for n, cmd, rc, body in calls:
            call = dict(base, **turn, tool_name="Bash", tool_input={"command": cmd}, tool_use_id="toolu_01" + _id(host, chat, str(n))[:22])
            out.append(dict(call, hook_event_name="PreToolUse"))
            if _claude_fails(cmd, rc):
                out.append(dict(call, hook_event_name="PostToolUseFailure", error="Exit code %d\n%s" % (rc, body), is_interrupt=False))
            else:
                out.append(dict(call, hook_event_name="PostToolUse", tool_response={
                    "stdout": body, "stderr": "", "interrupted": False, "isImage": False, "noOutputExpected": False}))
        out.append(dict(base, **turn, hook_event_name="Stop", stop_hook_active=False, last_assistant_message=answer))
        out.append(dict(base, hook_event_name="SessionEnd", reason="other"))
        return out
    if host == "opencode":  # opencode_plugin.js: {cwd: directory, ...payload, turn_id} (undefined keys dropped by JSON)
        session, message = session_of(host, chat), "msg_" + _id(host, chat, "message")[:26]
        out = [{"cwd": cwd, "hook_event_name": "session.created", "session_id": session},
               {"cwd": cwd, "hook_event_name": "chat.message", "session_id": session, "parts": [{"type": "text", "text": prompt}],
                "turn_id": message}]
        for n, cmd, rc, body in calls:
            call = {"cwd": cwd, "session_id": session, "tool": "bash", "call_id": "call_" + _id(host, chat, str(n))[:24]}
            out.append(dict(call, hook_event_name="tool.execute.before", args={"command": cmd}, turn_id=message))
            out.append(dict(call, hook_event_name="tool.execute.after", args={"command": cmd},
                            output={"title": "", "output": body, "exit": rc or 0}, turn_id=message))
        out.append({"cwd": cwd, "hook_event_name": "session.idle", "session_id": session, "answer": answer, "turn_id": message})
        return out
    if host == "gemini":
        session = session_of(host, chat)
        base = {"session_id": session, "transcript_path": "/home/u/.gemini/tmp/p/chats/session-%s.json" % session, "cwd": cwd,
                "timestamp": "2026-12-06T10:00:00.000Z"}
        out = [dict(base, hook_event_name="SessionStart", source="startup"), dict(base, hook_event_name="BeforeAgent", prompt=prompt)]
        for n, cmd, rc, body in calls:
            call = dict(base, tool_name="run_shell_command", tool_input={"command": cmd})
            out.append(dict(call, hook_event_name="BeforeTool"))
            out.append(dict(call, hook_event_name="AfterTool", tool_response={
                "llmContent": gemini_llm_content(body, rc, 40000 + n), "returnDisplay": body}))
        out.append(dict(base, hook_event_name="AfterAgent", prompt=prompt, prompt_response=answer, stop_hook_active=False))
        out.append(dict(base, hook_event_name="SessionEnd", reason="exit"))
        return out
    raise ValueError("unknown host %r (one of %s)" % (host, ", ".join(HOSTS)))


def expected_turn(host: str, rec: dict) -> tuple[str, list[str], str | None]:
    """(prompt, each call's output, answer) as the store should hold them after `host`'s chat:
    the host's payloads through its adapter, the hook's admission and the built-in redaction
    (a password in an output is stored redacted, by either route), outputs as text."""
    from eggshell.core.redact import redact_payload, rules
    from eggshell.graph.turns import normalize_output
    from eggshell.hosts import registry
    from eggshell.runtime.turnflow import admit

    adapter, builtin = registry.get(host), rules((), ())
    prompt, outputs, answer = "", [], None
    for e in chat_events(host, rec, "/p", "x"):
        ev = admit(adapter.event(e))
        redact_payload(ev, builtin)
        name = ev["hook_event_name"]
        if name == "UserPromptSubmit":
            prompt = ev["prompt"]
        elif name in ("PostToolUse", "PostToolUseFailure"):
            outputs.append(normalize_output(ev.get("tool_response")))
        elif name == "Stop":
            answer = ev.get("last_assistant_message") or None
    return prompt, outputs, answer


# -- recording -------------------------------------------------------------------------------


@dataclass
class Recorded:
    """What one host's recording did (picklable: a worker process sends it back)."""

    host: str
    stores: dict[str, str] = field(default_factory=dict)  # store name -> its .egg
    chats: int = 0
    calls: int = 0  # calls found stored
    events: int = 0  # hook payloads sent
    denied: int = 0  # PreToolUse replies denying a call (the replay sends its result anyway: the run made it)
    write_s: float = 0.0  # recording and checking, this host alone
    problems: list[str] = field(default_factory=list)  # what the check of the stored turns found wrong
    log_lines: list[str] = field(default_factory=list)  # the hooks' own hook.log


def denies(reply: dict) -> bool:
    """Whether a host's reply blocks the proposed call (Codex and Claude Code, Gemini CLI, the OpenCode plugin)."""
    return ((reply.get("hookSpecificOutput") or {}).get("permissionDecision") == "deny" or reply.get("decision") == "deny"
            or bool(reply.get("deny")))


def stored_views(host: str, name: str, path: str, rids: Iterable[str]) -> dict[str, list]:
    """Each run's turns in the store `name` recorded through `host` (one each when all is well), by record id."""
    from eggshell.graph.records import turn_views
    from eggshell.graph.store import Store

    by_session: dict[str, list] = {}
    for v in (turn_views(Store.open(path).graph) if os.path.exists(path) else []):
        by_session.setdefault(v.session, []).append(v)
    return {rid: by_session.get(session_of(host, "%s/%s" % (name, rid)), []) for rid in rids}


def keys_of(view) -> frozenset[str]:
    """The display keys a handoff can name a stored turn or its tool calls by."""
    from eggshell.core.identity import display_key

    return frozenset(display_key(x) for x in (view.id, *(t.id for t in view.tools)))


class HostRecorder:
    """One host's chats, fed to egg-hook's own code in this process, each store a project of its own."""

    def __init__(self, host: str, root: str):
        from eggshell.hosts import registry
        from eggshell.paths import Paths, private_dir

        if host not in HOSTS:
            raise ValueError("unknown host %r (one of %s)" % (host, ", ".join(HOSTS)))
        self.host, self.adapter = host, registry.get(host)
        self.root = private_dir(os.path.join(root, host))
        prefix = os.path.join(self.root, "prefix")
        self.paths = Paths(prefix, private_dir(os.path.join(self.root, "data")), os.path.join(prefix, "config", "eggshell", "config.toml"),
                           os.path.join(self.root, "codex"), os.path.join(REPO, "bin"))
        private_dir(os.path.dirname(self.paths.global_config))
        with open(self.paths.global_config, "w", encoding="utf-8") as f:
            f.write(GLOBAL_CONFIG)
        self.env = {**os.environ, "EGGSHELL_MANAGER": "off", "EGGSHELL_BUDGET_S": "600", "EGGSHELL_BUDGET_END_S": "600"}
        self.env.pop("EGGSHELL_CONFIG", None)
        self.out = Recorded(host)

    def project(self, name: str) -> str:
        """A new project directory with `.eggshell.toml` and `.eggs/` as `egg init` makes them."""
        import contextlib
        import io
        from types import SimpleNamespace

        from eggshell.cli.setup import cmd_init
        from eggshell.paths import private_dir

        d = private_dir(os.path.join(self.root, "projects", name))
        with contextlib.redirect_stdout(io.StringIO()):
            cmd_init(SimpleNamespace(dir=d), self.paths)
        return d

    def send(self, payload: dict, res) -> dict:
        """egg-hook HOST's reply to one payload, with what runs after the reply (saving a sealed turn) done."""
        from eggshell.runtime import hookflow

        reply, after = hookflow.managed(self.adapter, json.dumps(payload), self.paths, time.monotonic(), res=res, env=self.env)
        if after is not None:
            after()
        self.out.events += 1
        return reply

    def record(self, name: str, records: list[dict]) -> str:
        """Each run as one chat of this host in a new project `name`, then checked; the path of its store."""
        from eggshell.runtime import turnflow
        from eggshell.runtime.warm import Resources

        t0 = time.perf_counter()
        cwd = self.project(name)
        res = Resources(self.paths.data_root, self.paths.bin_dir, warm=False, log=turnflow._log(self.paths))
        saved = os.environ.pop("EGGSHELL_CONFIG", None)  # the hook's own environment has none: each project's file decides
        try:
            for rec in records:
                for p in chat_events(self.host, rec, cwd, "%s/%s" % (name, rec.get("id"))):
                    if denies(self.send(p, res)):
                        self.out.denied += 1
                self.out.chats += 1
        finally:
            if saved is not None:
                os.environ["EGGSHELL_CONFIG"] = saved
            res.close()
        path = self.out.stores[name] = os.path.join(cwd, ".eggs", "work.egg")
        self.check(name, path, records)
        self.out.write_s += time.perf_counter() - t0
        return path

    def check(self, name: str, path: str, records: list[dict]) -> None:
        """Each run is one turn of the store: its prompt, every call with the output the host gave, its answer."""
        got = stored_views(self.host, name, path, [str(r.get("id")) for r in records])
        for rec in records:
            rid = str(rec.get("id"))
            if len(got[rid]) != 1:
                self.out.problems.append("%s: run %s stored as %d turns" % (name, rid, len(got[rid])))
                continue
            v = got[rid][0]
            prompt, want, answer = expected_turn(self.host, rec)
            have = [t.outcome for t in v.tools]
            if v.prompt != prompt:
                self.out.problems.append("%s: run %s: the prompt differs" % (name, rid))
            if len(have) != len(want):
                self.out.problems.append("%s: run %s: %d calls stored of %d" % (name, rid, len(have), len(want)))
            elif have != want:
                bad = sum(a != b for a, b in zip(have, want))
                self.out.problems.append("%s: run %s: %d of %d outputs differ from what the host sent" % (name, rid, bad, len(want)))
            if (v.answer or None) != answer:
                self.out.problems.append("%s: run %s: answer %s" % (name, rid, "missing" if not v.answer else "differs"))
            self.out.calls += len(have)

    def finish(self) -> Recorded:
        """`egg fsck` (a process of its own) over every store written; nothing left in the journal or
        quarantined; the hooks' own log."""
        stores = sorted(self.out.stores.values())
        for chunk in (stores[i:i + 200] for i in range(0, len(stores), 200)):
            # bin/egg's own command line, with this interpreter (the environment it runs in)
            env = {**self.env, "EGGSHELL_DATA_ROOT": self.paths.data_root, "EGGSHELL_PREFIX": self.paths.prefix,
                   "PYTHONPATH": os.path.join(REPO, "lib")}
            p = subprocess.run([sys.executable, "-P", "-c", "import sys; from eggshell.__main__ import main; sys.exit(main(sys.argv[1:]))",
                                "egg", "fsck", *chunk], capture_output=True, text=True, env=env, timeout=600)
            bad = [ln for ln in p.stdout.splitlines() if ": ok: " not in ln]
            if p.returncode != 0 or bad or p.stdout.count(": ok: ") != len(chunk):
                self.out.problems.append("egg fsck exit %d: %s" % (p.returncode, "; ".join(bad[:5]) or p.stderr.strip()[:300]))
        for what in ("journal", "quarantine"):
            left = [os.path.join(d, f) for d, _, fs in os.walk(os.path.join(self.paths.data_root, what)) for f in fs]
            if left:
                self.out.problems.append("%d file%s left in the data root's %s/, e.g. %s" % (
                    len(left), "" if len(left) == 1 else "s", what, os.path.relpath(left[0], self.paths.data_root)))
        try:
            with open(self.paths.log_file, encoding="utf-8") as f:
                self.out.log_lines = [ln.rstrip("\n") for ln in f if ln.strip()]
        except FileNotFoundError:
            pass
        return self.out


def record_host(host: str, root: str, jobs: list[tuple[str, list[dict]]], progress: Callable[[int, int], None] | None = None) -> Recorded:
    """Record every (store name, runs) job through `host`'s hooks and check what each store holds."""
    rec = HostRecorder(host, root)
    for n, (name, runs) in enumerate(jobs):
        rec.record(name, runs)
        if progress:
            progress(n + 1, len(jobs))
    return rec.finish()


def record_host_from(host: str, root: str, swe_path: str, jobs: list[tuple[str, list[str]]]) -> Recorded:
    """record_host in a worker process: the runs are read from the swe file by id (not sent over a pipe)."""
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    import eggeval as ev

    by_id = {str(r.get("id")): r for r in ev.read_swe(swe_path)[0]}
    prog = ev.Progress("dayone %s" % host, every=60.0)
    return record_host(host, root, [(name, [by_id[r] for r in rids if r in by_id]) for name, rids in jobs],
                       lambda d, t: prog(d, t, "stores recorded through its hooks"))
