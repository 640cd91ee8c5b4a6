"""The one validated configuration model.

Keys follow the DSH loop-rescue plugin's config block (camelCase), so a DSH user can paste the
same YAML. Unknown keys are errors: a typo must never silently fall back to a default.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from looprescue.errors import LoopRescueError

Mode = Literal["rescue", "cut", "observe"]
Watch = Literal["both", "reasoning", "text"]
Language = Literal["auto", "zh", "en"]
# What each continuation of one response changes (rescue/ladder.py), in the order they may come.
Rung = Literal["sampling", "lighter", "model"]
RUNGS: tuple[Rung, ...] = ("sampling", "lighter", "model")


class ConfigError(LoopRescueError, ValueError):
    """A configuration value is wrong; the message names the key and the reason."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class DetectorConfig(_Strict):
    """Thresholds of the streaming loop detector (see docs/detector.md for the why of each)."""

    # cycle: the tail is one unit repeated (numbers, and whitespace after a sentence end,
    # folded). How many copies make a loop depends on the unit (docs/detector.md): never fewer
    # than cycleMinRepeats; a unit with words once its copies fill cycleEarlyChars, a short one
    # after cycleShortRepeats, a block of sentences or lines after cycleBlockRepeats, one letter
    # after cycleCharRepeats, a clause of words said again inside one sentence after
    # cycleClauseRepeats; any other unit (digits, lone marks) once cycleMinChars are filled.
    cycleMinPeriod: int = Field(1, ge=1, le=100_000)
    cycleMaxPeriod: int = Field(4000, ge=2, le=100_000)
    cycleMinRepeats: float = Field(3.0, ge=2.0, le=1000)
    cycleMinChars: int = Field(600, ge=16, le=10_000_000)
    cycleEarlyChars: int = Field(300, ge=16, le=10_000_000)
    cycleShortRepeats: float = Field(10.0, ge=2.0, le=1000)
    cycleBlockRepeats: float = Field(4.0, ge=2.0, le=1000)
    cycleClauseRepeats: float = Field(3.0, ge=2.0, le=1000)
    cycleCharRepeats: int = Field(30, ge=2, le=100_000)
    # counter: copies equal but for their numbers; only a loop for prose blocks and table rows
    # (a counter template in code, data or a list is what the user asked for), and it needs
    # one copy more than a cycle of the same unit (a block of prose lines, or a list item
    # whose words stay: as many), and at least this many, in copies of counterMinChars (a CJK
    # char counted as two).
    counterMinRepeats: float = Field(4.0, ge=2.0, le=1000)
    counterMinChars: int = Field(200, ge=16, le=10_000_000)
    # A counter loop changes one number per copy (maybe shown twice); a log or a table of
    # measurements changes many, and is not a loop.
    counterMaxChangingNumbers: int = Field(2, ge=1, le=1000)
    # counted: a template equal but for a counting number is a loop once it runs past this
    # many items and past every number the request names (only when there is a request).
    # null: never.
    countedMaxItems: int | None = Field(40, ge=5, le=100_000)
    # paragraph: a long paragraph re-emitted verbatim (loops whose period is too long to show
    # three copies soon).
    paragraphMinChars: int = Field(280, ge=40, le=1_000_000)
    # pool: recent sentences drawn from a handful of recurring short phrases.
    poolWindow: int = Field(30, ge=4, le=10_000)
    poolMinCoverage: float = Field(0.75, gt=0.0, le=1.0)
    poolMaxPhrases: int = Field(12, ge=2, le=1000)
    poolMaxPhraseChars: int = Field(40, ge=2, le=10_000)
    # distinct phrases the pool needs; 1: copies of one sentence that differ in whitespace
    poolMinDistinct: int = Field(1, ge=1, le=1000)
    # chars from the pool's onset to where it fires: a short burst the model recovers from is
    # not cut
    poolMinChars: int = Field(300, ge=0, le=10_000_000)
    # lines: short lines that keep duplicating; a warning needs a second window to confirm.
    linesWindow: int = Field(50, ge=4, le=10_000)
    linesMaxMedianChars: int = Field(20, ge=1, le=10_000)
    linesMinDuplicateRatio: float = Field(0.7, gt=0.0, le=1.0)
    linesConfirmGap: int = Field(50, ge=1, le=100_000)
    # echo: special chat tokens (<|im_end|>, </s>, …) written out as text, outside code: the
    # model went on past its end of turn; this many of them, one an end of turn, fire.
    echoMinTokens: int = Field(3, ge=2, le=1000)
    # Inside ``` fences of the text channel, phrases and lines are structure, not loops, so the
    # pool and lines rules skip them, and counter templates never fire; cycle still runs, but
    # needs codeFenceRepeatFactor times its usual copies and codeFenceFactor times the chars of
    # its long-run rule (code legitimately repeats lines).
    codeFenceFactor: float = Field(2.0, ge=1.0, le=100)
    codeFenceRepeatFactor: float = Field(3.0, ge=1.0, le=100)
    # The safe watermark holds back any suffix that already occurred one period earlier, since
    # the start of a second copy looks just like one: zero loop chars reach a client, for about
    # one delta of lag on healthy text. Raising this releases chance recurrences shorter than
    # it at once, and lets at most that many chars of a second copy through (counted as periods
    # are, with a run of digits or whitespace as one char).
    holdMinRecurrence: int = Field(1, ge=1, le=64)
    # Rules switched off, by the names of their hits (as ruff's ``ignore``).
    ignore: tuple[str, ...] = ()

    @field_validator("ignore")
    @classmethod
    def _known_rules(cls, listed: tuple[str, ...]) -> tuple[str, ...]:
        if not listed:
            return listed
        names = set(listed)
        # (imported here: the registry builds its rules from this model)
        from looprescue.detect.registry import RULE_NAMES, RULES

        unknown = sorted(names - set(RULE_NAMES))
        if unknown:
            raise ValueError(
                f"no rule is named {', '.join(map(repr, unknown))} "
                f"(the rules: {', '.join(sorted(RULE_NAMES))})"
            )
        for rule_names, _ in RULES:
            chosen = names & set(rule_names)
            if chosen and len(chosen) < len(rule_names):
                raise ValueError(
                    f"{' and '.join(rule_names)} are one rule: ignore all of them or none"
                )
        return tuple(sorted(names))

    @model_validator(mode="after")
    def _check_ranges(self) -> DetectorConfig:
        if self.cycleMaxPeriod < self.cycleMinPeriod:
            raise ValueError(
                f"cycleMaxPeriod ({self.cycleMaxPeriod}) must be >= cycleMinPeriod "
                f"({self.cycleMinPeriod})"
            )
        if self.poolMinDistinct > self.poolMaxPhrases:
            raise ValueError("poolMinDistinct must be <= poolMaxPhrases")
        return self


class DoctorConfig(_Strict):
    """Thresholds of the detour analyzer."""

    retryStormMin: int = Field(2, ge=1, le=100_000)
    repeatToolMin: int = Field(3, ge=2, le=100_000)
    toolErrorMin: int = Field(2, ge=2, le=100_000)
    compactionThreshold: int = Field(3, ge=1, le=100_000)
    injectThreshold: int = Field(15, ge=1, le=100_000)
    delegationThreshold: int = Field(20, ge=1, le=100_000)
    promptBloatSteps: int = Field(3, ge=2, le=100_000)
    toolCycleMinRepeats: int = Field(3, ge=2, le=100_000)
    toolCycleMaxWidth: int = Field(5, ge=2, le=100)
    narrationMinRepeats: int = Field(3, ge=2, le=100_000)
    narrationMinChars: int = Field(40, ge=1, le=1_000_000)
    maxTrackedTools: int = Field(256, ge=1, le=1_000_000)
    # evidence seqs kept per signal: an adversarial log cannot grow one signal without bound.
    maxEvidence: int = Field(64, ge=1, le=1_000_000)


class ToolGuardConfig(_Strict):
    """The tool-loop guard: repeated tool calls across requests (docs/rescue.md)."""

    enabled: bool = True
    # the same call with the same result this many times in a row is a loop
    repeatCalls: int = Field(5, ge=2, le=100_000)
    # a sequence of 2..cycleMaxWidth calls, same results, repeated this many times in a row
    cycleRepeats: int = Field(3, ge=2, le=100_000)
    cycleMaxWidth: int = Field(5, ge=2, le=20)
    # the same call failing the same way this many times since it last succeeded
    failedCalls: int = Field(4, ge=2, le=100_000)
    steer: bool = True
    stop: bool = True
    # loop calls past the threshold that are steered before the guard stops (steer and stop on)
    steerRequests: int = Field(1, ge=1, le=1000)
    # tool-name globs never counted as a loop (polling and status tools)
    exempt: tuple[str, ...] = ()
    # model-name glob -> dollars per million input tokens, to price what loops cost
    inputPrices: dict[str, float] = {}


class ProxyConfig(_Strict):
    """Settings of ``looprescue proxy`` (CLI flags override them)."""

    upstream: str | None = None
    host: str = "127.0.0.1"
    port: int = Field(8787, ge=0, le=65535)
    # opt-in JSONL audit log of detections, cuts and resumes (holds the raw loop text)
    auditLog: str | None = None
    # an upstream that sends no byte for this long is treated as stalled
    upstreamIdleTimeoutMs: int = Field(300_000, ge=1, le=86_400_000)
    connectTimeoutMs: int = Field(30_000, ge=1, le=600_000)
    # in rescue and cut, a stream's upstream bytes are handed to the engine at most this often
    # (the first read, the end and a failure at once); 0: each read as it comes
    coalesceMs: int = Field(100, ge=0, le=1000)
    maxConversations: int = Field(4096, ge=1, le=10_000_000)
    # processes serving one port (conversation state is per process unless `state` is shared)
    workers: int = Field(1, ge=1, le=64)
    # where per-conversation state lives: "memory" (this process) or redis://host:port[/db]
    state: str = Field("memory", pattern=r"^(memory|rediss?://.+|unix://.+)$")
    # listen on this Unix socket instead of host and port
    uds: str | None = None
    # The server's limits: each one a client can exceed gets its HTTP answer (408, 413, 431,
    # 503) instead of holding memory, a file descriptor or the event loop.
    headerTimeoutMs: int = Field(10_000, ge=1, le=3_600_000)
    bodyTimeoutMs: int = Field(30_000, ge=1, le=3_600_000)
    keepAliveTimeoutMs: int = Field(5_000, ge=1, le=3_600_000)
    # a client that reads none of its response for this long is dropped
    sendTimeoutMs: int = Field(300_000, ge=1, le=86_400_000)
    maxHeaderBytes: int = Field(64 << 10, ge=1024, le=16 << 20)
    maxHeaders: int = Field(100, ge=8, le=10_000)
    # Anthropic's Messages API takes requests up to 32 MB
    maxBodyBytes: int = Field(32 << 20, ge=1024, le=1 << 30)
    # client connections per process (also kept under half the open-file limit)
    maxConnections: int = Field(1000, ge=1, le=1_000_000)
    # how long streams in flight may go on after SIGTERM/SIGINT before they are cut
    shutdownGraceMs: int = Field(30_000, ge=0, le=3_600_000)
    # The upstream client: CAs it trusts for HTTPS (besides SSL_CERT_FILE and
    # REQUESTS_CA_BUNDLE), a client certificate, and how many connections it holds at once.
    caFile: str | None = None
    clientCert: str | None = None
    clientKey: str | None = None
    maxUpstreamConnections: int = Field(1000, ge=1, le=1_000_000)
    # the proxy's log lines on stderr: the least level shown, and text or JSON lines
    logLevel: Literal["debug", "info", "warning", "error"] = "info"
    logFormat: Literal["text", "json"] = "text"
    # one INFO line per request served (looprescue.access)
    accessLog: bool = False


class ModelPrice(_Strict):
    """What a model costs, in dollars per million tokens."""

    input: float = Field(0.0, ge=0.0, le=1_000_000.0)
    output: float = Field(0.0, ge=0.0, le=1_000_000.0)


class LoopRescueConfig(_Strict):
    """Top-level configuration: rescue policy, detector and doctor thresholds."""

    mode: Mode = "rescue"
    watch: Watch = "both"
    marker: bool = True
    language: Language = "auto"
    # backups `clean` and `repair` keep of one session log (the oldest go first)
    keepBackups: int = Field(5, ge=1, le=10_000)
    # model-name glob -> $ per million input and output tokens: `report` prices sessions and loops
    prices: dict[str, ModelPrice] = {}
    maxConsecutiveRescues: int = Field(3, ge=0, le=1000)
    stallCalls: int = Field(3, ge=0, le=1000)
    stallMinReasoningChars: int = Field(1024, ge=0, le=100_000_000)
    # A resume sampled as the loop was tends to loop again: by default it gets a little
    # randomness and, on OpenAI-protocol upstreams, penalties on tokens it already wrote. More
    # randomness makes a small model ramble on instead of finishing (docs/e2e.md measures the
    # settings against each other). null: sent as the client asked.
    retryTemperature: float | None = Field(0.2, ge=0.0, le=2.0)
    retryReasoningEffort: Literal["low", "medium", "high", "max"] | None = None
    retryRequests: int = Field(1, ge=0, le=1000)
    # OpenAI-protocol upstreams only (Anthropic Messages has no penalties)
    retryFrequencyPenalty: float | None = Field(1.0, ge=-2.0, le=2.0)
    retryPresencePenalty: float | None = Field(0.5, ge=-2.0, le=2.0)
    # A continuation that loops again rarely stops for another draw of the same sampling: each
    # later continuation of a response takes the next rung (rescue/ladder.py); past the last
    # rung it stays there. "model" sends retryModel.
    retryLadder: tuple[Rung, ...] = ("sampling", "lighter")
    retryModel: str | None = Field(None, min_length=1)
    resumeTimeoutMs: int = Field(300_000, ge=1, le=86_400_000)
    models: tuple[str, ...] = ("*",)
    # cut loops out of the earlier assistant messages of every request before it goes upstream
    sanitizeHistory: bool = True
    # Most chars of a channel rescue holds back behind the newest: a stretch that may still
    # become a loop waits for the detector at most this long, then goes out (and counts as
    # leaked if it does turn out loop). null: hold all the watermark asks (no loop char leaks,
    # but a long run of short sentences can stall the stream for seconds).
    holdMaxChars: int | None = Field(None, ge=0, le=10_000_000)
    # The same bound in time, on the clock the adapter tells the engine (the proxy: the
    # time each upstream read is handed on); null: no time bound.
    holdMaxMs: int | None = Field(800, ge=0, le=3_600_000)
    detector: DetectorConfig = DetectorConfig()
    doctor: DoctorConfig = DoctorConfig()
    toolGuard: ToolGuardConfig = ToolGuardConfig()
    proxy: ProxyConfig = ProxyConfig()

    @field_validator("retryLadder")
    @classmethod
    def _check_ladder(cls, ladder: tuple[Rung, ...]) -> tuple[Rung, ...]:
        order = [RUNGS.index(rung) for rung in ladder]
        if not order or order != sorted(set(order)):
            raise ValueError(
                "one rung or more, in the order sampling, lighter, model, each at most once"
            )
        return ladder

    @model_validator(mode="after")
    def _check_retry_model(self) -> LoopRescueConfig:
        if ("model" in self.retryLadder) != (self.retryModel is not None):
            raise ValueError(
                "retryModel and the retryLadder rung model go together: set both or neither"
            )
        return self


def price_of(prices: dict[str, ModelPrice], model: str | None) -> ModelPrice | None:
    """The price of ``model``: the first glob of ``prices`` that matches it, if any."""
    if not model:
        return None
    return next((price for glob, price in prices.items() if fnmatch.fnmatchcase(model, glob)), None)


def _format_validation_error(err: ValidationError, source: str) -> str:
    lines = []
    for item in err.errors():
        key = ".".join(str(p) for p in item["loc"]) or "(top level)"
        reason = item["msg"]
        if item["type"] == "extra_forbidden":
            reason = "unknown key"
        lines.append(f"{source}: {key}: {reason}")
    return "\n".join(lines)


def config_from_mapping(data: Any, source: str = "config") -> LoopRescueConfig:
    """Validate a plain mapping (e.g. parsed YAML) into a config, or raise ConfigError."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: top level must be a mapping, got {type(data).__name__}")
    try:
        return LoopRescueConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_format_validation_error(err, source)) from None


class _Null:
    """An override that sets a key to null (``--set retryTemperature=null``); a plain None
    override means the flag was not given."""

    def __repr__(self) -> str:
        return "null"


NULL: Any = _Null()


def load_config(
    path: str | Path | None, overrides: dict[str, Any] | None = None
) -> LoopRescueConfig:
    """Load YAML from ``path`` (None: defaults) and apply dotted-key ``overrides`` on top."""
    data: dict[str, Any] = {}
    # Name what the bad value came from: the file (with or without flags on top), or the flags.
    source = (
        "command line" if overrides and any(v is not None for v in overrides.values()) else "config"
    )
    if path is not None:
        source = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as err:
            raise ConfigError(f"{source}: cannot read config: {err.strerror or err}") from None
        try:
            loaded = yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise ConfigError(f"{source}: invalid YAML: {err}") from None
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"{source}: top level must be a mapping")
        data = loaded or {}
    for dotted, value in (overrides or {}).items():
        if value is None:
            continue
        node = data
        *parents, leaf = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"{source}: {dotted}: parent {part!r} is not a mapping")
        node[leaf] = None if value is NULL else value
    return config_from_mapping(data, source)
