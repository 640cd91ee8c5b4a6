"""The detector's rules, in firing order: the one list a channel builds its rules from.

Firing order is which rule's hit wins when two would fire at the same point of the text. At a
checkpoint the segmenter's units come first, in offset order, and at one unit boundary its
feeds are judged as this list has them (``segment.FEED_ORDER``; a test holds the two to the
same order); then the rules that judge the window run, in this order. A channel latches on its
first hit, so a later rule never sees text past it.

Each entry builds its rule for one channel, or None where the rule has nothing to do there (a
rule of the visible text in the reasoning channel, a rule of a continuation in a first answer).
Adding a rule: its module in ``rules/``, an entry here (with the names of its hits), its tests,
a row in docs/detector.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from looprescue.config import DetectorConfig
from looprescue.detect.hits import Channel
from looprescue.detect.rule import Rule
from looprescue.detect.rules.counted import CountedRule
from looprescue.detect.rules.drift import DriftRule
from looprescue.detect.rules.echo import EchoRule
from looprescue.detect.rules.imports import ImportsRule
from looprescue.detect.rules.lines import LinesRule
from looprescue.detect.rules.opener import OpenerRule
from looprescue.detect.rules.overrun import OverrunRule
from looprescue.detect.rules.paragraph import ParagraphRule
from looprescue.detect.rules.parrot import ParrotRule
from looprescue.detect.rules.periodic import PeriodicRule
from looprescue.detect.rules.pool import PoolRule
from looprescue.detect.rules.redefined import RedefinedRule
from looprescue.detect.rules.refenced import RefencedRule
from looprescue.detect.rules.rehash import RehashRule
from looprescue.detect.rules.renumbered import RenumberedRule
from looprescue.detect.rules.reprise import RepriseRule
from looprescue.detect.rules.restate import RestateRule
from looprescue.detect.rules.rows import TableRowsRule
from looprescue.detect.rules.stutter import StutterRule


@dataclass(slots=True)
class RuleContext:
    """What a rule may be built from: the channel, the limits, and what the request says.

    ``asked``: the numbered ranges the request asks for (``detect.asked``); ``correction``: the
    sentences of the correction a continuation was sent; ``shown``: the answer the client
    already has when this is a continuation, ``shown_loop`` the kept copy of the loop in it;
    ``asked_up_to``: the largest count the request names, None when there is no request;
    ``sections``: the small counts of sections it asks for, with their words
    (``detect.asked.asked_sections``)."""

    channel: Channel
    cfg: DetectorConfig
    asked: tuple[tuple[int, int], ...] = ()
    correction: tuple[str, ...] = ()
    shown: str = ""
    shown_loop: str = ""
    asked_up_to: int | None = None
    sections: tuple[tuple[int, str], ...] = ()

    @property
    def visible(self) -> bool:
        """The visible-text channel, where lists, tables, quotes and fences are structure."""
        return self.channel == "text"


def _restate(ctx: RuleContext) -> Rule | None:
    if not ctx.shown:
        return None  # (a first answer: not built, as most channels are)
    rule = RestateRule(ctx.channel, ctx.shown, ctx.shown_loop)
    return rule if rule.active else None


def _stutter(ctx: RuleContext) -> Rule | None:
    return StutterRule(ctx.channel, ctx.cfg)


def _rehash(ctx: RuleContext) -> Rule | None:
    return RehashRule(ctx.channel)


def _pool(ctx: RuleContext) -> Rule | None:
    return PoolRule(ctx.channel, ctx.cfg)


def _imports(ctx: RuleContext) -> Rule | None:
    return ImportsRule(ctx.channel)


def _redefined(ctx: RuleContext) -> Rule | None:
    return RedefinedRule(ctx.channel)


def _refenced(ctx: RuleContext) -> Rule | None:
    return RefencedRule(ctx.channel)


def _renumbered(ctx: RuleContext) -> Rule | None:
    return RenumberedRule(ctx.channel, ctx.cfg)


def _rows(ctx: RuleContext) -> Rule | None:
    return TableRowsRule(ctx.channel)


def _lines(ctx: RuleContext) -> Rule | None:
    return LinesRule(ctx.channel, ctx.cfg)


def _echo(ctx: RuleContext) -> Rule | None:
    return EchoRule(ctx.channel, ctx.cfg)


def _paragraph(ctx: RuleContext) -> Rule | None:
    return ParagraphRule(ctx.channel, ctx.cfg) if ctx.visible else None


def _periodic(ctx: RuleContext) -> Rule | None:
    return PeriodicRule(ctx.channel, ctx.cfg, structural=ctx.visible)


def _drift(ctx: RuleContext) -> Rule | None:
    return DriftRule(ctx.channel, ctx.cfg)


def _opener(ctx: RuleContext) -> Rule | None:
    return OpenerRule(ctx.channel, ctx.cfg)


def _reprise(ctx: RuleContext) -> Rule | None:
    return RepriseRule(ctx.channel, ctx.cfg)


def _overrun(ctx: RuleContext) -> Rule | None:
    if not ctx.asked and not ctx.sections:
        return None
    rule = OverrunRule(ctx.channel, ctx.asked, ctx.sections)
    return rule if rule.active else None


def _counted(ctx: RuleContext) -> Rule | None:
    rule = CountedRule(ctx.channel, ctx.cfg.countedMaxItems, ctx.asked_up_to)
    return rule if rule.active else None


def _parrot(ctx: RuleContext) -> Rule | None:
    if not ctx.correction:
        return None
    rule = ParrotRule(ctx.channel, ctx.correction)
    return rule if rule.active else None


# In firing order, each with the names of the hits its rule makes (``Rule.names``): the names
# ``detector.ignore`` may list.
RULES: Final[tuple[tuple[tuple[str, ...], Callable[[RuleContext], Rule | None]], ...]] = (
    (("restate",), _restate),
    (("stutter",), _stutter),
    (("rehash",), _rehash),
    (("refenced",), _refenced),
    (("pool",), _pool),
    (("imports",), _imports),
    (("redefined",), _redefined),
    (("renumbered",), _renumbered),
    (("rows",), _rows),
    (("lines",), _lines),
    (("echo",), _echo),
    (("paragraph",), _paragraph),
    (("cycle", "counter"), _periodic),
    (("drift",), _drift),
    (("opener",), _opener),
    (("reprise",), _reprise),
    (("overrun",), _overrun),
    (("counted",), _counted),
    (("parrot",), _parrot),
)

# Every name a hit of a rule may carry.
RULE_NAMES: Final[tuple[str, ...]] = tuple(name for names, _ in RULES for name in names)


def build_rules(ctx: RuleContext) -> list[Rule]:
    """The rules of one channel, in firing order (those ``detector.ignore`` lists left out)."""
    ignored = ctx.cfg.ignore
    rules: list[Rule] = []
    for names, make in RULES:
        if ignored and names[0] in ignored:
            continue
        rule = make(ctx)
        if rule is not None:
            rules.append(rule)
    return rules
