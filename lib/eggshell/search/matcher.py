"""Which semantic side a query gets, from the settings in force.

    semantic_matcher = false            no semantic side: lexical matching only
    semantic_matcher = ["/prog", ...]   that program, spoken to over the provider protocol
    (left out)                          the built-in provider: in-process on the hook path,
                                        a long-lived `egg-index` child for egg-query

Whatever is chosen, a failure answers None and the query goes on lexically.
"""

from __future__ import annotations

import os
from typing import Callable

from eggshell.config import Config
from eggshell.search.rank import DEFAULT_THRESHOLD, REPORT_FLOOR, Settings
from eggshell.search.local import Provider
from eggshell.search.searcher import DROPPED_NOTE, Dropped, Semantic, SemanticList

PROVIDER_DEADLINE_S = 15.0


def builtin_argv(cfg: Config, bin_dir: str, depth: int) -> list[str]:
    """The egg-index command egg-query starts for the semantic side: it reports the cosines of
    its whole depth (rank.REPORT_FLOOR); egg-query fuses those at the threshold or above."""
    argv = [os.path.join(bin_dir, "egg-index"), "--mode", "semantic", "--anchor-k", "0", "--top-k", str(depth),
            "--threshold", repr(REPORT_FLOOR)]
    if cfg.model:
        argv += ["--model", cfg.model]
    return argv


def in_process(cfg: Config, data_root: str, depth: int, log: Callable[[str], None]) -> Semantic:
    """The built-in provider in this process (the hook path: no child to start)."""
    floor = DEFAULT_THRESHOLD if cfg.threshold is None else cfg.threshold
    return in_process_for(Settings.from_config(cfg, mode="semantic", top_k=depth, anchor_k=0, threshold=REPORT_FLOOR), data_root, log, floor)


def in_process_for(settings: Settings, data_root: str | None, log: Callable[[str], None], floor: float | None = None) -> Semantic:
    """The built-in provider with these settings (semantic mode, top_k the depth), in this process.

    `floor`: the least cosine fusion counts (None: the settings' threshold, which is then also
    the least the provider reports)."""
    provider = Provider(settings, data_root, log)
    floor = provider.settings.threshold if floor is None else floor

    def semantic(text: str, candidates: list[dict], k: int) -> SemanticList | Dropped:
        r = provider.rank(text, [c["text"] for c in candidates])
        if r.error:
            log("the built-in model failed: %s; %s" % (r.error, DROPPED_NOTE))
            return Dropped("the built-in model failed: %s" % r.error)
        score = dict(r.fused)
        return SemanticList([(i, score[i]) for i in r.selected[:k]], floor, cosine=True, calibration=r.calibration,
                            opening=dict(r.opening) or None)

    semantic.provider = provider  # type: ignore[attr-defined]
    return semantic


def child(argv: list[str], log: Callable[[str], None], deadline_s: float = PROVIDER_DEADLINE_S,
          floor: float = DEFAULT_THRESHOLD, cosine: bool = False, startup_s: float = 0.0) -> tuple[Semantic, Callable[[], None]]:
    """A provider program behind the protocol; returns the semantic side and a closer.

    `floor` is the least score the program reports (the built-in egg-index's threshold);
    `cosine`: its scores are the built-in model's cosines (egg-index).
    A program that sends no scores is fused by rank: the first of n scores 1, the last 1/n.
    """
    from eggshell.search.provider import ProviderClient

    client = ProviderClient(list(argv), deadline_s=deadline_s, log=log, startup_s=startup_s)

    def semantic(text: str, candidates: list[dict], k: int) -> SemanticList | Dropped:
        r = client.query(text, candidates, k)
        if r.related is None:
            log("search provider %s failed: %s; %s" % (argv[0], r.error, DROPPED_NOTE))
            return Dropped("search provider %s failed: %s" % (argv[0], r.error))
        if r.scores is not None:
            opening = dict(zip(r.related, r.opening)) if (cosine and r.opening is not None) else None
            return SemanticList(list(zip(r.related, r.scores)), floor, cosine, r.calibration if cosine else None, opening)
        n = len(r.related)
        return SemanticList([(i, (n - j) / n) for j, i in enumerate(r.related)], 0.0)

    return semantic, client.close


def choose(cfg: Config, data_root: str, bin_dir: str, depth: int, log: Callable[[str], None], *, prefer_in_process: bool,
           startup_s: float = 0.0) -> tuple[Semantic | None, Callable[[], None]]:
    """(semantic side or None, closer) for these settings; `startup_s`: how much longer a child's
    first query may take (provider.STARTUP_S for a batch; none where a worker must not wait)."""
    if cfg.mode == "lexical" or cfg.semantic_matcher is False:
        return None, lambda: None
    if isinstance(cfg.semantic_matcher, tuple):
        return child(list(cfg.semantic_matcher), log, floor=float("inf"), startup_s=startup_s)  # its own scale: normalize from its lowest score
    if prefer_in_process:
        return in_process(cfg, data_root, depth, log), lambda: None
    return child(builtin_argv(cfg, bin_dir, depth), log, floor=DEFAULT_THRESHOLD if cfg.threshold is None else cfg.threshold, cosine=True,
                 startup_s=startup_s)
