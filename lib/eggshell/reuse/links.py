"""The way a named path takes to what it reads: the symbolic links followed on it.

A read reads whatever its path leads to now. A link on the way (the named file itself, a
parent component, a link's own target, a chain of them; relative or absolute) can be
retargeted without touching any file it leads to, so the files' fingerprints alone cannot
tell that a later read would read something else (issue 31 item 4: a link retargeted to a
file of the same size and mtime was reused as "verified unchanged"). So what a read observed
is also its way: fingerprint.py records it when the call runs and compares it when the call
is checked, both times with `walk`.

`walk` resolves a path one component at a time, as os.path.realpath does (one lstat per
component, one readlink per link: no more than the realpath it replaces on the hook path),
and also returns each link it followed with its target as written.

On every PostToolUse hook's path: only `os` and `stat`.
"""

from __future__ import annotations

import os
import stat as _stat

MAX_LINKS = 40  # the links one lookup may follow (Linux's limit; past it the kernel says ELOOP)


def walk(start: str, name: str) -> tuple[str, list] | None:
    """(real path, [(link, target), ...]) of `name` resolved from the real directory `start`.

    `name` may be absolute (then `start` is not used). The links come in the order they were
    followed, each as its own path (its real parent joined with its name) and its target as
    readlink gives it. Like os.path.realpath (not strict), the rest of the path past a
    component that does not exist is joined as written, so an absent file or a dangling link's
    target still has the real path it would be created at. None: a loop, or more than
    MAX_LINKS links, or a link that cannot be read (it changed while it was read).
    """
    done = "/" if name.startswith("/") else start
    todo = [c for c in reversed(name.split("/")) if c not in ("", ".")]
    met: list = []
    missing = False
    while todo:
        c = todo.pop()
        if c in ("", "."):
            continue
        if c == "..":
            done = os.path.dirname(done)
            continue
        path = os.path.join(done, c)
        if not missing:
            try:
                st = os.lstat(path)
            except OSError:
                missing = True
            else:
                if _stat.S_ISLNK(st.st_mode):
                    if len(met) >= MAX_LINKS:
                        return None
                    try:
                        target = os.readlink(path)
                    except OSError:
                        return None
                    met.append((path, target))
                    if target.startswith("/"):
                        done = "/"
                    todo.extend(reversed(target.split("/")))
                    continue
        done = path
    return done, met
