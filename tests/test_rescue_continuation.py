"""What goes back upstream after a cut, and the loop accounting, against hand-built hits.

A scripted detector (the engine's detector factory) fires a given :class:`Hit` at a given point
and holds back what a watermark would, so each case pins the onset, the prune point and what
the client had already received when the loop was confirmed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from tests.test_rescue_engine import REQUEST, Run, Script, check_well_formed, run

from looprescue.config import LoopRescueConfig, load_config
from looprescue.detect import Hit
from looprescue.rescue.engine import RescueEngine
from looprescue.wire.anthropic import AnthropicWire
from looprescue.wire.openai import OpenAIWire

PLAN = "First I read the loader, then I check each layer in order. "
UNIT = "Now I will write the final answer carefully. "
POOL = "OK. Emit. Now. Go. Output. Producing. "


@dataclass
class ScriptedDetector:
    """Fires ``hit`` once ``fire_at`` chars of its channel were fed; releases up to ``hold``."""

    hit: Hit
    fire_at: int
    hold: int
    fed: int = 0
    fired: bool = False

    def feed(self, channel: str, delta: str) -> Hit | None:
        if channel != self.hit.channel:
            return None
        self.fed += len(delta)
        if not self.fired and self.fed >= self.fire_at:
            self.fired = True
            return self.hit
        return None

    def flush(self, channel: str) -> Hit | None:
        return None

    def safe_offset(self, channel: str) -> int:
        if channel != self.hit.channel:
            return 1 << 62
        return min(self.fed, self.hold)


def periodic_hit(channel: str, onset: int, copies: int = 4) -> Hit:
    return Hit(
        rule="cycle",
        channel=channel,  # type: ignore[arg-type]
        prune_offset=onset + len(UNIT),
        loop_start=onset,
        fired_at=onset + copies * len(UNIT),
        repeats=float(copies),
        period=len(UNIT),
        evidence=UNIT[:40],
    )


def pool_hit(channel: str, onset: int, copies: int = 5) -> Hit:
    return Hit(
        rule="pool",
        channel=channel,  # type: ignore[arg-type]
        prune_offset=onset,
        loop_start=onset,
        fired_at=onset + copies * len(POOL),
        repeats=float(copies * 6),
        period=None,
        evidence=POOL[:40],
    )


def engine_with(hit: Hit, hold: int, wire: Any = None, **config: Any) -> RescueEngine:
    detector = ScriptedDetector(hit, fire_at=hit.fired_at, hold=hold)
    return RescueEngine(
        load_config(None, config) if config else LoopRescueConfig(),
        wire or AnthropicWire(),
        REQUEST,
        detector_factory=iter([detector, ScriptedDetector(hit, 1 << 62, 1 << 62)]).__next__,
    )


def correction_of(result: Run) -> str:
    (resume,) = result.resumes
    last = resume.body["messages"][-1]["content"]
    return last if isinstance(last, str) else last[-1]["text"]


def assert_no_loop_quoted(correction: str, loop: str) -> None:
    """Nothing of the loop's text is in the correction (no run of 16 of its chars)."""
    flat, loop = " ".join(correction.split()), " ".join(loop.split())
    assert not any(loop[i : i + 16] in flat for i in range(max(0, len(loop) - 15)))


# --------------------------------------------------------------------------- continuation


def test_reasoning_loop_continuation_carries_the_reasoning_up_to_the_onset() -> None:
    reasoning = PLAN + UNIT * 6
    hit = periodic_hit("reasoning", len(PLAN))
    # the watermark let the one kept copy through before the loop was confirmed
    engine = engine_with(hit, hold=hit.prune_offset)
    result = run(engine, Script(reasoning=reasoning).events(), [Script(text="Done.").events()])
    check_well_formed(result)
    correction = correction_of(result)
    # the client saw the plan and one copy; the continuation carries the plan only
    assert result.content("reasoning").startswith(PLAN + UNIT)
    assert engine.kept_work().reasoning == PLAN
    assert PLAN.strip() in correction
    assert UNIT.strip() not in correction  # not even the one copy the client kept
    assert "previous reasoning started repeating" in correction
    assert_no_loop_quoted(correction, UNIT * 5)


def test_text_loop_continuation_keeps_exactly_the_text_the_client_saw() -> None:
    text = PLAN + UNIT * 6
    hit = periodic_hit("text", len(PLAN))
    engine = engine_with(hit, hold=hit.prune_offset + 10)  # 10 chars leaked past the prune point
    result = run(
        engine, Script(reasoning="Think.", text=text).events(), [Script(text="Done.").events()]
    )
    check_well_formed(result)
    (resume,) = result.resumes
    assistant = resume.body["messages"][-2]
    visible = result.content("text")[: -len("Done.")]
    assert assistant == {"role": "assistant", "content": [{"type": "text", "text": visible}]}
    assert visible == text[: hit.prune_offset + 10]
    assert "Think." in correction_of(result)  # the reasoning had no loop: all of it is kept


def test_openai_continuation_has_the_same_shape_in_its_own_spelling() -> None:
    text = PLAN + POOL * 6
    hit = pool_hit("text", len(PLAN))
    engine = engine_with(hit, hold=len(PLAN), wire=OpenAIWire())
    result = run(engine, Script(text=text).events(), [Script(text="Done.").events()])
    (resume,) = result.resumes
    assistant, user = resume.body["messages"][-2:]
    assert assistant == {"role": "assistant", "content": PLAN}
    assert user["role"] == "user" and "previous answer started repeating" in user["content"]
    assert_no_loop_quoted(user["content"], POOL * 6)


# --------------------------------------------------------------------------- accounting


@pytest.mark.parametrize(
    ("hold", "kept", "leaked"),
    [
        (len(PLAN), 0, 0),  # held from the onset: nothing of the loop had reached the client
        (len(PLAN) + 20, 20, 0),  # part of the one kept copy
        (len(PLAN) + len(UNIT), len(UNIT), 0),  # exactly the one kept copy
        (len(PLAN) + len(UNIT) + 17, len(UNIT), 17),  # 17 chars past the prune point
    ],
)
def test_periodic_loop_accounting_from_the_onset(hold: int, kept: int, leaked: int) -> None:
    hit = periodic_hit("reasoning", len(PLAN))
    engine = engine_with(hit, hold=hold, mode="cut")
    result = run(engine, Script(reasoning=PLAN + UNIT * 6).events())
    assert engine.stats.kept_loop_chars == kept
    assert engine.stats.leaked_loop_chars == leaked
    (detection,) = [a for a in result.audit if a.kind == "detection"]
    assert detection.data["kept_loop_chars"] == kept
    assert detection.data["leaked_loop_chars"] == leaked
    assert engine.stats.hits[0]["kept_loop_chars"] == kept


@pytest.mark.parametrize(("hold", "leaked"), [(len(PLAN), 0), (len(PLAN) + 25, 25)])
def test_pool_loop_keeps_nothing_and_counts_its_head_as_leaked(hold: int, leaked: int) -> None:
    hit = pool_hit("reasoning", len(PLAN))
    engine = engine_with(hit, hold=hold)
    result = run(engine, Script(reasoning=PLAN + POOL * 6).events(), [Script(text="ok").events()])
    assert engine.stats.kept_loop_chars == 0
    assert engine.stats.leaked_loop_chars == leaked
    # what had reached the client stays (it cannot be taken back), but is never sent upstream
    assert result.content("reasoning").startswith(PLAN + POOL[:leaked])
    assert engine.kept_work().reasoning == PLAN
    assert_no_loop_quoted(correction_of(result), POOL * 6)


def test_second_loop_in_the_continuation_keeps_the_reasoning_between_the_loops() -> None:
    first = periodic_hit("reasoning", len(PLAN))
    again = "I resume with the next layer now. "
    second = periodic_hit("reasoning", len(again))
    detectors = iter(
        [
            ScriptedDetector(first, first.fired_at, first.prune_offset),
            ScriptedDetector(second, second.fired_at, second.prune_offset),
            ScriptedDetector(second, 1 << 62, 1 << 62),
        ]
    )
    engine = RescueEngine(
        LoopRescueConfig(), AnthropicWire(), REQUEST, detector_factory=detectors.__next__
    )
    result = run(
        engine,
        Script(reasoning=PLAN + UNIT * 6).events(),
        [Script(reasoning=again + UNIT * 6).events("msg_2"), Script(text="Done.").events("msg_3")],
    )
    check_well_formed(result)
    assert len(result.resumes) == 2
    assert engine.kept_work().reasoning == PLAN + again
    assert UNIT.strip() not in correction_of(Run(resumes=[result.resumes[1]]))
