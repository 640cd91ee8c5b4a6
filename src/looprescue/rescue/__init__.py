"""Sans-IO rescue: cut, prune and resume looping model streams (adapters live in ``proxy``)."""

from .attempt import LoopDetector
from .conversation import (
    ConversationState,
    ConversationStore,
    conversation_key,
    conversation_language,
)
from .engine import RescueEngine
from .request import applies_to
from .stats import RescueStats

__all__ = [
    "ConversationState",
    "ConversationStore",
    "LoopDetector",
    "RescueEngine",
    "RescueStats",
    "applies_to",
    "conversation_key",
    "conversation_language",
]
