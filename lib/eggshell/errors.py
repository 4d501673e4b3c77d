"""The one base of every exception Eggshell raises, so a caller can catch them all.

Each error also keeps the built-in base that says what kind of failure it is (a malformed
record is a ValueError, a busy chat a RuntimeError), so `except ValueError` still works.

    EggshellError
    ├── EggError (graph/store.py)       a store that cannot be read or written
    ├── RecordError (graph/eggfile.py), ShapeError (core/values.py)
    │                                   a .egg line, a Value of the wrong shape
    ├── ConfigError (config.py)         a config file or key, with its file and line
    ├── UnsafePath (paths.py)           a path another user could redirect
    ├── TrustError (graph/trust.py)     the trust ledger
    ├── TurnError (graph/turns.py), InputError, Refused (stages/common.py), PayloadError (runtime/turnflow.py)
    │                                   a turn record, an NDJSON line, a message a stage refuses, a hook payload
    ├── ChatStateError, ChatBusy (runtime/chat.py), KeyError_ (core/identity.py)
    ├── ModelError (search/embed.py), SegmentError (search/vectors.py), IndexDamaged (search/postings.py)
    ├── CliError (cli/common.py)        a command's usage or outcome, with its exit status
    └── signals that never leave their module: NoManager (runtime/client.py), NotGrown (runtime/warm.py),
        _Failure (search/provider.py), _Vanished (search/vectors.py)
"""

from __future__ import annotations


class EggshellError(Exception):
    """Raised by Eggshell itself (see the tree above)."""
