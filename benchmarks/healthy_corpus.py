"""Build ``corpus/healthy.jsonl``: real, healthy model answers and reasoning traces from three
Apache-2.0 repositories.

    python -m benchmarks.healthy_corpus ALPACA_EVAL_GIT CHINESE_ALPACA_2_GIT SKYTHOUGHT_GIT \
        > corpus/healthy.jsonl

Each argument is a git directory (a clone's ``.git``, or a bare mirror) of
tatsu-lab/alpaca_eval, ymcui/Chinese-LLaMA-Alpaca-2 and NovaSky-AI/SkyThought (with its
history: the traces were removed from its tip); files are read at the commits pinned below, so
the output is the same on every run. The selection is mechanical (see the corpus
README): nothing in a text is edited but the table escapes of the Chinese answers.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

ALPACA_EVAL = ("tatsu-lab/alpaca_eval", "cd543a149df89434d8a54582c0151c0b945c3d20")
CHINESE_ALPACA = ("ymcui/Chinese-LLaMA-Alpaca-2", "2a334d1634c857a7f02f885026d02ac4b469479d")
SKYTHOUGHT = ("NovaSky-AI/SkyThought", "6b8f472f532610e1acd0e498b4534831e54a7b6a")
# Sky-T1-32B's AIME 2024 answers, each a long reasoning trace then a solution
SKY_PATH = (
    "skythought/Qwen2.5-Math/evaluation/outputs/icml_models/Sky-T1-math-correct-5K-32B-ckpts/"
    "checkpoint-140/aime24_eval/aime24/test_Sky-T1_-1_seed0_t0.0_s0_e-1.jsonl"
)
THOUGHT = re.compile(r"<\|begin_of_thought\|>\n*(.*?)\s*<\|end_of_thought\|>", re.S)
# long markdown answers of these models, the first PER_MODEL in the evaluation set's order
MODELS = (
    "gpt-4o-2024-05-13",
    "claude-3-5-sonnet-20240620",
    "Qwen2-72B-Instruct",
    "deepseek-llm-67b-chat",
    "Yi-34B-Chat",
    "Meta-Llama-3.1-70B-Instruct-Turbo",
)
PER_MODEL = 5
MIN_EN_CHARS = 2500
MIN_ZH_CHARS = 500
MARKDOWN = re.compile(r"^(#{1,4} |\s*[-*] |\s*\d+\. |\|)", re.M)


def _show(git_dir: str, commit: str, path: str) -> str:
    command = ["git", f"--git-dir={git_dir}", "show", f"{commit}:{path}"]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout


def alpaca_eval(git_dir: str) -> list[dict]:
    repo, commit = ALPACA_EVAL
    records = []
    for model in MODELS:
        path = f"results/{model}/model_outputs.json"
        taken = 0
        for number, item in enumerate(json.loads(_show(git_dir, commit, path))):
            text = item["output"]
            if len(text) < MIN_EN_CHARS or len(MARKDOWN.findall(text)) < 5:
                continue
            records.append(
                {
                    "id": f"alpacaeval-{model}-{number}",
                    "label": "normal",
                    "channel": "text",
                    "lang": "en",
                    "kind": None,
                    "onset": None,
                    "source": f"{repo}@{commit[:12]} {path} item {number} ({model})",
                    "licence": "Apache-2.0 (the repository's licence)",
                    "note": "a long markdown answer to an AlpacaEval instruction",
                    "prompt": item["instruction"],
                    "text": text,
                }
            )
            taken += 1
            if taken == PER_MODEL:
                break
    return records


def chinese_alpaca(git_dir: str) -> list[dict]:
    """The answers in the example tables (single-turn rows: prompt | response)."""
    repo, commit = CHINESE_ALPACA
    records = []
    for model in ("alpaca-2-13b", "alpaca-2-7b"):
        path = f"examples/{model}.md"
        for line in _show(git_dir, commit, path).splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) != 3 or not cells[0].isdigit() or "**>" in cells[2]:
                continue  # not a row, or a multi-turn dialogue (several answers in one cell)
            # the table's escapes of a newline and a quote, undone
            text = cells[2].replace("<br/>", "\n").replace("\\n", "\n").replace('\\"', '"')
            if len(text) < MIN_ZH_CHARS:
                continue
            number = len(records)
            records.append(
                {
                    "id": f"chinese-{model}-{number}",
                    "label": "normal",
                    "channel": "text",
                    "lang": "zh",
                    "kind": None,
                    "onset": None,
                    "source": f"{repo}@{commit[:12]} {path}, the row asking: {cells[1][:60]}",
                    "licence": "Apache-2.0 (the repository's licence)",
                    "note": f"Chinese-{model.title()} answer, as its example table shows it",
                    "prompt": cells[1],
                    "text": text,
                }
            )
    return records


def sky_t1(git_dir: str) -> list[dict]:
    """The reasoning of the traces that solved their problem and that the detector flags on
    neither channel (the others are unfinished or unread: not labelled here)."""
    from looprescue.detect import scan_text

    repo, commit = SKYTHOUGHT
    records = []
    for line in _show(git_dir, commit, SKY_PATH).splitlines():
        item = json.loads(line)
        match = THOUGHT.search(item["code"][0])
        if item["score"] != [True] or match is None:
            continue
        text = match.group(1)
        if scan_text(text, "reasoning") or scan_text(text, "text"):
            continue
        records.append(
            {
                "id": f"sky-t1-aime24-{item['idx']}",
                "label": "normal",
                "channel": "reasoning",
                "lang": "en",
                "kind": None,
                "onset": None,
                "source": f"{repo}@{commit[:12]} {SKY_PATH} idx {item['idx']} (Sky-T1-32B)",
                "licence": "Apache-2.0 (the repository's licence)",
                "note": "the reasoning (between its thought markers) of a solved AIME problem",
                "prompt": item["question"],
                "text": text,
            }
        )
    return records


def main(argv: list[str]) -> int:
    alpaca_git, chinese_git, sky_git = argv
    records = alpaca_eval(alpaca_git) + chinese_alpaca(chinese_git) + sky_t1(sky_git)
    for record in records:
        print(json.dumps(record, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
