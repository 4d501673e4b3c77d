"""The one base of every exception Eggshell raises, so a caller can catch them all.

Each error also keeps the built-in base that says what kind of failure it is (a malformed
record is a ValueError, a busy chat a RuntimeError), so `except ValueError` still works.

    EggshellError
    ├── EggError (store.py)             a store that cannot be read or written
    ├── RecordError (eggfile.py), ShapeError (values.py)
    │                                   a .egg line, a Value of the wrong shape
    ├── ConfigError (config.py)         a config file or key, with its file and line
    ├── UnsafePath (paths.py)           a path another user could redirect
    ├── TrustError (trust.py)           the trust ledger
    ├── TurnError (turns.py), InputError (stage.py), PayloadError (hooks/codex.py)
    │                                   a turn record, an NDJSON line, a hook payload
    ├── ChatStateError, ChatBusy (chat.py), KeyError_ (identity.py)
    ├── ModelError (embed.py), SegmentError (vectors.py)
    ├── CliError (cli.py)               a command's usage or outcome, with its exit status
    └── signals that never leave their module: NoManager (client.py), NotGrown (warm.py),
        _Failure (provider.py), _Vanished (vectors.py)
"""

from __future__ import annotations


class EggshellError(Exception):
    """Raised by Eggshell itself (see the tree above)."""
