"""How a loop is cut out of a finished text: the hit that counts, the text kept and the marker
that stands in for the rest. Pure; shared by ``clean`` (session files) and history
sanitization (requests), so both prune with the same rules and leave the same marker."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from looprescue.config import LoopRescueConfig
from looprescue.detect import Hit, scan_text
from looprescue.language import text_language

Language = Literal["auto", "zh", "en"]


def first_hit(
    text: str,
    channel: str,
    config: LoopRescueConfig,
    request: Sequence[str] = (),
    asked_up_to: int | None = None,
) -> Hit | None:
    """The loop to prune from a complete ``channel`` text: the one that starts earliest.
    ``request``, ``asked_up_to``: what the human wrote before it (``detect.scan_text``)."""
    if config.watch not in ("both", channel):
        return None  # the channel is not watched: never flagged, as in the proxy
    hits = scan_text(text, channel, config, request, asked_up_to)  # type: ignore[arg-type]
    return min(hits, key=lambda h: h.prune_offset) if hits else None


def pick_language(sample: str, language: Language = "auto") -> Literal["zh", "en"]:
    """The configured language, or the one ``sample`` is written in (``language.py``)."""
    if language != "auto":
        return language
    return text_language(sample)


def marker_text(removed_chars: int, channel: str, language: Literal["zh", "en"]) -> str:
    """The one-line note left where loop text was removed."""
    if language == "zh":
        what = "推理" if channel == "reasoning" else "内容"
        return f"〔已删除 {removed_chars} 个字符的重复{what}〕"
    what = "reasoning" if channel == "reasoning" else "text"
    return f"〔{removed_chars} chars of repeated {what} removed〕"


@dataclass(frozen=True, slots=True)
class TextCut:
    """``text`` cut to its first ``kept_chars`` chars, plus the marker line when there is one."""

    text: str
    kept_chars: int
    removed_chars: int
    marker: str | None


def cut_text(
    text: str, keep: int, channel: str, *, marker: bool = True, language: Language = "auto"
) -> TextCut | None:
    """``text`` without everything from ``keep`` on (None when that removes nothing)."""
    keep = max(0, keep)
    if keep >= len(text):
        return None
    kept = text[:keep]
    note = None
    if marker:
        # The kept text is the conversation's own language; the loop may be in another.
        note = marker_text(len(text) - keep, channel, pick_language(kept or text, language))
        kept += ("\n" if kept and not kept.endswith("\n") else "") + note
    return TextCut(kept, keep, len(text) - keep, note)
