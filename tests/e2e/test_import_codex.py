"""End to end with the real Codex CLI: a chat run before Eggshell was installed, imported, then reused.

Chat 1 runs with no Eggshell at all (no hooks, no .eggshell.toml): it searches, reads a file
and answers, and Codex writes its rollout file. Then `egg init` and `egg import codex` (its
default: $CODEX_HOME/sessions) must put that turn into the project's store, with the request,
both calls with their real outputs and the answer, under the session and turn ids Codex's
hooks use; a second `egg import codex` adds nothing. After `egg install codex`, chat 2 asks
a related question: its first model request must carry chat 1's imported work in the
handoff, and when the model runs chat 1's search again it really runs: an imported call is
advice, never a denial.
"""

from __future__ import annotations

import json

import pytest

from codex_harness import CodexHome
from fake_model_server import FakeModelServer, developer_messages, function_call_outputs
from test_codex_eggshell import BILLING, _egg

from eggshell.graph.records import turn_views
from eggshell.graph.store import Store

pytestmark = pytest.mark.e2e

CHAT1 = "Find where the late_fee for overdue invoices is computed in this project"
SEARCH = "grep -rn late_fee src"
READ = "sed -n 1,20p src/billing.py"
CHAT1_ANSWER = "compute_late_fee in src/billing.py computes it: 2% of the balance per overdue month."
CHAT2 = "Does compute_late_fee in billing cap the late_fee for very old invoices?"
CHAT2_ANSWER = "No: compute_late_fee has no cap."
HIT = "src/billing.py:14:    late_fee = balance * LATE_FEE_RATE * months"


def test_a_codex_chat_from_before_eggshell_is_imported_and_handed_to_the_next_chat(prefix, tmp_path):
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "billing.py").write_text(BILLING)
    scripts = {CHAT1: [{"exec": SEARCH}, {"exec": READ}, {"say": CHAT1_ANSWER}],
               CHAT2: [{"exec": SEARCH}, {"say": CHAT2_ANSWER}]}
    with FakeModelServer(scripts) as server:
        home = CodexHome(tmp_path / "codex", server)
        data_root = tmp_path / "data"
        env = {"EGGSHELL_PREFIX": str(prefix), "EGGSHELL_DATA_ROOT": str(data_root)}
        tool_env = home.env(env)

        # Chat 1, with no Eggshell anywhere.
        run1 = home.run(CHAT1, project, env=env).check()
        assert CHAT1_ANSWER in run1.stdout, str(run1)
        (rollout,) = home.rollout_files()
        assert not (home.codex_home / "hooks.json").exists() and not (project / ".eggshell.toml").exists()

        _egg(prefix, ["init"], project, tool_env)
        egg_file = project / ".eggs" / "work.egg"
        out = _egg(prefix, ["import", "codex", "--dry-run"], project, tool_env)
        assert "would import 1 turn from 1 session" in out and not egg_file.exists(), out
        out = _egg(prefix, ["import", "codex"], project, tool_env)
        assert "imported 1 turn from 1 session into 1 store, skipped 0 already present, 0 bad lines" in out, out

        (v,) = turn_views(Store.open(str(egg_file)).graph)
        meta = json.loads(rollout.read_text().splitlines()[0])["payload"]
        assert v.session == meta["session_id"] and v.prompt == CHAT1 and v.answer == CHAT1_ANSWER
        assert [t.work for t in v.tools] == ['Bash\n{"command":"%s"}' % SEARCH, 'Bash\n{"command":"%s"}' % READ]
        assert HIT in v.tools[0].outcome and "def total_due(invoice, today):" in v.tools[1].outcome
        outputs = function_call_outputs(server.requests_for(CHAT1)[-1])
        assert v.tools[0].outcome in outputs[0]  # the very text the model was shown

        before = egg_file.read_bytes()
        out = _egg(prefix, ["import", "codex"], project, tool_env)
        assert "imported 0 turns from 0 sessions into 0 stores, skipped 1 already present" in out, out
        assert egg_file.read_bytes() == before

        # Chat 2, with Eggshell installed: handed chat 1's imported work, and free to run its search again.
        _egg(prefix, ["install", "codex"], project, tool_env)
        run2 = home.run(CHAT2, project, env=env).check()
        assert CHAT2_ANSWER in run2.stdout, str(run2)
        reqs = server.requests_for(CHAT2)
        handoff = [m for m in developer_messages(reqs[0]) if "EGGSHELL PRIOR WORK" in m]
        assert len(handoff) == 1, developer_messages(reqs[0])
        assert "> " + CHAT1 in handoff[0] and "| " + CHAT1_ANSWER in handoff[0]
        assert "$ " + SEARCH in handoff[0] and "| " + HIT in handoff[0]
        rerun = function_call_outputs(reqs[1])[-1]
        assert HIT in rerun and "blocked" not in rerun.lower(), rerun  # advice only: the search really ran
