"""Build the held-out swe set: OpenHands (CodeActAgent) + Claude 3.5 Sonnet runs on SWE-bench Verified.

    python tests/eval/convert_heldout.py [--git-dir DIR --commit SHA | --src DIR]
                                         [--dev ../shared/data/swe-msa-verified.jsonl]
                                         [--out /work/eval-data/heldout.jsonl]

Source of the runs
  github.com/gsmoon97/swe-agent-eval, commit 2b8d930540ddaf0ae1290e718f1bd0741c70005e,
  folder `evaluation/python/verified/20250329_OpenHands_Claude-3.5-Sonnet(Oct)/`: a copy of the
  Multi-SWE-bench submission "MopenHands + Claude-3.5-Sonnet(Oct)" (github.com/multi-swe-bench/
  experiments, same folder name), i.e. OpenHands' CodeActAgent (tools execute_bash,
  str_replace_editor, finish) with claude-3-5-sonnet-20241022 on the 500 SWE-bench Verified
  instances, run 2025-03-29. `trajs/<instance>/*.json` is the agent's last LLM call (litellm log):
  `fncall_messages` is the whole conversation with structured tool calls and tool results,
  `fncall_response` the last reply. `results/results.json` lists the resolved instances.
  `all_preds.jsonl` (the submitted patches) is over 4 MiB and is not in the stored snapshot, so a
  record's `answer` is the agent's last message (the text it finished with), not a patch.

License
  Neither repository carries a license file (multi-swe-bench/experiments' package.json says ISC
  for its tooling). The issue texts are SWE-bench's (MIT). Treat the data as public third-party
  evaluation material: keep it out of the product and out of commits, keep this notice with it.

Related-task links
  The `related` queries are SWE-ContextBench's links (Zhu et al., arXiv:2602.08316) exactly as
  swe-msa-verified.jsonl encodes them (query text = issue of the later task, relevant = the prior
  task's run, gold_files = files the later task's gold patch changes); each `msa:<instance>` id
  is renamed `oh:<instance>` and a query is kept only when its prior instance has a run here.

Output (the format of swe-msa-verified.jsonl)
  {"kind":"record","id":"oh:<instance>","prompt":<issue text>,"tools":[{"name","input","output"}],
   "answer":<last message>,"meta":{...}}
  {"kind":"query","id":"related:<later>","set":"related","text":...,"relevant":["oh:<prior>"],
   "same_issue":[...],"gold_files":[...],"repo":...,"related_instance_id":...}
  execute_bash calls become name "Bash" with their arguments ({"command": ...}); the editor keeps
  OpenHands' name `str_replace_editor` and its arguments (command, path, old_str, new_str,
  file_text, view_range, insert_line). `finish` carries no arguments and is not a call: its message
  is the answer. A run cut off by the iteration limit ends with a call that got no observation; it
  is kept with output "" (meta.last_call_unobserved). Strings in inputs, outputs and the answer
  longer than 4,000 characters keep their first 3,960 and a marker "\\n...[N chars truncated]",
  as the existing set does.

Stdlib only; reads the snapshot with `git cat-file`, or plain files under --src.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from typing import Any, Iterator

SOURCE_REPO = "gsmoon97/swe-agent-eval"
SOURCE_COMMIT = "2b8d930540ddaf0ae1290e718f1bd0741c70005e"
RUN_DIR = "evaluation/python/verified/20250329_OpenHands_Claude-3.5-Sonnet(Oct)"
DEFAULT_GIT_DIR = "/work/.mirror/gsmoon97+swe-agent-eval/repo"
DEFAULT_DEV = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "data", "swe-msa-verified.jsonl")
DEFAULT_OUT = "/work/eval-data/heldout.jsonl"
PREFIX = "oh:"
DEV_PREFIX = "msa:"
AGENT = "OpenHands CodeActAgent (MopenHands, Multi-SWE-bench)"
MODEL = "claude-3-5-sonnet-20241022"
CAP = 4000
KEEP = 3960  # what the existing set keeps of a cut string, before its marker
ISSUE_RE = re.compile(r"<issue_description>\n?(.*?)\n?</issue_description>", re.S)


def cut(s: str) -> str:
    """At most CAP characters: the head and a marker saying how much was dropped."""
    if len(s) <= CAP:
        return s
    return s[:KEEP] + "\n...[%d chars truncated]" % (len(s) - KEEP)


def cut_input(inp: Any) -> Any:
    if isinstance(inp, dict):
        return {k: cut_input(v) for k, v in inp.items()}
    if isinstance(inp, list):
        return [cut_input(v) for v in inp]
    if isinstance(inp, str):
        return cut(inp)
    return inp


def text_of(content: Any) -> str:
    """A message's content as text (a string, or a list of text parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return str(content)


# -- reading the source ---------------------------------------------------------------------


def git_files(git_dir: str, commit: str) -> Iterator[tuple[str, bytes]]:
    """(path, bytes) of every file under RUN_DIR at the commit, in path order."""
    ls = subprocess.run(["git", "--git-dir", git_dir, "ls-tree", "-r", "-z", commit, RUN_DIR + "/"],
                        check=True, capture_output=True).stdout.decode()
    entries = []
    for line in filter(None, ls.split("\0")):
        meta, path = line.split("\t", 1)
        _, kind, sha = meta.split()
        rel = path[len(RUN_DIR) + 1:]
        if kind == "blob" and (rel == "results/results.json" or rel.startswith("trajs/")):
            entries.append((path, sha))  # all_preds.jsonl (over 4 MiB) is absent from the snapshot
    entries.sort()
    cat = subprocess.Popen(["git", "--git-dir", git_dir, "cat-file", "--batch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        for path, sha in entries:
            cat.stdin.write((sha + "\n").encode())
            cat.stdin.flush()
            head = cat.stdout.readline().split()
            if len(head) < 3 or head[1] != b"blob":
                print("skipped (object missing from this clone): %s" % path, file=sys.stderr)
                continue
            data = cat.stdout.read(int(head[2]))
            cat.stdout.read(1)
            yield path, data
    finally:
        cat.stdin.close()
        cat.wait()


def dir_files(src: str) -> Iterator[tuple[str, bytes]]:
    """The same from a checkout: src is the repository root (or RUN_DIR itself)."""
    base = os.path.join(src, RUN_DIR) if os.path.isdir(os.path.join(src, RUN_DIR)) else src
    for root, _, names in sorted(os.walk(base)):
        for n in sorted(names):
            full = os.path.join(root, n)
            with open(full, "rb") as f:
                yield RUN_DIR + "/" + os.path.relpath(full, base).replace(os.sep, "/"), f.read()


# -- one run ----------------------------------------------------------------------------------


def convert_run(instance: str, path: str, d: dict, resolved: set[str]) -> dict:
    msgs = d.get("fncall_messages") or []
    first_user = next((text_of(m.get("content")) for m in msgs if m.get("role") == "user"), "")
    m = ISSUE_RE.search(first_user)
    prompt = m.group(1) if m else first_user
    results = {m.get("tool_call_id"): text_of(m.get("content")) for m in msgs if m.get("role") == "tool"}

    final = ((d.get("fncall_response") or {}).get("choices") or [{}])[0].get("message") or {}
    calls = [(tc, True) for mm in msgs if mm.get("role") == "assistant" for tc in (mm.get("tool_calls") or [])]
    calls += [(tc, False) for tc in (final.get("tool_calls") or [])]

    tools, finished, unobserved, nudges = [], False, False, 0
    for tc, logged in calls:
        fn = tc.get("function") or {}
        name = fn.get("name") or ""
        try:
            args = json.loads(fn.get("arguments") or "{}")
        except ValueError:
            args = {"arguments": fn.get("arguments")}
        if name == "finish":
            finished = True
            continue
        out = results.get(tc.get("id"))
        if out is None:
            unobserved = True
            out = ""
        if name == "execute_bash":
            name = "Bash"
        tools.append({"name": name, "input": cut_input(args), "output": cut(out)})
    nudges = sum(1 for mm in msgs[2:] if mm.get("role") == "user")

    answer = text_of(final.get("content")).strip()
    if not answer:  # a last reply with only a call: the agent's last words before it
        for mm in reversed(msgs):
            if mm.get("role") == "assistant" and text_of(mm.get("content")).strip():
                answer = text_of(mm.get("content")).strip()
                break
    owner, _, rest = instance.partition("__")
    meta = {
        "instance_id": instance,
        "repo": owner + "/" + rest.rsplit("-", 1)[0],
        "agent": AGENT,
        "model": MODEL,
        "resolved": instance in resolved,
        "finished": finished,
        "answer_kind": "final message",
        "last_call_unobserved": unobserved,
        "continue_nudges": nudges,
        "source": "%s@%s:%s" % (SOURCE_REPO, SOURCE_COMMIT[:12], path),
    }
    return {"kind": "record", "id": PREFIX + instance, "prompt": prompt, "tools": tools, "answer": cut(answer), "meta": meta}


# -- the whole set --------------------------------------------------------------------------------


def build(files: Iterator[tuple[str, bytes]], dev_path: str) -> tuple[list[dict], list[dict], dict]:
    trajs: dict[str, tuple[str, bytes]] = {}
    resolved: set[str] = set()
    for path, data in files:
        rel = path[len(RUN_DIR) + 1:]
        if rel == "results/results.json":
            resolved = set(json.loads(data).get("resolved") or [])
        elif rel.startswith("trajs/") and rel.endswith(".json"):
            inst = rel.split("/")[1]
            if inst in trajs:  # several logs of one run: keep the last by name (the latest timestamp)
                if path < trajs[inst][0]:
                    continue
            trajs[inst] = (path, data)
    records = [convert_run(inst, p, json.loads(data), resolved) for inst, (p, data) in sorted(trajs.items())]
    have = {r["id"] for r in records}

    queries, dropped, stats = [], 0, {"dev_related": 0, "dev_prompts_equal": 0}
    dev_prompt: dict[str, str] = {}
    with open(dev_path, encoding="utf-8") as f:
        for line in f:
            q = json.loads(line)
            if q.get("kind") == "record":
                dev_prompt[q["id"][len(DEV_PREFIX):]] = q.get("prompt") or ""
                continue
            if q.get("kind") != "query" or q.get("set") != "related":
                continue
            stats["dev_related"] += 1
            rel = [PREFIX + r[len(DEV_PREFIX):] for r in q.get("relevant") or [] if r.startswith(DEV_PREFIX)]
            rel = [r for r in rel if r in have]
            if not rel:
                dropped += 1
                continue
            same = [PREFIX + r[len(DEV_PREFIX):] for r in q.get("same_issue") or [] if r.startswith(DEV_PREFIX)]
            out = {"kind": "query", "id": q["id"], "set": "related", "text": q["text"], "relevant": rel,
                   "repo": q.get("repo"), "related_instance_id": q.get("related_instance_id"),
                   "same_issue": [r for r in same if r in have], "gold_files": list(q.get("gold_files") or [])}
            queries.append(out)
    for r in records:
        if dev_prompt.get(r["meta"]["instance_id"], "").strip() == r["prompt"].strip():
            stats["dev_prompts_equal"] += 1
    stats["dropped_related"] = dropped
    return records, queries, stats


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--git-dir", default=DEFAULT_GIT_DIR, help="a clone or mirror of %s" % SOURCE_REPO)
    ap.add_argument("--commit", default=SOURCE_COMMIT)
    ap.add_argument("--src", help="a checkout of %s instead of --git-dir" % SOURCE_REPO)
    ap.add_argument("--dev", default=DEFAULT_DEV, help="swe-msa-verified.jsonl (its related links)")
    ap.add_argument("--out", default=DEFAULT_OUT)
    a = ap.parse_args(argv)
    files = dir_files(a.src) if a.src else git_files(a.git_dir, a.commit)
    records, queries, stats = build(files, a.dev)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    tmp = a.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for obj in records + queries:
            f.write(json.dumps(obj) + "\n")
    os.replace(tmp, a.out)
    print("%d records (%d resolved, %d finished), %d tool calls; %d related queries (%d of %d dropped: prior run absent); "
          "%d prompts equal the dev set's -> %s" % (
              len(records), sum(r["meta"]["resolved"] for r in records), sum(r["meta"]["finished"] for r in records),
              sum(len(r["tools"]) for r in records), len(queries), stats["dropped_related"], stats["dev_related"],
              stats["dev_prompts_equal"], a.out), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
