"""`egg install claude` / `egg uninstall claude`: Eggshell's hooks in Claude Code's settings.json.

Claude Code keeps much more than hooks in that file (model, permissions, env with API keys),
so every test checks that nothing but our entries ever changes.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from eggshell.cli import main as cli

from helpers import REPO  # noqa: E402
BIN = os.path.join(REPO, "bin")
HOOK_CMD = "%s claude" % os.path.join(BIN, "egg-hook")
EVENTS = ["SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure", "PreCompact", "PostCompact",
          "Stop", "SessionEnd"]
TOOL_EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure")


class Egg:
    """Runs `egg` in-process with an isolated HOME, prefix and data root, and no CLAUDE_CONFIG_DIR."""

    def __init__(self, tmp, monkeypatch, capsys):
        self.tmp, self.capsys = tmp, capsys
        for k in list(os.environ):
            if k.startswith(("EGGSHELL_", "CODEX_", "CLAUDE_")):
                monkeypatch.delenv(k)
        self.home = tmp / "home"
        self.home.mkdir()
        monkeypatch.setenv("HOME", str(self.home))
        monkeypatch.setenv("EGGSHELL_PREFIX", str(tmp / "prefix"))
        monkeypatch.setenv("EGGSHELL_DATA_ROOT", str(tmp / "data"))
        monkeypatch.setenv("EGGSHELL_BIN", BIN)
        self.settings = self.home / ".claude" / "settings.json"
        monkeypatch.chdir(tmp)

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        rc = cli.main(list(argv))
        cap = self.capsys.readouterr()
        return rc, cap.out, cap.err

    def read(self, path=None) -> dict:
        return json.loads((path or self.settings).read_text())

    def write(self, data, path=None) -> str:
        path = path or self.settings
        path.parent.mkdir(parents=True, exist_ok=True)
        text = data if isinstance(data, str) else json.dumps(data, indent=4)
        path.write_text(text)
        return text


@pytest.fixture
def egg(tmp_path, monkeypatch, capsys):
    return Egg(tmp_path, monkeypatch, capsys)


def ours(data: dict, command: str = HOOK_CMD) -> dict[str, list]:
    """event -> the matchers of its groups that hold our command (None when a group has none)."""
    out: dict[str, list] = {}
    for event, groups in data.get("hooks", {}).items():
        for g in groups if isinstance(groups, list) else []:
            if isinstance(g, dict) and any(isinstance(h, dict) and h.get("command") == command for h in g.get("hooks", [])):
                out.setdefault(event, []).append(g.get("matcher"))
    return out


ONE_EACH = {ev: ["*"] if ev in TOOL_EVENTS else [None] for ev in EVENTS}

OTHERS = {
    "model": "claude-sonnet-4-5",
    "permissions": {"allow": ["Bash(npm test)"], "deny": ["Read(./.env)"]},
    "env": {"ANTHROPIC_API_KEY": "sk-secret"},
    "hooks": {
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "audit-bash"},
                                          {"type": "command", "command": "/old/prefix/bin/egg-hook claude", "timeout": 5}]},
        ],
        "Notification": [{"hooks": [{"type": "command", "command": "notify-send claude"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "'/old/prefix/bin/egg-hook' claude"}]}],
    },
    "statusLine": {"type": "command", "command": "echo hi"},
}
OTHERS_WITHOUT_OURS = {
    **OTHERS,
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit-bash"}]}],
        "Notification": [{"hooks": [{"type": "command", "command": "notify-send claude"}]}],
    },
}


def test_install_into_a_fresh_home(egg):
    rc, out, err = egg("install", "claude")
    assert rc == 0, err
    data = egg.read()
    assert set(data) == {"hooks"} and list(data["hooks"]) == EVENTS
    assert ours(data) == ONE_EACH
    entries = [h for ev in EVENTS for g in data["hooks"][ev] for h in g["hooks"]]
    assert entries == [{"type": "command", "command": HOOK_CMD, "timeout": 30}] * len(EVENTS)
    assert egg.settings.stat().st_mode & 0o777 == 0o600
    assert egg.settings.parent.stat().st_mode & 0o777 == 0o700
    assert out.splitlines()[0] == "wrote   %s: Eggshell hooks for %s" % (egg.settings, ", ".join(EVENTS))
    assert "command: %s" % HOOK_CMD in out and "Next: start a new Claude Code session" in out


def test_install_twice_is_idempotent(egg):
    egg("install", "claude")
    first = egg.settings.read_text()
    rc, out, _ = egg("install", "claude")
    assert rc == 0 and out.startswith("updated %s" % egg.settings)
    assert egg.settings.read_text() == first
    assert sorted(os.listdir(egg.settings.parent)) == ["settings.json"]  # no temp file left behind


def test_install_keeps_every_other_key_and_hook_and_replaces_old_entries(egg):
    egg.write(OTHERS)
    assert egg("install", "claude")[0] == 0
    data = egg.read()
    assert {k: v for k, v in data.items() if k != "hooks"} == {k: v for k, v in OTHERS.items() if k != "hooks"}
    assert data["hooks"]["PreToolUse"][0] == OTHERS_WITHOUT_OURS["hooks"]["PreToolUse"][0]
    assert data["hooks"]["Notification"] == OTHERS["hooks"]["Notification"]
    assert ours(data) == ONE_EACH
    assert ours(data, "/old/prefix/bin/egg-hook claude") == {} and ours(data, "'/old/prefix/bin/egg-hook' claude") == {}
    assert egg.settings.stat().st_mode & 0o777 == 0o600


def test_uninstall_removes_only_ours(egg):
    egg.write(OTHERS)
    egg("install", "claude")
    rc, out, _ = egg("uninstall", "claude")
    assert rc == 0 and "removed %d Eggshell hooks from %s" % (len(EVENTS), egg.settings) in out
    assert egg.read() == OTHERS_WITHOUT_OURS
    rc, out, _ = egg("uninstall", "claude")
    assert rc == 0 and "nothing to do: no Eggshell hooks" in out
    assert egg.read() == OTHERS_WITHOUT_OURS


def test_install_uninstall_round_trip_from_empty(egg):
    egg("install", "claude")
    egg("uninstall", "claude")
    assert egg.read() == {"hooks": {}}


def test_uninstall_without_a_settings_file_creates_nothing(egg):
    rc, out, _ = egg("uninstall", "claude")
    assert rc == 0 and "nothing to do: %s does not exist" % egg.settings in out
    assert not (egg.home / ".claude").exists()


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"hooks": {', "not valid JSON"),
        ('{"model": "x",}', "not valid JSON"),
        ("[]", 'expected {"hooks": {EVENT: [...]}}'),
        ('{"hooks": []}', 'expected {"hooks": {EVENT: [...]}}'),
    ],
)
@pytest.mark.parametrize("command", ["install", "uninstall"])
def test_a_settings_file_that_is_not_valid_json_is_refused_and_left_unchanged(egg, content, message, command):
    egg.write(content)
    before = egg.settings.stat()
    rc, out, err = egg(command, "claude")
    assert rc == 2 and out == ""
    assert err.startswith("egg: %s: " % egg.settings) and message in err and "nothing was changed" in err
    assert egg.settings.read_text() == content
    assert egg.settings.stat().st_mtime_ns == before.st_mtime_ns
    assert sorted(os.listdir(egg.settings.parent)) == ["settings.json"]


def test_an_event_that_is_not_a_list_is_refused(egg):
    content = egg.write({"hooks": {"Stop": {"command": "x"}}})
    rc, _, err = egg("install", "claude")
    assert rc == 2 and err.startswith("egg: %s: " % egg.settings) and '"hooks"."Stop" is not a list' in err
    assert "nothing was changed" in err and egg.settings.read_text() == content


def test_claude_config_dir_is_where_claude_code_reads_settings(egg, monkeypatch, tmp_path):
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-config"))
    assert egg("install", "claude")[0] == 0
    assert ours(egg.read(tmp_path / "claude-config" / "settings.json")) == ONE_EACH
    assert not egg.settings.exists()
    assert egg("uninstall", "claude")[0] == 0
    assert ours(egg.read(tmp_path / "claude-config" / "settings.json")) == {}


def test_a_blank_claude_config_dir_means_the_default(egg, monkeypatch):
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", "  ")
    assert egg("install", "claude")[0] == 0
    assert ours(egg.read()) == ONE_EACH


def test_settings_option_wins(egg, monkeypatch, tmp_path):
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-config"))
    project_settings = tmp_path / "proj" / ".claude" / "settings.local.json"
    egg.write({"permissions": {"allow": ["Read"]}}, project_settings)
    rc, out, _ = egg("install", "claude", "--settings", str(project_settings))
    assert rc == 0 and str(project_settings) in out
    assert ours(egg.read(project_settings)) == ONE_EACH and egg.read(project_settings)["permissions"] == {"allow": ["Read"]}
    assert not (tmp_path / "claude-config").exists() and not egg.settings.exists()
    assert egg("uninstall", "claude", "--settings", str(project_settings))[0] == 0
    assert egg.read(project_settings) == {"permissions": {"allow": ["Read"]}, "hooks": {}}


def test_a_symlinked_settings_file_stays_a_link(egg, tmp_path):
    real = tmp_path / "dotfiles" / "claude-settings.json"
    egg.write({"model": "opus"}, real)
    egg.settings.parent.mkdir(parents=True)
    egg.settings.symlink_to(real)
    assert egg("install", "claude")[0] == 0
    assert egg.settings.is_symlink() and ours(egg.read(real)) == ONE_EACH and egg.read(real)["model"] == "opus"


@pytest.mark.parametrize("argv, message", [
    (["install", "claude", "--codex-home", "/x"], "--codex-home is for codex"),
    (["uninstall", "claude", "--codex-home", "/x"], "--codex-home is for codex"),
    (["install", "codex", "--settings", "/x.json"], "--settings is for claude"),
])
def test_the_other_hosts_option_is_refused(egg, argv, message):
    rc, _, err = egg(*argv)
    assert rc == 2 and message in err
    assert not (egg.home / ".claude").exists() and not os.path.exists("/x.json")


def test_codex_and_claude_installs_are_independent(egg, monkeypatch, tmp_path):
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex"))
    assert egg("install", "codex")[0] == 0 and egg("install", "claude")[0] == 0
    assert egg("uninstall", "claude")[0] == 0
    codex = json.loads((tmp_path / "codex" / "hooks.json").read_text())
    assert ours(codex, "%s codex" % os.path.join(BIN, "egg-hook")) and ours(egg.read()) == {}


def test_the_written_command_runs_with_the_claude_host(egg, monkeypatch, tmp_path):
    bin_dir = tmp_path / "my tools" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "egg-hook").write_text('#!/bin/sh\nprintf \'{"argv":"%s"}\\n\' "$*"\n')
    (bin_dir / "egg-hook").chmod(0o755)
    monkeypatch.setenv("EGGSHELL_BIN", str(bin_dir))
    assert egg("install", "claude")[0] == 0
    cmd = "'%s/egg-hook' claude" % bin_dir
    assert ours(egg.read(), cmd) == ONE_EACH
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True, input="{}")  # as Claude Code runs it
    assert r.returncode == 0 and json.loads(r.stdout) == {"argv": "claude"}


def test_install_needs_the_hook_command(egg, monkeypatch, tmp_path):
    monkeypatch.setenv("EGGSHELL_BIN", str(tmp_path))
    rc, _, err = egg("install", "claude")
    assert rc == 2 and "egg-hook is missing or not executable" in err and "./install.sh" in err
    assert not egg.settings.exists()


def test_help_names_claude_and_its_option(egg):
    with pytest.raises(SystemExit) as e:
        egg("install", "--help")
    assert e.value.code == 0
    out = egg.capsys.readouterr().out
    assert "{codex,claude,gemini,opencode,cursor}" in out and "--settings PATH" in out and "CLAUDE_CONFIG_DIR" in out
