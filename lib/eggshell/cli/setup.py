"""Setting up: `egg init` (a project) and `egg install` / `egg uninstall` (a host's hooks).

What a host's hooks file is and which events it needs is the host's (hosts/); editing the
file safely is here: other hooks are kept, the file is replaced atomically, 0600.
"""

from __future__ import annotations

import json
import os
import shlex

from eggshell import config as _config
from eggshell.cli.common import CliError, say
from eggshell.graph import ignorefile
from eggshell.hosts import registry
from eggshell.hosts.base import Host
from eggshell.paths import PROJECT_CONFIG, Paths, private_dir, store_problem


def cmd_init(a, paths: Paths) -> int:
    root = os.path.abspath(a.dir)
    if not os.path.isdir(root):
        raise CliError("%s is not a directory" % root)
    cfg_path = os.path.join(root, PROJECT_CONFIG)
    if os.path.exists(cfg_path):
        say("kept     %s (already there)" % cfg_path)
    else:
        with open(cfg_path, "x", encoding="utf-8") as f:
            f.write(_config.PROJECT_TEMPLATE)
        say("wrote    %s" % cfg_path)
    # The project's own file decides here, even when EGGSHELL_CONFIG names another one.
    cfg = _config.load(paths, root, env={k: v for k, v in os.environ.items() if k != "EGGSHELL_CONFIG"})
    target = cfg.write_egg or cfg.egg_paths[_config.PROJECT_EGG]
    eggs_dir = os.path.dirname(target)
    why = store_problem(target)  # a .eggs/ that is a link (a repository's, to .git/hooks/): write nothing through it
    if why is not None:
        raise CliError(why)
    existed = os.path.isdir(eggs_dir)
    private_dir(eggs_dir)
    say("%s %s/" % ("kept    " if existed else "created ", eggs_dir))
    if ignorefile.write_at(eggs_dir, ignorefile.INIT_TEXT):  # the hooks write one into a .eggs/ they make, too
        say("wrote    %s" % os.path.join(eggs_dir, ignorefile.NAME))
    if cfg.write_egg is not None:
        say("Eggshell will record turns run in %s to %s." % (root, os.path.relpath(cfg.write_egg, root)))
    else:
        say("The default profile %r records nothing; `egg use work` in a chat (or default = \"work\") records to %s."
            % (cfg.default, os.path.relpath(target, root)))
    say("Next: `egg install codex` (once per machine), then review the hooks in Codex with /hooks.")
    return 0


def _read_hooks(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return {}
    except ValueError as e:
        raise CliError("%s: not valid JSON (%s); fix or move it, then run this again (nothing was changed)" % (path, e))
    if not isinstance(data, dict) or not isinstance(data.get("hooks", {}), dict):
        raise CliError('%s: expected {"hooks": {EVENT: [...]}}; nothing was changed' % path)
    return data


def _is_ours(hook: object) -> bool:
    if not isinstance(hook, dict) or not isinstance(hook.get("command"), str):
        return False
    try:
        argv = shlex.split(hook["command"])
    except ValueError:
        return False
    return bool(argv) and os.path.basename(argv[0]) == "egg-hook"


def _without_ours(data: dict) -> tuple[dict, int]:
    """The hooks config with every egg-hook entry removed, and how many were removed."""
    removed = 0
    hooks = {}
    for event, groups in data.get("hooks", {}).items():
        if not isinstance(groups, list):
            hooks[event] = groups
            continue
        kept_groups = []
        for g in groups:
            if _is_ours(g):  # a flat entry (Cursor's {"command": ...})
                removed += 1
            elif isinstance(g, dict) and isinstance(g.get("hooks"), list):
                kept = [h for h in g["hooks"] if not _is_ours(h)]
                removed += len(g["hooks"]) - len(kept)
                if kept:
                    kept_groups.append({**g, "hooks": kept})
            else:
                kept_groups.append(g)
        if kept_groups:
            hooks[event] = kept_groups
    out = {**data, "hooks": hooks}
    return out, removed


def _write_text(path: str, text: str) -> None:
    """Replace the file atomically, 0600; a symlinked file (dotfiles) is written where it points,
    so the link survives."""
    path = os.path.realpath(path)
    private_dir(os.path.dirname(path))
    tmp = "%s.tmp-%d" % (path, os.getpid())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _write_json(path: str, data: dict) -> None:
    """Replace the file atomically, 0600 (Claude's settings can hold API keys in `env`)."""
    _write_text(path, json.dumps(data, indent=2) + "\n")


def _add_groups(path: str, data: dict, groups: dict[str, dict]) -> None:
    hooks = data["hooks"]
    for event, group in groups.items():
        existing = hooks.setdefault(event, [])
        if not isinstance(existing, list):
            raise CliError('%s: "hooks"."%s" is not a list; fix or remove it, then run this again (nothing was changed)' % (path, event))
        existing.append(group)


def _target(a, paths: Paths) -> tuple[Host, str]:
    """The host and the file to edit; another host's option is a mistake, not something to ignore."""
    host = registry.get(a.host)
    given = None
    for other in registry.every():
        value = getattr(a, other.option.lstrip("-").replace("-", "_"), None)
        if value and other is not host:
            raise CliError("%s is for %s; %s names %s's file" % (other.option, other.name, host.option, host.label))
        if other is host:
            given = value
    return host, host.settings_file(paths, os.environ, given)


def _read_plugin(host: Host, path: str) -> str | None:
    """A plugin host's file as it is (None: there is none); someone else's file there is not ours to replace."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise CliError("%s cannot be read (%s); nothing was changed" % (path, e))
    if host.plugin_command(text) is None:
        raise CliError("%s exists and was not written by Eggshell; move it away, then run this again (nothing was changed)" % path)
    return text


def cmd_install(a, paths: Paths) -> int:
    host, path = _target(a, paths)
    hook_bin = os.path.join(paths.bin_dir, "egg-hook")
    if not os.access(hook_bin, os.X_OK):
        raise CliError("%s is missing or not executable; run ./install.sh first" % hook_bin)
    if host.plugin:  # a plugin relays the host's hooks: the file is Eggshell's alone
        old = _read_plugin(host, path)
        _write_text(path, host.plugin_source(hook_bin))
        say("%s %s: the Eggshell plugin for %s, relaying %s" % ("updated" if old is not None else "wrote  ", path,
                                                                host.label, ", ".join(host.events)))
        say("command: %s %s" % (shlex.quote(hook_bin), host.name))
        say(host.next_step)
        return 0
    data, removed = _without_ours(_read_hooks(path))
    data = {**host.hooks_file_defaults, **data}
    command = "%s %s" % (shlex.quote(hook_bin), host.name)
    groups = host.hook_groups(command)
    _add_groups(path, data, groups)
    _write_json(path, data)
    say("%s %s: Eggshell hooks for %s" % ("updated" if removed else "wrote  ", path, ", ".join(groups)))
    say("command: %s" % command)
    say(host.next_step)
    return 0


def cmd_uninstall(a, paths: Paths) -> int:
    host, path = _target(a, paths)
    if not os.path.exists(path):
        say("nothing to do: %s does not exist" % path)
        return 0
    if host.plugin:
        _read_plugin(host, path)
        os.unlink(path)
        say("removed %s (the Eggshell plugin for %s); %s loads it no more from its next start" % (path, host.label, host.label))
        return 0
    data, removed = _without_ours(_read_hooks(path))
    if not removed:
        say("nothing to do: no Eggshell hooks in %s" % path)
        return 0
    _write_json(path, data)
    say("removed %d Eggshell hook%s from %s; other hooks were kept" % (removed, "" if removed == 1 else "s", path))
    return 0
