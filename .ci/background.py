"""Write lib/eggshell/search/background.npz: the background turns' window vectors for the
default model, so a first prompt is calibrated without embedding them (search/background.py).

Run after changing background.jsonl or the default model: `make background`. The unit test
tests/unit/search/test_background.py re-embeds some of them and fails while this is stale.
"""

from __future__ import annotations

import os
import sys

import numpy as np

from eggshell.search.background import VECTORS, build
from eggshell.search.embed import Encoder
from eggshell.search.semantic import MAX_WINDOWS


def main() -> int:
    enc = Encoder()
    arrays = build(enc, lambda t: [w.text for w in enc.windows(t)][:MAX_WINDOWS])
    out = os.path.join(os.path.dirname(__file__), "..", "lib", "eggshell", "search", VECTORS)
    np.savez_compressed(out, **arrays)
    print("%s: %d windows of %d texts for %s" % (os.path.normpath(out), len(arrays["text_of"]), int(arrays["text_of"].max()) + 1,
                                                 enc.model_id), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
