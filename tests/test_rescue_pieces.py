"""The engine's pieces alone: one attempt's stream, the cut plan, the continuations' record.

The engine's own tests drive them together; these pin each piece's contract with plain values,
so a change to one shows where it broke."""

from __future__ import annotations

from dataclasses import dataclass

from looprescue.config import LoopRescueConfig
from looprescue.detect import Hit
from looprescue.rescue import marker as notes
from looprescue.rescue.attempt import UNLIMITED, Attempt, ClientSide, HoldRules
from looprescue.rescue.cut import CutAction, CutPlan, plan_cut
from looprescue.rescue.events import BlockStarted, EmitDelta
from looprescue.rescue.resume import DetectorInputs, Resumes
from looprescue.rescue.stats import RescueStats
from looprescue.wire.anthropic import AnthropicWire

WATCH_BOTH = frozenset({"reasoning", "text"})


@dataclass
class Watermark:
    """Clears a channel up to ``safe``; fires ``hit`` when its channel reaches ``fire_at``."""

    safe: int = UNLIMITED
    hit: Hit | None = None
    fire_at: int = UNLIMITED
    fed: int = 0

    def feed(self, channel: str, delta: str) -> Hit | None:
        self.fed += len(delta)
        return self.hit if self.fed >= self.fire_at else None

    def flush(self, channel: str) -> Hit | None:
        return None

    def safe_offset(self, channel: str) -> int:
        return min(self.safe, self.fed)


def attempt_with(
    detector: Watermark, *, max_chars: int = UNLIMITED, acting: bool = True
) -> tuple[Attempt, ClientSide]:
    rules = HoldRules(WATCH_BOTH, acting, max_chars, -1.0, True, "en")
    client = ClientSide(RescueStats())
    attempt = Attempt(0, detector, rules, client)
    attempt.start_block(BlockStarted(0, "text"))
    return attempt, client


def sent(outputs: list) -> str:
    return "".join(o.text for o in outputs if isinstance(o, EmitDelta))


def loop_hit(channel: str = "text", onset: int = 10, prune: int = 20, fired: int = 40) -> Hit:
    return Hit("cycle", channel, prune, onset, fired, 3.0, prune - onset, "unit")  # type: ignore[arg-type]


def test_an_attempt_holds_what_the_watermark_suspects_and_lets_it_out_as_it_clears() -> None:
    detector = Watermark(safe=4)
    attempt, client = attempt_with(detector)
    assert sent(attempt.feed_text(0, "text", "abcdefgh", None)) == "abcd"
    assert attempt.queue.held_chars == 4
    detector.safe = 10
    assert sent(attempt.feed_text(0, "text", "ij", None)) == "efghij"
    assert client.visible["text"] == ["abcd", "efghij"] and client.stats.released_chars == 10


def test_an_attempt_bounds_the_held_text_in_chars() -> None:
    attempt, _ = attempt_with(Watermark(safe=0), max_chars=3)
    assert sent(attempt.feed_text(0, "text", "abcdefgh", None)) == "abcde"
    assert attempt.queue.held_chars == 3


def test_a_run_of_one_read_is_judged_once_when_it_settles() -> None:
    attempt, _ = attempt_with(Watermark(safe=5))
    attempt.more = True
    assert attempt.feed_text(0, "text", "abc", None) == []
    assert attempt.feed_text(0, "text", "def", None) == []
    assert attempt.release_due
    assert sent(attempt.settle()) == "abcde" and not attempt.release_due


def test_an_attempt_leaves_a_confirmed_loop_to_the_engine_and_sends_nothing_of_it() -> None:
    hit = loop_hit()
    attempt, client = attempt_with(Watermark(safe=0, hit=hit, fire_at=6))
    assert attempt.feed_text(0, "text", "abc", None) == []
    assert attempt.hit is None
    assert attempt.feed_text(0, "text", "def", None) == []
    assert attempt.hit is hit and client.visible["text"] == []
    # the cut keeps the text before the prune point and drops the rest
    assert sent(attempt.release_keeping("text", 4)) == "abcd"
    assert attempt.queue.held_chars == 0


def plan(**overrides: object) -> CutPlan:
    arguments: dict = {
        "text": "x" * 40,
        "fed": 40,
        "released": 15,
        "mode": "rescue",
        "tool_call_open": False,
        "tool_calls_sent": 0,
        "rescues_in_a_row": 0,
        "max_rescues": 3,
        "budget": None,
        "tokens_left": None,
        "min_resume_tokens": 16,
        "marker": True,
        "lang": "en",
    }
    arguments.update(overrides)
    hit = arguments.pop("hit", loop_hit())
    return plan_cut(hit, **arguments)  # type: ignore[arg-type]


def test_the_cut_plan_keeps_one_copy_and_counts_what_the_client_already_had() -> None:
    text = "intro....." + "LOOP" * 10  # the loop from 10, one copy kept to 20, 40 fed
    cut = plan(text=text, released=25)
    assert cut.action is CutAction.RESUME and cut.note == ""
    # released past the prune point: the client keeps it, and it counts as leaked
    assert cut.point.keep_to == 25 and cut.point.leaked_loop_chars == 5
    assert cut.point.kept_loop_chars == 10
    assert cut.loop_text == text[25:40] and cut.loop_copy == text[10:25]
    held = plan(text=text, released=12)
    assert held.point.keep_to == 20 and held.point.leaked_loop_chars == 0
    assert held.loop_text == text[20:40] and held.loop_copy == text[10:20]


def test_the_cut_plan_says_how_the_response_finishes_and_why() -> None:
    marked = plan(mode="cut")
    assert marked.action is CutAction.CUT and marked.note == ""  # the text's marker says it
    unmarked = plan(mode="cut", marker=False)
    assert unmarked.reason == "stop" and unmarked.note == notes.cut_note("text", "en")
    reasoning = plan(mode="cut", hit=loop_hit("reasoning"))  # its marker is in the reasoning
    assert reasoning.note == notes.cut_note("reasoning", "en")
    capped = plan(rescues_in_a_row=3)
    assert capped.action is CutAction.CAP and capped.note == notes.cap_note(3, "en")
    spent = plan(budget=700, tokens_left=5)
    assert spent.action is CutAction.BUDGET and spent.reason == "max_tokens"
    assert spent.note == notes.budget_note(700, "en")
    tools = plan(tool_calls_sent=1)
    assert tools.reason == "tool_calls" and tools.note == ""
    finished = plan(hit=Hit("overrun", "text", 20, 10, 40, 3.0, None, "13."))
    assert finished.action is CutAction.FINISH and finished.note == ""


def test_the_continuations_send_back_no_reasoning_of_a_loop_cut_out_of_it() -> None:
    client = ClientSide(RescueStats())
    resumes = Resumes(
        LoopRescueConfig(), AnthropicWire(), "en", client, None, DetectorInputs(asked=((1, 5),))
    )
    client.visible["reasoning"] += ["Plan it. ", "Again. Again. ", "Then write."]
    client.visible["text"].append("The answer")
    attempt = Attempt(
        0, Watermark(), HoldRules(WATCH_BOTH, True, UNLIMITED, -1.0, True, "en"), client
    )
    cut = plan(hit=loop_hit("reasoning", onset=9, prune=16), text="Plan it. Again. Again. ", fed=23)
    resumes.note_cut(cut, attempt)
    kept = resumes.kept_work()
    assert kept.reasoning == "Plan it. Again. Then write." and kept.text == "The answer"
