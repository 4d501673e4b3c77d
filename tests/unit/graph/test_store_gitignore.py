"""A `.eggs/` Eggshell creates is git-ignored, whoever creates it (graph/ignorefile; docs/privacy.md).

Red-team round IV (cfg_repo_store_not_gitignored, cfg_vendored_subdir_config): a repository
shipping `.eggshell.toml` without `.eggs/.gitignore` had the first saved turn create
`.eggs/work.egg` and its lock as untracked files, so `git add -A` published the record.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess

import pytest

from eggshell.graph import ignorefile
from eggshell.graph.save import save_turn
from eggshell.graph.store import EggError, Store, merge
from helpers import turn_record

needs_git = pytest.mark.skipif(not shutil.which("git"), reason="git is not installed")


def _repo(tmp_path) -> str:
    root = str(tmp_path / "repo")
    os.makedirs(root)
    subprocess.run(["git", "init", "-q", root], check=True)
    return root


def _untracked(root: str) -> list[str]:
    """What `git add -A` would add: nothing of a `.eggs/` Eggshell made, its `.gitignore` included."""
    out = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=all"], capture_output=True, text=True,
                         check=True).stdout
    return [line[3:] for line in out.splitlines()]


def _save(root: str, rel: str) -> str:
    path = os.path.join(root, rel)
    save_turn(Store(path), turn_record(prompt="remember GITADDCANARY", cwd=root), root=root)
    return path


@needs_git
@pytest.mark.parametrize("rel", [".eggs/work.egg", ".eggs/team/shared.egg", "vendor/lib/.eggs/work.egg"])
def test_a_saved_turn_into_a_new_eggs_dir_is_invisible_to_git_add(tmp_path, rel):
    root = _repo(tmp_path)
    path = _save(root, rel)
    assert os.path.exists(path) and os.path.exists(path + ".lock")
    assert _untracked(root) == []
    eggs = path[: path.index(".eggs") + len(".eggs")]
    with open(os.path.join(eggs, ".gitignore"), encoding="utf-8") as f:
        assert f.read() == ignorefile.AUTO_TEXT


@needs_git
def test_a_store_outside_any_project_root_in_a_new_eggs_dir_is_ignored_too(tmp_path):
    """A store the user's global config names (no project root to go from): its new .eggs/ is ignored as well."""
    root = _repo(tmp_path)
    path = os.path.join(root, ".eggs", "team", "x.egg")
    save_turn(Store(path), turn_record(prompt="remember GITADDCANARY", cwd=root), root=None)
    assert os.path.exists(path) and _untracked(root) == []


@needs_git
def test_a_merge_output_into_a_new_eggs_dir_is_ignored_too(tmp_path):
    root = _repo(tmp_path)
    src = _save(str(tmp_path), "elsewhere/a.egg")
    merge([src], os.path.join(root, ".eggs", "merged.egg"))
    assert _untracked(root) == []


@needs_git
def test_an_existing_eggs_dir_a_team_chose_to_commit_is_left_alone(tmp_path):
    root = _repo(tmp_path)
    os.makedirs(os.path.join(root, ".eggs"), mode=0o700)
    with open(os.path.join(root, ".gitattributes"), "w") as f:
        f.write("*.egg merge=union\n")
    _save(root, ".eggs/work.egg")
    assert not os.path.lexists(os.path.join(root, ".eggs", ".gitignore"))
    assert ".eggs/work.egg" in _untracked(root)  # shared on purpose: git sees it


def test_the_gitignore_goes_in_before_the_store(tmp_path, monkeypatch):
    seen = []
    real = ignorefile.write_into

    def spy(fd, *a):
        seen.append(sorted(os.listdir(fd)))
        return real(fd, *a)

    monkeypatch.setattr(ignorefile, "write_into", spy)
    _save(str(tmp_path), ".eggs/work.egg")
    assert seen == [[]]


@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EACCES])
def test_an_unwritable_gitignore_refuses_the_store_and_removes_the_new_dir(tmp_path, monkeypatch, err):
    def fail(fd, *a):
        raise OSError(err, os.strerror(err))

    monkeypatch.setattr(ignorefile, "write_into", fail)
    with pytest.raises(EggError, match="gitignore"):
        _save(str(tmp_path), ".eggs/work.egg")
    assert not os.path.lexists(tmp_path / ".eggs")
    monkeypatch.undo()
    _save(str(tmp_path), ".eggs/work.egg")  # the next try makes both
    assert (tmp_path / ".eggs" / ".gitignore").read_text() == ignorefile.AUTO_TEXT


@pytest.mark.parametrize("target_exists", [True, False])
def test_the_gitignore_is_never_written_through_a_link(tmp_path, target_exists):
    victim = tmp_path / "victim.txt"
    if target_exists:
        victim.write_text("keep me\n")
    d = tmp_path / "eggs"
    d.mkdir()
    os.symlink(victim, d / ".gitignore")
    assert ignorefile.write_at(str(d)) is False
    assert (victim.read_text() == "keep me\n") if target_exists else not victim.exists()


def test_missing_eggs_dir_names_only_a_new_eggs_component(tmp_path):
    assert ignorefile.missing_eggs_dir(str(tmp_path / "p" / ".eggs" / "team")) == str(tmp_path / "p" / ".eggs")
    assert ignorefile.missing_eggs_dir(str(tmp_path / "data" / "eggs")) is None
    (tmp_path / "p" / ".eggs").mkdir(parents=True)
    assert ignorefile.missing_eggs_dir(str(tmp_path / "p" / ".eggs" / "team")) is None

