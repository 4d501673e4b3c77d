"""`egg doctor` reports prompts whose semantic side was dropped in the last day (hook.log)."""

from __future__ import annotations

import calendar
import time

from eggshell.cli.doctor import Checkup, check_semantic_drops
from eggshell.paths import Paths
from eggshell.search.searcher import DROPPED_NOTE


def test_recent_drops_are_a_warning_with_the_last_reason(tmp_path):
    paths = Paths(str(tmp_path / "p"), str(tmp_path / "d"), str(tmp_path / "c.toml"), str(tmp_path / "codex"), str(tmp_path / "bin"))
    c = Checkup(paths, str(tmp_path), {})
    assert check_semantic_drops(c) is None  # no log
    now = calendar.timegm(time.strptime("2026-12-02T12:00:00Z", "%Y-%m-%dT%H:%M:%SZ"))
    (tmp_path / "d" / "logs").mkdir(parents=True)
    log = tmp_path / "d" / "logs" / "hook.log"
    log.write_text("2026-11-30T12:00:00Z search RuntimeError: search provider x failed: old; %s [..]\n"
                   "2026-12-02T11:00:00Z reply BrokenPipeError: [Errno 32] Broken pipe [..]\n" % DROPPED_NOTE)
    assert log == __import__("pathlib").Path(paths.log_file)
    assert check_semantic_drops(c, now=now) is None  # only one older than a day
    with log.open("a") as f:
        f.write("2026-12-02T10:00:00Z search RuntimeError: search provider egg-index failed: timed out; %s [..]\n" % DROPPED_NOTE)
        f.write("2026-12-02T11:30:00Z search RuntimeError: the built-in model failed: MemoryError: ; %s [..]\n" % DROPPED_NOTE)
        f.write("not a log line %s\n" % DROPPED_NOTE)
    level, text = check_semantic_drops(c, now=now)
    assert level == "WARN" and text.startswith("semantic side dropped 2 times in the last 24 h")
    assert "(last: search RuntimeError: the built-in model failed: MemoryError" in text and str(log) in text
