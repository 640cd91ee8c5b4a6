"""Deterministic benchmark texts: healthy mixed prose/code/tables, and looping text."""

from __future__ import annotations

import random

_EN = [
    "the",
    "writer",
    "lock",
    "header",
    "frame",
    "batch",
    "reader",
    "session",
    "tail",
    "checksum",
    "offset",
    "retry",
    "request",
    "stream",
    "proxy",
    "client",
    "upstream",
    "marker",
    "prune",
    "resume",
    "config",
    "value",
    "error",
    "file",
    "path",
    "index",
    "table",
    "column",
    "shard",
    "copy",
    "verify",
    "backup",
    "restore",
    "turn",
    "step",
    "tool",
    "call",
    "result",
    "event",
    "log",
]
_ZH = list(
    "会话文件锁写入读取帧校验偏移重试请求流代理客户端上游标记修剪恢复配置错误路径索引表列分片复制验证备份"
)


def _sentence(rng: random.Random) -> str:
    if rng.random() < 0.25:
        return "".join(rng.choice(_ZH) for _ in range(rng.randint(8, 30))) + "。"
    words = [rng.choice(_EN) for _ in range(rng.randint(6, 22))]
    words.append(str(rng.randint(0, 10**6)))
    rng.shuffle(words)
    return " ".join(words).capitalize() + rng.choice([". ", "? ", "! ", ".\n"])


def _table(rng: random.Random) -> str:
    rows = [
        f"| {rng.choice(_EN)}{rng.randint(0, 9999)} | {rng.randint(0, 10**5)} | "
        f"{rng.choice(_EN)} {rng.choice(_EN)} |"
        for _ in range(rng.randint(3, 8))
    ]
    return "| key | count | note |\n|---|---|---|\n" + "\n".join(rows) + "\n\n"


def _code(rng: random.Random) -> str:
    name = rng.choice(_EN)
    body = "\n".join(
        f"    {rng.choice(_EN)}_{i} = {name}.{rng.choice(_EN)}({rng.randint(0, 999)})"
        for i in range(rng.randint(3, 9))
    )
    return f"```python\ndef {name}_{rng.randint(0, 99999)}():\n{body}\n```\n\n"


def healthy_text(chars: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    parts, size = [], 0
    while size < chars:
        roll = rng.random()
        part = _table(rng) if roll < 0.05 else _code(rng) if roll < 0.12 else _sentence(rng)
        parts.append(part)
        size += len(part)
    return "".join(parts)[:chars]


def looping_text(chars: int, seed: int = 0) -> str:
    """Episodes of healthy lead-in followed by a loop (cycle, pool or counter)."""
    rng = random.Random(seed)
    parts, size = [], 0
    pool = ["Now.", "OK.", "Emit.", "Go.", "Output.", "Let me write.", "好。", "输出。"]
    while size < chars:
        parts.append(healthy_text(rng.randint(200, 2000), rng.randint(0, 10**9)))
        kind = rng.choice(["cycle", "pool", "counter"])
        if kind == "cycle":
            unit = healthy_text(rng.randint(40, 400), rng.randint(0, 10**9))
            parts.append(unit * rng.randint(4, 12))
        elif kind == "pool":
            parts.append(" ".join(rng.choice(pool) for _ in range(rng.randint(80, 300))))
        else:
            body = healthy_text(rng.randint(40, 120), rng.randint(0, 10**9)).replace("\n", " ")
            start = rng.randint(10, 60)
            parts.append("".join(f"Step {n}: {body}\n" for n in range(start, start + 30)))
        size = sum(len(p) for p in parts)
    return "".join(parts)[:chars]
