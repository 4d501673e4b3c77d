"""`egg doctor` (and `!egg doctor`): every check of the install, the hosts, the config and the data root.

Each check returns ("ok" | "FAIL" | "WARN" | "note", text) or None where it does not apply; a
check that crashes is reported as a FAIL of its own, so the doctor always finishes. Only a FAIL
makes the doctor exit 1: a WARN is something to fix that Eggshell's hooks work without.
"""

from __future__ import annotations

import os
import shlex
import shutil
from dataclasses import dataclass
from typing import Callable, Mapping

from eggshell import config as _config
from eggshell.cli.common import count, say
from eggshell.hosts import registry
from eggshell.hosts.base import Host
from eggshell.paths import Paths


@dataclass(frozen=True, slots=True)
class Checkup:
    """What the doctor's checks look at."""

    paths: Paths
    cwd: str
    env: Mapping[str, str]


Check = Callable[[Checkup], tuple[str, str]]  # -> ("ok" | "FAIL" | "WARN" | "note", text)


def check_hook_bin(c: Checkup) -> tuple[str, str]:
    p = os.path.join(c.paths.bin_dir, "egg-hook")
    if os.path.isfile(p) and os.access(p, os.X_OK):
        return "ok", "egg-hook is installed at %s" % p
    return "FAIL", "egg-hook is missing or not executable at %s: run ./install.sh" % p


def _registered(path: str) -> tuple[dict[str, list] | None, str]:
    """The events whose hooks run egg-hook in a hooks/settings file, each with the timeouts its
    egg-hook entries give (None: unreadable)."""
    import json

    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return None, "does not exist"
    except (OSError, ValueError) as e:
        return None, "cannot be read (%s)" % e
    hooks = data.get("hooks") if isinstance(data, dict) else None
    events: dict[str, list] = {}
    for event, groups in (hooks.items() if isinstance(hooks, dict) else ()):
        for g in groups if isinstance(groups, list) else ():
            flat = isinstance(g, dict) and "command" in g  # Cursor's entries: no groups
            for h in ([g] if flat else g.get("hooks") if isinstance(g, dict) and isinstance(g.get("hooks"), list) else ()):
                cmd = h.get("command") if isinstance(h, dict) else None
                try:
                    argv = shlex.split(cmd) if isinstance(cmd, str) else []
                except ValueError:
                    argv = []
                if argv and os.path.basename(argv[0]) == "egg-hook":
                    events.setdefault(event, []).append(h.get("timeout"))
    return events, ""


def host_check(host: Host) -> Check:
    """A host's hooks file runs egg-hook for every event `egg install` registers.

    A required host (Codex) fails without it; another is only reported where its file exists.
    """

    def check(c: Checkup) -> tuple[str, str] | None:
        path = host.settings_file(c.paths, c.env, None)
        install = "run `egg install %s`" % host.name
        if host.plugin:
            return _plugin_check(host, path, c, install)
        events, why = _registered(path)
        if events is None:
            if host.required:
                return "FAIL", "%s hooks: %s %s: %s" % (host.label, path, why, install)
            found = _found(host, c)
            if found is None:
                return None  # not on this machine, and never set up: nothing to say
            return "note", "%s is on this machine (%s), without Eggshell: %s %s; %s to record its chats" % (
                host.label, found, path, why, install)
        missing = [e for e in host.events if e not in events]
        if missing:
            return ("FAIL" if host.required else "note", "%s hooks: %s lacks egg-hook for %s: %s" % (host.label, path, ", ".join(missing), install))
        seconds = [(e, t / host.timeout_scale) for e, ts in events.items() if e in host.timeout_limits
                   for t in ts if isinstance(t, (int, float)) and not isinstance(t, bool)]
        clamped = ["%s %g s (at most %d s)" % (e, t, host.timeout_limits[e]) for e, t in seconds if t > host.timeout_limits[e]]
        if clamped:  # it still runs (cut down), but Codex warns of it in every chat
            return "WARN", ("%s hooks: %s gives egg-hook more time than %s allows, so it is cut down: %s; %s, which "
                            "writes what it allows" % (host.label, path, host.label, ", ".join(clamped), install))
        return "ok", "%s hooks: %s runs egg-hook for %s" % (host.label, path, ", ".join(host.events))

    check.__name__ = "check_%s_hooks" % host.name
    return check


def _found(host: Host, c: Checkup) -> str | None:
    return shutil.which(host.binary, path=c.env.get("PATH")) if host.binary else None


def _plugin_check(host: Host, path: str, c: Checkup, install: str) -> tuple[str, str] | None:
    """A plugin host (OpenCode): Eggshell's plugin is in its plugin folder and runs an egg-hook that is there."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        found = _found(host, c)
        if found is None:
            return None
        return "note", "%s is on this machine (%s), without Eggshell: %s does not exist; %s to record its chats" % (
            host.label, found, path, install)
    except (OSError, ValueError) as e:
        return "WARN", "%s plugin: %s cannot be read (%s): %s" % (host.label, path, e, install)
    command = host.plugin_command(text)
    if command is None:
        return "WARN", "%s plugin: %s was not written by Eggshell: move it away, then %s" % (host.label, path, install)
    if not (os.path.isfile(command) and os.access(command, os.X_OK)):
        return "WARN", "%s plugin: %s runs %s, which is missing or not executable: %s" % (host.label, path, command, install)
    return "ok", "%s plugin: %s relays %s to %s" % (host.label, path, ", ".join(host.events), command)


def host_notes(c: Checkup) -> tuple[str, str] | None:
    notes = [h.doctor_note for h in registry.every() if h.doctor_note and h.required]
    return ("note", "; ".join(notes)) if notes else None


def check_config(c: Checkup) -> tuple[str, str]:
    try:
        cfg = _config.load(c.paths, c.cwd, env=c.env)
    except _config.ConfigError as e:
        return "FAIL", "config: %s" % e
    if cfg.project_root is None:
        return "note", "config loads (%s); no project here: `egg init` starts recording one" % (", ".join(cfg.sources) or "defaults")
    return "ok", "config loads: %s (default profile %s)" % (", ".join(cfg.sources), cfg.default)


def check_model(c: Checkup) -> tuple[str, str]:
    """The semantic matcher in force (search/installed.py): the built-in model and its directory, the
    program semantic_matcher names, or lexical only and why; FAIL when the one asked for cannot run."""
    from eggshell.search import installed

    try:
        cfg, how = _config.load(c.paths, c.cwd, env=c.env), ""
    except _config.ConfigError:
        cfg, how = _config.Config(), " (under the built-in settings: the config does not load)"
    m = installed.in_force(cfg, c.paths.prefix)
    if m.problem is not None:
        return "FAIL", "semantic matcher: %s; until then prompts are matched lexically only%s" % (m.problem, how)
    return "ok", "semantic matcher: %s%s" % (m.text, how)


DROPS_WINDOW_S = 24 * 3600
LOG_TAIL_BYTES = 512 * 1024


def check_semantic_drops(c: Checkup, now: float | None = None) -> tuple[str, str] | None:
    """Prompts answered lexically in the last day because the semantic side failed (a deadline,
    a crash): each is a line of hook.log; what is dropped is said, never silent."""
    import calendar
    import time

    from eggshell.search.searcher import DROPPED_NOTE

    try:
        with open(c.paths.log_file, "rb") as f:
            f.seek(max(0, os.path.getsize(c.paths.log_file) - LOG_TAIL_BYTES))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    since = (time.time() if now is None else now) - DROPS_WINDOW_S
    drops = []
    for line in lines:
        if DROPPED_NOTE not in line:
            continue
        try:
            when = calendar.timegm(time.strptime(line[:20], "%Y-%m-%dT%H:%M:%SZ"))
        except ValueError:
            continue
        if when >= since:
            drops.append(line)
    if not drops:
        return None
    return "WARN", ("semantic side dropped %s in the last 24 h, those prompts matched lexically only (last: %s); see %s "
                    "and docs/troubleshooting.md" % (count(len(drops), "time"), drops[-1][21:][:300], c.paths.log_file))


def check_data_root(c: Checkup) -> tuple[str, str]:
    d = c.paths.data_root
    probe = d
    while not os.path.exists(probe) and os.path.dirname(probe) != probe:
        probe = os.path.dirname(probe)
    if os.path.isdir(probe) and os.access(probe, os.W_OK | os.X_OK):
        return "ok", "data root %s is writable%s" % (d, "" if probe == d else " (it will be created)")
    return "FAIL", "data root %s is not writable (%s): fix its permissions or set EGGSHELL_DATA_ROOT" % (d, probe)


def check_manager(c: Checkup) -> tuple[str, str]:
    """The warm manager answers, and the save queue is not stuck."""
    import time

    from eggshell.runtime.client import LOG, request, run_dir
    from eggshell.runtime.journal import Journal

    files = Journal(c.paths.journal_dir).files()
    stale = [f for f in files if _sealed_for(f) > 120]
    trouble = manager_trouble(c.paths.data_root)
    if trouble is not None:
        return "FAIL", "warm manager: %s; %d turn%s journaled (saved once a manager serves)" % (
            trouble, len(files), "" if len(files) == 1 else "s")
    r = request(c.paths.data_root, {"op": "ping"}, timeout=2.0)
    log = os.path.join(run_dir(c.paths.data_root), LOG)
    crash = ""
    if os.path.isfile(log) and os.path.getsize(log):
        with open(log, "rb") as f:
            f.seek(max(0, os.path.getsize(log) - 400))
            crash = f.read().decode("utf-8", "replace").strip().splitlines()[-1:]
            crash = " (last line of %s: %s)" % (log, crash[0]) if crash else ""
    if stale:
        return "FAIL", ("%d finished turn%s waiting over 2 minutes to be saved (%s); the manager %s%s: see %s, then run a "
                        "prompt (it restarts the manager) or `egg keep` in that chat") % (
            len(stale), "" if len(stale) == 1 else "s", stale[0], "is not running" if r is None else "is stuck", crash,
            c.paths.log_file)
    if r is None:
        return "note", "warm manager: not running (the next hook starts one)%s; %d turn%s journaled" % (
            crash, len(files), "" if len(files) == 1 else "s")
    return "ok", "warm manager: pid %d, up %.0f s, %.0f MB resident, %s, %s journaled (checked at %s)" % (
        r.get("pid", 0), r.get("uptime_s", 0), r.get("rss_kb", 0) / 1024, count(r.get("requests", 0), "request"),
        count(len(files), "turn"), time.strftime("%H:%M:%S"))


def manager_trouble(data_root: str) -> str | None:
    """Why hooks answer without the manager though one could serve, with the fix; None if nothing is wrong.

    A stopped or hung manager, a socket directory that is not this user's alone, something
    other than a socket at the socket's path, another user's process listening there, or a
    manager that refused to serve: each makes every hook answer cold (fast, and logged).
    """
    import time

    from eggshell.runtime import client

    run = client.run_dir(data_root)
    noted = client.unresponsive(run)
    state = client.proc_state(noted[0]) if noted is not None else None
    if noted is not None and state in ("T", "t"):
        return ("pid %d is stopped (state %s in /proc/%d/stat), so hooks answer without it: `kill -CONT %d` resumes it, "
                "`kill %d` ends it (the next hook starts a new one)" % (noted[0], state, noted[0], noted[0], noted[0]))
    if noted is not None and state not in (None, "Z", "X"):
        return ("pid %d accepted a hook %.0f s ago and said nothing (state %s in /proc/%d/stat): it is hung; `kill %d` "
                "(the next hook starts a new one)" % (noted[0], time.time() - noted[1], state, noted[0], noted[0]))
    why = client.refused(run)
    if why is not None:
        return "the last manager started refused to serve: %s (the next try is at most %.0f s after it)" % (why[0], client.REFUSED_S)
    try:
        client.reach(data_root, time.monotonic() + 2.0).close()
    except client.NoManager as e:
        return str(e) or None
    return None


def check_store_lock(c: Checkup) -> tuple[str, str] | None:
    """The project's store is not locked by another process (the manager's saves would wait for it)."""
    try:
        cfg = _config.load(c.paths, c.cwd, env=c.env)
    except _config.ConfigError:
        return None  # check_config says why
    egg = cfg.write_egg
    if egg is None or not os.path.exists(egg + ".lock"):
        return None
    holders = _held_by(egg + ".lock")
    if not holders:
        return "ok", "store lock %s.lock is free" % egg
    who = ", ".join("pid %d (%s)" % (p, _cmdline(p)) for p in holders)
    return "FAIL", ("store lock %s.lock is held by %s: saves wait for it (the manager tries again every few seconds, the "
                    "turns stay journaled); if that process is stuck, end it (`kill PID`)" % (egg, who))


def _held_by(lock_path: str, settle_s: float = 0.5) -> list[int]:
    """Processes holding `lock_path` locked for all of `settle_s` (a commit holds it for milliseconds)."""
    import time

    import portalocker

    deadline = time.monotonic() + settle_s
    with open(lock_path, "rb") as f:
        while True:
            try:
                portalocker.lock(f, portalocker.LOCK_EX | portalocker.LOCK_NB)
                portalocker.unlock(f)
                return []
            except portalocker.LockException:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.02)
        ino = os.fstat(f.fileno()).st_ino
    pids = []
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            for line in f:
                parts = line.split()
                if "->" not in parts and len(parts) > 5 and parts[5].rsplit(":", 1)[-1] == str(ino):
                    pids.append(int(parts[4]))
    except (OSError, ValueError):
        pass
    return sorted(set(pids)) or [-1]


def _cmdline(pid: int) -> str:
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()[:80] or "?"
    except OSError:
        return "unknown"


def _sealed_for(path: str) -> float:
    """Seconds since a journaled turn that should be saved was sealed (0: open, or read-only)."""
    import time

    from eggshell.runtime.commits import target
    from eggshell.runtime.journal import Journal, sealed

    events = Journal(os.path.dirname(os.path.dirname(path))).read_file(path)
    write, _, named = target(events)
    if sealed(events) is None or (named and write is None):
        return 0.0  # a read-only turn waits for `egg keep` (or expires), it is not stuck
    try:
        return time.time() - os.stat(path).st_mtime
    except OSError:
        return 0.0


def check_store_trust(c: Checkup) -> tuple[str, str] | None:
    """Which of the project's stores may complete calls (trust.py): a cloned repository's store is advice only."""
    from eggshell.graph import trust
    from eggshell.graph.store import EggError, Store

    ledger = trust.load(c.paths.data_root)
    if ledger.problem is not None:
        return "FAIL", ("%s. No store is trusted: prior work is advice only and never stands in for a call. Move it aside "
                        "(`mv %s %s.damaged`) and `egg trust` each store of yours again" % (ledger.problem, ledger.path, ledger.path))
    try:
        cfg = _config.load(c.paths, c.cwd, env=c.env)
    except _config.ConfigError:
        return None  # check_config says why
    said, doubt = [], False
    for p in cfg.read_eggs:
        if not os.path.exists(p):
            continue
        try:
            g = Store.open(p).graph
        except EggError:
            continue  # `egg fsck` reports damage
        said.append("%s: %s" % (trust.shown_path(p), trust.describe(trust.shown_path(p), g, ledger)))
        doubt = doubt or trust.vouched(g, ledger) < len(g.commits)
    if not said:
        return None
    return ("note" if doubt else "ok"), "stores: " + "; ".join(said)


def check_quarantine(c: Checkup) -> tuple[str, str] | None:
    """What could not be stored is kept aside; the user should know it exists: whole turns (a
    warning: `egg recover` may save them now) and single events (a note: read, then delete)."""
    from eggshell.runtime import quarantine

    said, level = [], None
    held = quarantine.held_turns(c.paths.data_root)
    if held:
        level = "WARN"
        said.append("%d turn%s could not be saved and %s kept whole in %s (last reason: %s): run `egg recover`, which "
                    "saves what it can and says why for the rest" % (len(held), "" if len(held) == 1 else "s",
                                                                     "is" if len(held) == 1 else "are",
                                                                     quarantine.turns_dir(c.paths.data_root), held[-1].reason))
    q = quarantine.path(c.paths.data_root)
    try:
        with open(q, "rb") as f:
            n = sum(1 for _ in f)
    except OSError:
        n = 0
    if n:
        level = level or "note"
        said.append("%d hook event%s could not be stored and %s kept in %s (the rest of each turn was recorded): "
                    "read it, then delete it" % (n, "" if n == 1 else "s", "is" if n == 1 else "are", q))
    return (level, "; ".join(said)) if said else None


def check_telemetry_leftover(c: Checkup) -> tuple[str, str] | None:
    """~/.cache/Microsoft is what onnxruntime's telemetry writes (a device id); Eggshell keeps it
    off, so one found here was left by an older Eggshell or another program using onnxruntime."""
    home = c.env.get("HOME") or os.path.expanduser("~")
    d = os.path.join(c.env.get("XDG_CACHE_HOME") or os.path.join(home, ".cache"), "Microsoft")
    if not os.path.isdir(d):
        return None
    return "note", ("%s exists: onnxruntime telemetry (a device id, an event store) written by another program or an "
                    "Eggshell before 2 Dec 2026 (its install.sh); Eggshell runs with it off (ORT_DISABLE_TELEMETRY=1): delete it" % d)


LOGIN_SHELL_TIMEOUT_S = 3.0
PATH_MARK = "# added by Eggshell install.sh"  # install.sh ends its profile line with it


def login_shell(env: Mapping[str, str]) -> tuple[str, str] | None:
    """(family, executable) of the login shell Codex runs `!egg` in: $SHELL's zsh or fish, else bash."""
    shell = env.get("SHELL") or ""
    family = os.path.basename(shell)
    if family in ("zsh", "fish"):
        exe = shell if os.access(shell, os.X_OK) else shutil.which(family, path=env.get("PATH") or os.defpath)
        if exe:
            return family, exe
    exe = shutil.which("bash", path=env.get("PATH") or os.defpath)
    return ("bash", exe) if exe else None


def login_profile(family: str, env: Mapping[str, str]) -> str:
    """The file install.sh puts the PATH line in: the one a login shell of `family` reads (bash: the first that exists)."""
    home = env.get("HOME") or os.path.expanduser("~")
    if family == "bash":
        for name in (".bash_profile", ".bash_login", ".profile"):
            if os.path.exists(os.path.join(home, name)):
                return os.path.join(home, name)
        return os.path.join(home, ".profile")
    if family == "zsh":
        return os.path.join(env.get("ZDOTDIR") or home, ".zprofile")
    if family == "fish":
        return os.path.join(env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config"), "fish", "conf.d", "eggshell.fish")
    return os.path.join(home, ".profile")


def path_line(family: str, bin_dir: str, env: Mapping[str, str]) -> str:
    """The line install.sh appends for `bin_dir`, byte for byte (under $HOME it is written as $HOME/...)."""
    special = '\\"$' if family == "fish" else '\\"$`'

    def quoted(s: str) -> str:
        return "".join("\\" + ch if ch in special else ch for ch in s)

    home = (env.get("HOME") or "").rstrip("/")
    shown = "$HOME/" + quoted(bin_dir[len(home) + 1:]) if home and bin_dir.startswith(home + "/") else quoted(bin_dir)
    if family == "fish":
        return 'set -gx PATH "%s" $PATH  %s' % (shown, PATH_MARK)
    return 'export PATH="%s:$PATH"  %s' % (shown, PATH_MARK)


def _login_lookup(exe: str, env: Mapping[str, str], timeout: float) -> tuple[str | None, str]:
    """What `exe -lc 'command -v egg'` prints (None: it did not get there, and why).

    The output goes to files, not pipes, and the shell runs in a session of its own that a
    timeout kills whole: a profile that waits, or leaves something running, cannot hold the doctor.
    """
    import signal
    import subprocess
    import tempfile

    script = "echo eggshell-begin; command -v egg; echo eggshell-end"
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            p = subprocess.Popen([exe, "-lc", script], stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                 env=dict(env), start_new_session=True)
        except OSError as e:
            return None, "cannot be started (%s)" % e
        try:
            rc = p.wait(timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
            p.wait()
            return None, "did not get to `command -v egg` within %g s (a slow profile, or one waiting for input)" % timeout
        out.seek(0)
        err.seek(0)
        text = out.read().decode("utf-8", "replace")
        last = err.read().decode("utf-8", "replace").strip().splitlines()[-1:]
    lines = text.splitlines()
    if "eggshell-begin" not in lines or "eggshell-end" not in lines[lines.index("eggshell-begin"):]:
        return None, "stopped (exit %d) before `command -v egg` finished%s" % (rc, " (its last error: %s)" % last[0] if last else "")
    found = lines[lines.index("eggshell-begin") + 1:len(lines) - 1 - lines[::-1].index("eggshell-end")]
    return "\n".join(found).strip(), ""


def check_login_shell(c: Checkup, timeout: float = LOGIN_SHELL_TIMEOUT_S) -> tuple[str, str] | None:
    """Which egg a login shell finds: Codex runs `!egg` in one, and its profile sets PATH afresh,
    so the PATH the doctor itself runs with says nothing about it."""
    shell = login_shell(c.env)
    if shell is None:
        return None
    family, exe = shell
    mine = os.path.join(c.paths.bin_dir, "egg")
    found, why = _login_lookup(exe, c.env, timeout)
    how = "a login shell (`%s -lc`, as Codex runs `!egg`)" % family
    profile = login_profile(family, c.env)
    if found is None:
        return "note", "%s %s: see %s" % (how, why, profile)
    if found and os.path.realpath(found) == os.path.realpath(mine):
        return "ok", "%s finds %s" % (how, found)
    line = path_line(family, c.paths.bin_dir, c.env)
    if not found:
        return "WARN", "%s finds no egg: run ./install.sh again, or add this line to the end of %s: %s" % (how, profile, line)
    return "WARN", "%s finds another egg, %s, not %s: add this line to the end of %s: %s" % (how, found, mine, profile, line)


DOCTOR_CHECKS: tuple[Callable[[Checkup], tuple[str, str] | None], ...] = (
    check_hook_bin, *(host_check(h) for h in registry.every()), host_notes, check_config, check_model, check_semantic_drops, check_data_root,
    check_manager, check_store_lock, check_store_trust, check_quarantine, check_telemetry_leftover, check_login_shell,
)


def checkup(c: Checkup, checks=DOCTOR_CHECKS) -> list[tuple[str, str]]:
    """Run each check (None: not applicable here); a check that crashes is a FAIL of its own."""
    out = []
    for check in checks:
        try:
            r = check(c)
        except Exception as e:  # a doctor must report, not crash
            r = ("FAIL", "%s crashed: %s: %s" % (check.__name__, type(e).__name__, e))
        if r is not None:
            out.append(r)
    return out


def cmd_doctor(a, paths: Paths, env: Mapping[str, str] | None = None) -> int:
    results = checkup(Checkup(paths, os.getcwd(), os.environ if env is None else env))
    say("\n".join("%-4s %s" % r for r in results))
    return 1 if any(s == "FAIL" for s, _ in results) else 0
