"""Request-level policy: what the client's request becomes before it goes upstream.

Once per response, before any stream: loops are cut out of the request's earlier assistant
messages (``sanitize.py``), a conversation that stalled gets a nudge, and the requests after a
resume get the retry settings. Which requests the engine takes at all is :func:`applies_to`.
The tool-loop guard (``guard/``) judges the request too, but before an engine exists: the
adapters' shared service applies it, since a stopped request never reaches the engine.

It is apart from the engine because none of it sees a stream: it reads the request and the
conversation's state, and says what to send.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import Any

from ..config import LoopRescueConfig
from . import marker as notes
from .continuation import RequestEditor, has_retry_overrides
from .conversation import ConversationState
from .events import AuditRecord, EngineOutput, SaveConversation, SendRequest
from .marker import Lang
from .sanitize import HistoryCache, sanitize_history
from .stats import RescueStats


def applies_to(config: LoopRescueConfig, model: str | None) -> bool:
    """True when the request's model matches one of the configured glob patterns."""
    name = model or ""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in config.models)


def first_request(
    config: LoopRescueConfig,
    editor: RequestEditor,
    body: Mapping[str, Any],
    conversation: ConversationState,
    lang: Lang,
    stats: RescueStats,
    history_cache: HistoryCache | None = None,
    conversation_key: str = "",
) -> tuple[Mapping[str, Any], list[EngineOutput]]:
    """The client's ``body`` as it goes upstream first: its history sanitized, nudged or
    tweaked when due. Returns the request the continuations are built on (the client's, its
    history sanitized) and what to do, the ``SendRequest`` last."""
    acting = config.mode != "observe"
    out: list[EngineOutput] = []
    base = body
    if config.sanitizeHistory:
        result = sanitize_history(editor, body, config, history_cache, conversation_key)
        if result.changed:
            if acting:
                base = result.body
                stats.history_removed_chars += result.removed_chars
                stats.history_cuts += result.cuts
            out.append(AuditRecord("history", {**result.audit(), "mode": config.mode}))
    sent = base
    changed = False
    if acting and conversation.take_stall_nudge(config.stallCalls):
        sent = editor.with_user_text(sent, notes.stall_nudge(lang))
        changed = True
    if acting and conversation.take_retry_request():
        changed = True
        if has_retry_overrides(config):
            sent = editor.with_retry_overrides(sent, config)
    if changed:
        out.append(SaveConversation(conversation.copy()))
    # unchanged, the client's own bytes can go upstream as they came
    out.append(SendRequest(sent, 0, changed=sent is not body))
    return base, out
