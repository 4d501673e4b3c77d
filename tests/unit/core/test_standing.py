"""standing.py: the freshness and trust concerns join into one Standing; only the user's own,
verified-unchanged outcome may complete a call."""

from eggshell.core.standing import CHANGED, NOT_CHECKED, UNKNOWN, VERIFIED, Standing, join, judges


def test_only_own_and_verified_may_complete():
    assert Standing(inputs=VERIFIED).may_complete
    assert not Standing(inputs=VERIFIED, origin="another store: /clone/.eggs/work.egg").may_complete
    assert not Standing(inputs=CHANGED, changed=("src/a.py",)).may_complete
    assert not Standing(inputs=UNKNOWN).may_complete
    assert not NOT_CHECKED.may_complete


def test_join_takes_each_field_from_the_concern_that_set_it():
    fresh = Standing(recorded="2026-11-29T10:00:00Z", commit="ab" * 20, inputs=VERIFIED)
    trust = Standing(origin="another store")
    both = join(fresh, trust)
    assert both == Standing(recorded=fresh.recorded, commit=fresh.commit, inputs=VERIFIED, origin="another store")
    assert join(trust, fresh) == both
    assert join() == NOT_CHECKED
    assert judges(lambda o, a: fresh, lambda o, a: trust)(None, None) == both
