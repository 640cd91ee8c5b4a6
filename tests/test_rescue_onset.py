"""No loop text reaches the client, counted from the loop's labelled onset, in any chunking.

Every loop of the dev corpus streams through the rescue engine (as scored: short excerpts
continued by repeating their looping part). What the client receives of the looping channel may
hold at most one copy of a periodic unit past the onset, and none of a pool: the pool's phrases
appear in it only where they were released before the pool's first phrase.
"""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.paths import CORPUS
from tests.test_rescue_engine import Script, check_well_formed, engine_for, run
from tests.test_rescue_properties import split, stream

from looprescue.corpus import ALIGN_SLACK, load_corpus
from looprescue.detect import scan_text
from looprescue.detect.text import normalize_phrase
from looprescue.rescue.events import EmitDelta

LOOPS = [r for r in load_corpus(CORPUS) if r.label == "loop"]
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_SENTENCE = re.compile(r"[^。！？\n]+(?:[。！？\n]|[.!?](?=\s)|$)")


def _client_text(record, sizes: list[int]) -> tuple[str, object]:
    text = record.scored_text()
    engine = engine_for()
    result = run(
        engine, stream(record.channel, split(text, sizes)), [Script(text="Done.").events()]
    )
    check_well_formed(result)
    released = "".join(
        i.text for i in result.items if isinstance(i, EmitDelta) and i.kind == record.channel
    )
    if record.channel == "text":
        assert released.endswith("Done.")  # the continuation, after the kept text
        released = released[: -len("Done.")]
    assert engine.stats.leaked_loop_chars == 0
    return released, engine


@SETTINGS
@given(
    index=st.integers(0, len(LOOPS) - 1),
    sizes=st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=10),
)
def test_at_most_one_copy_of_a_loop_reaches_the_client(index: int, sizes: list[int]) -> None:
    record = LOOPS[index]
    released, engine = _client_text(record, sizes)
    text = record.scored_text()
    assert text.startswith(released)
    assert len(released) <= record.onset + record.allowed_copy() + ALIGN_SLACK, record.id
    # the one copy a periodic loop may keep is what the stats call kept; nothing leaked
    assert engine.stats.kept_loop_chars <= record.allowed_copy() + ALIGN_SLACK


@SETTINGS
@given(
    index=st.sampled_from([i for i, r in enumerate(LOOPS) if r.kind == "pool"]),
    sizes=st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=10),
)
def test_none_of_a_pools_phrases_reaches_the_client_after_its_first_phrase(
    index: int, sizes: list[int]
) -> None:
    record = LOOPS[index]
    released, _ = _client_text(record, sizes)
    (hit,) = scan_text(record.scored_text(), record.channel)
    pool = {p for p in hit.evidence.rstrip("…").split(" / ") if p}
    after_onset = released[hit.loop_start :]
    phrases = {normalize_phrase(s) for s in _SENTENCE.findall(after_onset)}
    assert not (phrases & pool), (record.id, after_onset[:80])
