"""The doctor: deterministic detour signals from an agent's session log (docs/doctor.md)."""

from looprescue.doctor.analysis import SessionAnalysis, analyze_log, doctor_config
from looprescue.doctor.signals import KINDS, DetourSignal

__all__ = ["KINDS", "DetourSignal", "SessionAnalysis", "analyze_log", "doctor_config"]
