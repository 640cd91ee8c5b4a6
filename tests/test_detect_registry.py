"""The registry builds every rule, in one firing order that the segmenter follows too."""

from __future__ import annotations

import pytest

from looprescue.config import DetectorConfig
from looprescue.detect.channel import ChannelDetector
from looprescue.detect.registry import RULE_NAMES, RULES, RuleContext, build_rules
from looprescue.detect.rule import CHECKPOINT, FEEDS, WATERMARK
from looprescue.detect.segment import FEED_ORDER

EVERY_RULE = RuleContext(
    "text",
    DetectorConfig(),
    asked=((1, 10),),
    correction=("Go on.",),
    shown="The answer that the client has already seen on its screen.",
    asked_up_to=0,
)


def test_every_rule_is_built_once_with_feeds_the_detector_knows() -> None:
    rules = build_rules(EVERY_RULE)
    names = [name for rule in rules for name in rule.names()]
    assert len(names) == len(set(names))
    assert set(names) >= {
        "cycle",
        "counter",
        "pool",
        "stutter",
        "echo",
        "overrun",
        "parrot",
        "restate",
        "rehash",
    }
    for rule in rules:
        assert rule.feeds() <= FEEDS, rule.names()
        assert rule.feeds(), rule.names()


def test_each_entry_names_the_hits_of_its_rule() -> None:
    # the names are what ``detector.ignore`` lists: they must be the rule's own
    built = {rule.names(): rule for rule in build_rules(EVERY_RULE)}
    for names, make in RULES:
        rule = make(EVERY_RULE)
        assert rule is not None and rule.names() == names and names in built
    assert len(RULE_NAMES) == len(set(RULE_NAMES))


def test_an_ignored_rule_is_not_built_and_a_wrong_name_is_refused() -> None:
    cfg = DetectorConfig(ignore=("reprise", "cycle", "counter"))
    names = {
        name
        for rule in build_rules(RuleContext("text", cfg, asked=((1, 10),)))
        for name in rule.names()
    }
    assert not names & {"reprise", "cycle", "counter"} and {"pool", "drift"} <= names
    with pytest.raises(ValueError, match="no rule is named 'reprize'"):
        DetectorConfig(ignore=("reprize",))
    with pytest.raises(ValueError, match="cycle and counter are one rule"):
        DetectorConfig(ignore=("counter",))


def test_the_segmenter_judges_a_boundary_in_registry_order() -> None:
    rules = build_rules(EVERY_RULE)
    ranks = [
        min(FEED_ORDER.index(feed) for feed in rule.feeds() if feed in FEED_ORDER)
        for rule in rules
        if rule.feeds() & set(FEED_ORDER)
    ]
    assert ranks == sorted(ranks)
    # the segmenter's units come before the rules that judge the window, at every checkpoint
    fed = [bool(rule.feeds() & set(FEED_ORDER)) for rule in rules]
    assert fed == sorted(fed, reverse=True)


@pytest.mark.parametrize("channel", ["reasoning", "text"])
def test_a_first_answer_builds_no_continuation_rule(channel: str) -> None:
    names = {
        name
        for rule in build_rules(RuleContext(channel, DetectorConfig()))
        for name in rule.names()
    }
    assert not names & {"overrun", "counted", "parrot", "restate"}
    assert ("paragraph" in names) == (channel == "text")


def test_the_detector_asks_each_rule_only_for_what_it_takes() -> None:
    detector = ChannelDetector(
        "text",
        DetectorConfig(),
        ((1, 10),),
        ("Go on.",),
        "The answer that the client has already seen on its screen.",
    )
    assert detector._window_rules == [r for r in detector._rules if CHECKPOINT in r.feeds()]
    assert detector._holding_rules == [r for r in detector._rules if WATERMARK in r.feeds()]
    assert detector.rule("counter") is detector.rule("cycle")
