"""chat.py: one chat's control state (on/off, profile, one-turn profile, last handoff, dropped turns)."""

from __future__ import annotations

import json
import multiprocessing
import os

import pytest
from hypothesis import given, strategies as st

from eggshell.runtime import chat as chat_mod
from eggshell import config
from eggshell.runtime.chat import MAX_DROPPED, Chat, ChatBusy, ChatControl, control_path
from eggshell.config import Selection
from eggshell.reuse.delivery import Deliveries
from eggshell.paths import PROJECT_CONFIG, Paths


@pytest.fixture
def paths(tmp_path):
    prefix = tmp_path / "prefix"
    return Paths(str(prefix), str(tmp_path / "data"), str(prefix / "config" / "eggshell" / "config.toml"),
                 str(tmp_path / "codex"), str(tmp_path / "bin"))


@pytest.fixture
def cfg(paths, tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / PROJECT_CONFIG).write_text(config.PROJECT_TEMPLATE + '\n[profiles.lean]\nread = ["project"]\nhandoff_chars = 400\n')
    return config.load(paths, str(proj), env={})


@pytest.fixture
def logs():
    return []


@pytest.fixture
def chat(paths, logs):
    return Chat(paths.state_dir, "sess-1", logs.append)


def corrupt(chat: Chat, data: bytes = b"{not json") -> None:
    os.makedirs(os.path.dirname(chat.path), exist_ok=True)
    with open(chat.path, "wb") as f:
        f.write(data)


def quarantined(chat: Chat) -> list[str]:
    base = os.path.basename(chat.path)
    return sorted(n for n in os.listdir(os.path.dirname(chat.path)) if n.startswith(base + ".corrupt-"))


# -- the file --------------------------------------------------------------------------------------


def test_a_missing_state_is_the_defaults_and_writes_nothing(chat):
    assert chat.load() == ChatControl()
    assert ChatControl() == ChatControl(True, None, None, "", "", None, (), False)
    assert not os.path.exists(os.path.dirname(chat.path))


def test_the_file_sits_next_to_the_delivery_state(paths, chat):
    assert chat.path == control_path(paths.state_dir, "sess-1")
    assert chat.path == Deliveries(paths.state_dir, "sess-1").path[: -len(".json")] + ".control.json"


def test_update_persists_privately_and_atomically(chat, umask022):
    new = chat.update(lambda c: ChatControl(profile="private", last_turn="t1"))
    assert chat.load() == new and Chat(os.path.dirname(os.path.dirname(chat.path)), "sess-1").load() == new
    assert os.stat(chat.path).st_mode & 0o777 == 0o600
    assert os.stat(os.path.dirname(chat.path)).st_mode & 0o777 == 0o700
    assert not [n for n in os.listdir(os.path.dirname(chat.path)) if n.endswith(".tmp")]
    assert json.load(open(chat.path))["profile"] == "private"


def test_chats_are_separate(paths):
    Chat(paths.state_dir, "a").turn_off()
    assert Chat(paths.state_dir, "b").load().enabled is True
    assert Chat(paths.state_dir, "a").load().enabled is False


@st.composite
def controls(draw):
    opt = st.none() | st.text(max_size=8)
    return ChatControl(draw(st.booleans()), draw(opt), draw(opt), draw(st.text(max_size=40)), draw(st.text(max_size=40)),
                       draw(opt), tuple(draw(st.lists(st.text(max_size=6), max_size=5))), draw(st.booleans()))


@given(controls())
def test_control_json_round_trip(ctl):
    assert ChatControl.from_json(json.loads(json.dumps(ctl.to_json()))) == ctl


# -- corrupt state: memory off until `egg on` -----------------------------------------------------


@pytest.mark.parametrize("data", [b"{not json", b"[]", b'{"version": 1, "enabled": "yes"}', b'{"version": 2}',
                                  b'{"version": 1, "dropped": "t1"}', b"\xff\xfe"])
def test_a_corrupt_state_is_quarantined_and_turns_memory_off(chat, logs, data):
    corrupt(chat, data)
    ctl = chat.load()
    assert (ctl.enabled, ctl.corrupt) == (False, True)
    assert "unreadable chat state" in ctl.last_reason
    (q,) = quarantined(chat)
    assert open(os.path.join(os.path.dirname(chat.path), q), "rb").read() == data  # kept for the user
    assert any("unreadable chat state" in m and q in m for m in logs)
    # the off state is saved: the next process does not turn memory back on
    assert chat.load() == ctl and quarantined(chat) == [q]


def test_a_corrupt_state_makes_the_next_turn_disabled(chat, cfg):
    corrupt(chat)
    sel = chat.begin_turn(cfg, "t1")
    assert (sel.enabled, sel.read, sel.write) == (False, (), None)
    assert chat.load().corrupt is True


def test_egg_off_works_on_a_corrupt_state(chat):
    corrupt(chat)
    ctl = chat.turn_off()
    assert (ctl.enabled, ctl.corrupt) == (False, False)
    assert len(quarantined(chat)) == 1


def test_egg_on_clears_corrupt_and_resets_the_profile(chat, cfg):
    chat.update(lambda c: ChatControl(profile="lean"))
    corrupt(chat)
    chat.load()
    ctl = chat.turn_on()
    assert (ctl.enabled, ctl.corrupt, ctl.profile) == (True, False, None)
    assert chat.begin_turn(cfg, "t1").profile == "work"


def test_egg_on_keeps_a_chosen_profile_when_nothing_was_corrupt(chat):
    chat.update(lambda c: ChatControl(enabled=False, profile="lean"))
    assert chat.turn_on() == ChatControl(enabled=True, profile="lean")


def test_load_stays_off_when_the_corrupt_file_cannot_be_set_aside(chat, logs, monkeypatch):
    corrupt(chat)

    def busy(*a, **k):
        raise ChatBusy("busy")

    monkeypatch.setattr(chat, "update", busy)
    assert chat.load() == ChatControl(enabled=False, corrupt=True)
    assert any("could not be set aside" in m for m in logs)


# -- turns -------------------------------------------------------------------------------------------


def test_begin_turn_uses_the_default_profile(chat, cfg):
    sel = chat.begin_turn(cfg, "t1")
    assert sel == cfg.selection("work") and sel.enabled and sel.write is not None
    assert chat.load().last_turn == "t1"


def test_begin_turn_uses_the_chats_profile(chat, cfg):
    chat.update(lambda c: ChatControl(profile="lean"))
    sel = chat.begin_turn(cfg, "t1")
    assert sel == Selection("lean", True, cfg.selection("work").read[:1], None, 400, True)


def test_next_profile_is_used_for_one_turn_only(chat, cfg):
    chat.update(lambda c: ChatControl(profile="lean", next_profile="private"))
    assert chat.begin_turn(cfg, "t1").profile == "private"
    assert chat.load().next_profile is None
    assert chat.begin_turn(cfg, "t2").profile == "lean"


def test_next_off_turns_one_turn_off(chat, cfg):
    chat.update(lambda c: ChatControl(next_profile="off"))
    assert chat.begin_turn(cfg, "t1").enabled is False
    assert chat.begin_turn(cfg, "t2").enabled is True


def test_a_disabled_chat_selects_nothing_and_still_uses_up_next(chat, cfg):
    chat.update(lambda c: ChatControl(enabled=False, next_profile="private"))
    sel = chat.begin_turn(cfg, "t1")
    assert (sel.profile, sel.enabled, sel.read, sel.write) == ("private", False, (), None)
    assert chat.load().next_profile is None and chat.load().enabled is False


def test_an_unknown_saved_profile_falls_back_to_the_default(chat, cfg, logs):
    chat.update(lambda c: ChatControl(profile="gone"))
    assert chat.begin_turn(cfg, "t1") == cfg.selection()
    assert any("'gone' is not in the config" in m for m in logs)


def test_delivered_records_the_handoff_and_reason(chat):
    chat.delivered("WORK GRAPH ...", "hits: abc 0.8")
    ctl = chat.load()
    assert (ctl.last_handoff, ctl.last_reason) == ("WORK GRAPH ...", "hits: abc 0.8")


def test_drop_keeps_the_last_64_turns(chat):
    for i in range(MAX_DROPPED + 6):
        chat.drop("t%d" % i)
    chat.drop("t10")  # again: moves to the end, no repeat
    ctl = chat.load()
    assert len(ctl.dropped) == MAX_DROPPED and ctl.dropped[-1] == "t10" and ctl.dropped.count("t10") == 1
    assert chat.is_dropped("t69") and chat.is_dropped("t10") and not chat.is_dropped("t0")


def test_a_held_lock_is_chat_busy_after_the_timeout(chat, monkeypatch):
    import portalocker

    monkeypatch.setattr(chat_mod, "LOCK_TIMEOUT_S", 0.1)
    os.makedirs(os.path.dirname(chat.path), exist_ok=True)
    with portalocker.Lock(chat.path + ".lock", "a", flags=portalocker.LOCK_EX | portalocker.LOCK_NB):
        with pytest.raises(ChatBusy, match="another process held this chat's lock"):
            chat.turn_off()
    assert chat.turn_off().enabled is False


def _drop_many(state_dir: str, who: int) -> None:
    c = Chat(state_dir, "sess-1")
    for i in range(10):
        c.drop("p%d-%d" % (who, i))


def test_concurrent_updates_lose_nothing(paths):
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_drop_many, args=(paths.state_dir, n)) for n in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    assert sorted(Chat(paths.state_dir, "sess-1").load().dropped) == sorted("p%d-%d" % (n, i) for n in range(4) for i in range(10))
