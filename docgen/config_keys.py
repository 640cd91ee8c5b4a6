"""What each configuration key means, in words; everything else about a key (its type, range
and default) is read from the config model itself. ``tests/test_docs.py`` fails when a key of
the model has no entry here or an entry names no key, so the reference cannot drift."""

from __future__ import annotations

SECTIONS = {
    "": "Rescue policy (proxy) and what `clean` writes.",
    "detector": "The streaming loop detector, shared by the proxy, `scan`, `clean` and `report`"
    " ([docs/detector.md](docs/detector.md)).",
    "doctor": "Thresholds of the detour signals of `doctor` and `report`"
    " ([docs/doctor.md](docs/doctor.md)).",
    "toolGuard": "The tool-loop guard: the same tool call with the same result, request after"
    " request, steered and then stopped by the proxy, `wrap()` and the LiteLLM callback"
    " ([docs/rescue.md](docs/rescue.md#tool-loop-guard)).",
    "proxy": "`looprescue proxy` (its flags override these) ([docs/rescue.md](docs/rescue.md)).",
}

MEANINGS = {
    # -- rescue policy
    "mode": "What the proxy does with a confirmed loop: `rescue` cuts it and resumes the task"
    " in the same response, `cut` cuts it and ends the response, `observe` changes nothing and"
    " only records detections.",
    "watch": "Which channels the detector judges; an unwatched channel is never held back or cut.",
    "marker": "Leave a one-line note such as `〔1234 chars of repeated reasoning removed〕` where"
    " loop text was removed (proxy and `clean`).",
    "language": "Language of markers, notes and corrections; `auto`: Chinese when a human"
    " message of the conversation is Chinese (for `clean`: when the kept text is), else English."
    " Japanese and Korean text gets English: the judgement reads the script, not only the"
    " ideographs.",
    "keepBackups": "Backups `clean` and `repair` keep of one session log; a new backup"
    " retires the oldest beyond it (`clean --undo` restores them newest first).",
    "prices": "Model-name glob to dollars per million input and output tokens, e.g."
    ' `{"deepseek-*": {input: 0.27, output: 1.10}}` (the first glob that matches):'
    " `report` then shows what each session and its loops cost in money, besides tokens.",
    "maxConsecutiveRescues": "Resumes in a row per conversation; past it a looping response is"
    " cut and ends with a visible note. A response without a loop resets the count.",
    "stallCalls": "After this many reasoning-only responses in a row, the next request of the"
    " conversation gets a short nudge to answer or call a tool (0: never).",
    "stallMinReasoningChars": "Reasoning chars a response needs to count as reasoning-only.",
    "retryTemperature": "Temperature of the first `retryRequests` upstream requests after a"
    " resume; a resume sampled as the loop was tends to loop again, and more randomness makes a"
    " small model ramble on (null: the request's own).",
    "retryReasoningEffort": "Reasoning effort of those requests (Anthropic"
    " `output_config.effort`, OpenAI `reasoning_effort`; unset: unchanged).",
    "retryRequests": "How many upstream requests after a resume, the continuation first, get"
    " the retry settings.",
    "retryFrequencyPenalty": "`frequency_penalty` of those requests (OpenAI route only; null:"
    " the request's own).",
    "retryPresencePenalty": "`presence_penalty` of those requests (OpenAI route only; null: the"
    " request's own).",
    "retryLadder": "What each continuation of one response changes, one rung per resume:"
    " `sampling` (the retry settings above), `lighter` (the same with reasoning effort low, or"
    " thinking off where the request's only switch is on/off), `model` (the same on"
    " `retryModel`). Past the last rung a resume stays on it. In that order, each at most once"
    " ([rescue.md](rescue.md#the-recovery-ladder)).",
    "retryModel": "The model the `model` rung of `retryLadder` sends continuations to (unset:"
    " no such rung; set it and list the rung together).",
    "resumeTimeoutMs": "How long the proxy waits for a continuation's first byte before it ends"
    " the response with an error.",
    "models": "Glob patterns of the model names the proxy acts on; other models pass through"
    " unchanged.",
    "sanitizeHistory": "Cut loops out of the earlier assistant messages of each request before"
    " it goes upstream, as `clean` cuts them (a request with none goes byte for byte).",
    "holdMaxChars": "Most chars of a channel that `rescue` and `cut` hold back behind the"
    " newest while the detector decides. Held text past it goes out; if it then turns out to"
    " be loop, it is counted as leaked (`leaked_loop_chars`). null: no bound in chars"
    " ([docs/rescue.md](docs/rescue.md)).",
    "holdMaxMs": "Longest a char waits in the proxy's hold-back (`rescue`, `cut`): text held"
    " this long goes out at the next upstream read, and if it then turns out to be loop it is"
    " counted as leaked. The default keeps the added delay of healthy text under 1 s and lets"
    " a loop confirmed within it leak nothing; null: hold all the detector asks (no loop char"
    " leaks, but a run of short sentences can freeze the stream for seconds).",
    # -- detector
    "detector.cycleMinPeriod": "Shortest repeated unit the cycle rule looks for (chars, with"
    " a number folded to one, and whitespace after a sentence end to one space or none).",
    "detector.cycleMaxPeriod": "Longest repeated unit the cycle rule looks for.",
    "detector.cycleMinRepeats": "Copies a cycle needs at the least, whatever its unit.",
    "detector.cycleMinChars": "Chars of copies a cycle of any other unit (digits, lone marks)"
    " needs.",
    "detector.cycleEarlyChars": (
        "Chars of copies after which a unit with words is a loop (a CJK char counts as two)."
    ),
    "detector.cycleShortRepeats": "Copies a short unit needs.",
    "detector.cycleBlockRepeats": "Copies a block of sentences or lines needs.",
    "detector.cycleClauseRepeats": "Copies a clause of words (one comma, no sentence end) needs.",
    "detector.cycleCharRepeats": "Copies a one-letter unit needs.",
    "detector.counterMinRepeats": "Copies a counter loop (copies equal but for their numbers)"
    " needs; it needs one copy more than a cycle of the same unit, except a block of prose"
    " lines or a list item whose words stay, which need as many.",
    "detector.counterMinChars": "Chars of copies a counter loop needs at the least (a CJK char"
    " counted as two).",
    "detector.counterMaxChangingNumbers": "Numbers that may change from one copy of a counter"
    " loop to the next; a log or a table of measurements changes more, and is not a loop.",
    "detector.countedMaxItems": "Items a template equal but for a counting number may run to"
    " (`elif n == 14: return 14`, …) before it is a loop, when the request names no larger"
    " number; the items past it are cut. Only judged against a request (never by `scan`)."
    " null: never.",
    "detector.paragraphMinChars": "Length of a prose paragraph of the visible text whose"
    " verbatim re-emission is a loop (periods too long to wait for three copies).",
    "detector.poolWindow": "Recent sentences the pool rule looks at.",
    "detector.poolMinCoverage": "Share of them that must be recurring short phrases.",
    "detector.poolMaxPhrases": "Most distinct phrases a pool draws from.",
    "detector.poolMaxPhraseChars": "Widest sentence that counts as a short phrase (a CJK char"
    " counted as two).",
    "detector.poolMinDistinct": "Distinct phrases a pool needs (1: copies of one sentence that"
    " differ only in whitespace count).",
    "detector.poolMinChars": "Chars from a pool's onset to where it fires (a CJK char counted"
    " as two): a short burst the model recovers from is not cut.",
    "detector.linesWindow": "Recent lines the lines rule looks at.",
    "detector.linesMaxMedianChars": "Median length a window of short lines has at most.",
    "detector.linesMinDuplicateRatio": "Share of duplicated lines in such a window.",
    "detector.linesConfirmGap": "Lines after a first matching window before a second one"
    " confirms the loop.",
    "detector.echoMinTokens": "Special chat tokens (`<|im_end|>`, `</s>`, …) written out as"
    " text outside code, one of them an end of turn, that make an echo loop.",
    "detector.codeFenceFactor": "Inside ``` fences the cycle rule needs this many times its"
    " usual chars (code repeats lines legitimately).",
    "detector.codeFenceRepeatFactor": "… and this many times its usual copies; the pool, lines"
    " and counter rules skip fences (only the imports, redefined and refenced rules read fenced"
    " lines on their own).",
    "detector.holdMinRecurrence": "Shortest recurring suffix the proxy holds back. 1: no loop"
    " char reaches a client, for about one delta of lag; more: chance recurrences go out at"
    " once and at most that many chars of a second copy can slip through.",
    "detector.ignore": "Rules switched off, by the names of their hits (the table in"
    " [docs/detector.md](docs/detector.md)), e.g. `[reprise]` or `--set"
    " 'detector.ignore=[reprise, drift]'`: for text whose own shape one rule mistakes for a"
    " loop. `cycle` and `counter` are one rule: list both or neither.",
    # -- doctor
    "doctor.retryStormMin": "Retried model requests (`llm/retry`) in one turn that make a retry"
    " storm.",
    "doctor.repeatToolMin": "Consecutive identical tool calls (tool, arguments and result)"
    " that make a repeat run.",
    "doctor.toolErrorMin": "Standing failures of one tool over at least two turns that make"
    " tool misuse.",
    "doctor.compactionThreshold": "Compaction passes in a session that make context thrash.",
    "doctor.injectThreshold": "User messages no human wrote (snapshots, reminders, notices)"
    " that make context thrash.",
    "doctor.delegationThreshold": "Subagent descriptors, catalog entries and hook invocations"
    " that make context thrash.",
    "doctor.promptBloatSteps": "Growths of the request prompt in a row that make prompt bloat.",
    "doctor.toolCycleMinRepeats": "Full repeats of a short sequence of calls that make a tool"
    " cycle.",
    "doctor.toolCycleMaxWidth": "Longest sequence of calls a tool cycle is looked for in.",
    "doctor.narrationMinRepeats": "Consecutive assistant messages with the same visible text"
    " that make a narration loop.",
    "doctor.narrationMinChars": "Shortest normalised text that can be part of a narration run.",
    "doctor.maxTrackedTools": "Entries of the per-tool tables (open calls, runs, failures,"
    " cycles): the state stays bounded.",
    "doctor.maxEvidence": "Evidence seqs kept per signal (its metric still counts them all).",
    # -- tool-loop guard
    "toolGuard.enabled": "Judge the tool calls of every request's history before it goes"
    " upstream (in `observe` mode a loop is only recorded).",
    "toolGuard.repeatCalls": "The same call (tool and arguments) with the same result this many"
    " times in a row is a loop.",
    "toolGuard.cycleRepeats": "A sequence of 2 to `cycleMaxWidth` calls with the same results"
    " repeated this many times in a row is a loop.",
    "toolGuard.cycleMaxWidth": "Longest sequence of calls a cycle is looked for in.",
    "toolGuard.failedCalls": "The same call failing with the same error this many times since"
    " it last succeeded is a loop.",
    "toolGuard.steer": "At a loop, add a short note to the request before it goes upstream,"
    " naming the repeated call (the client's history never holds it).",
    "toolGuard.stop": "When the loop goes on, answer without calling the upstream: a normal"
    " assistant message saying what happened, and `looprescue-outcome: tool-loop-stopped`.",
    "toolGuard.steerRequests": "Loop calls past the threshold that are steered before the"
    " stop (with `steer` and `stop` on).",
    "toolGuard.exempt": 'Tool-name globs never counted as a loop, e.g. `["*_status",'
    ' "BashOutput"]` for tools an agent polls.',
    "toolGuard.inputPrices": "Model-name glob to dollars per million input tokens (the first"
    " glob that matches): the audit log and `/metrics` then price what tool loops cost and"
    " what stopping them saved, besides counting their tokens.",
    # -- proxy
    "proxy.upstream": "Base URL of the model API; request paths are appended to it"
    " (`--upstream`, required).",
    "proxy.host": "Address to listen on (`--host`).",
    "proxy.port": "Port to listen on (`--port`).",
    "proxy.auditLog": "JSONL audit log of detections, cuts and resumes, with the removed text"
    " (`--audit-log`; unset: none).",
    "proxy.upstreamIdleTimeoutMs": "An upstream that sends nothing for this long is treated as"
    " stalled.",
    "proxy.connectTimeoutMs": "Time to connect to the upstream.",
    "proxy.coalesceMs": "In `rescue` and `cut`, a stream's upstream bytes go to the engine at"
    " most this often (the first read, the end and a failure at once): the engine parses,"
    " judges and releases what came meanwhile in one go, which costs less CPU than doing it"
    " read by read, and the client's text waits at most this long for it. 0: every read as it"
    " comes. `observe` passes the upstream's bytes on as they come.",
    "proxy.maxConversations": "Conversations whose counters the proxy keeps (least recently"
    " used dropped first).",
    "proxy.workers": "Processes serving the port (`--workers`).",
    "proxy.state": "Where conversation state lives: `memory` (each process its own) or"
    " `redis://host:port/db` (`rediss://`, `unix://`), shared by workers and instances"
    " (`--state`).",
    "proxy.uds": "Listen on this Unix socket instead of `host` and `port` (`--uds`).",
    "proxy.headerTimeoutMs": "A request head (request line and headers) must arrive whole"
    " this soon after its first byte; else the client gets a 408 and the connection closes.",
    "proxy.bodyTimeoutMs": "A request body that sends nothing for this long gets a 408 and"
    " the connection closes.",
    "proxy.keepAliveTimeoutMs": "An idle client connection (no request under way) is closed"
    " after this long.",
    "proxy.sendTimeoutMs": "A client that reads nothing of its response for this long, while"
    " the proxy has bytes for it, is disconnected.",
    "proxy.maxHeaderBytes": "Bytes of a request's line and headers; a longer URL gets a 414,"
    " longer headers a 431.",
    "proxy.maxHeaders": "Header fields in one request; more get a 431.",
    "proxy.maxBodyBytes": "Bytes of a request body; a larger one gets a 413 before it is read"
    " (as soon as its length or its running total says so).",
    "proxy.maxConnections": "Client connections one process holds open (at most half its"
    " open-file limit, the rest is for the upstream). At the limit, the longest-idle"
    " keep-alive connection is closed to make room; when none is idle, the newcomer gets a"
    " 503 and is closed.",
    "proxy.shutdownGraceMs": "On SIGTERM or SIGINT the proxy stops accepting and lets the"
    " responses in flight finish for this long, then cuts the rest.",
    "proxy.caFile": "PEM file of the CAs an HTTPS upstream is verified against, instead of the"
    " system's (else `REQUESTS_CA_BUNDLE`, else `SSL_CERT_FILE` and the system's CAs).",
    "proxy.clientCert": "PEM certificate (chain) the proxy shows an HTTPS upstream that asks"
    " for one (mutual TLS).",
    "proxy.clientKey": "Private key of `clientCert` (unset: the key is in `clientCert`'s file).",
    "proxy.maxUpstreamConnections": "Upstream connections one process holds at once, idle ones"
    " included; a request past it waits for one (up to `connectTimeoutMs`, then a 504).",
    "proxy.logLevel": "Least level of the log lines on stderr (`--log-level`); at `info`, one"
    " line per detection, cut and resume (rule, chars, conversation) and per refused request.",
    "proxy.logFormat": "`text` lines, or `json`: one object per line with the event's fields"
    " as keys (`--log-format`).",
    "proxy.accessLog": "One INFO line per request served: client, method, target (cut to 120"
    " chars), status, milliseconds and how it ended (`complete`, `client gone`, `broken`)"
    " (`--access-log`).",
}
