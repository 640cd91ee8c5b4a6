"""``looprescue report``: one self-contained HTML page for a set of sessions: their loops in
context and their detour signals with the evidence, turn by turn."""

from looprescue.report.build import build_session
from looprescue.report.render import render_report
from looprescue.report.session import SessionReport

__all__ = ["SessionReport", "build_session", "render_report"]
