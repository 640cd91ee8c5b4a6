"""Rule rows: a table that keeps drawing its rows from a handful, and real tables left alone."""

from __future__ import annotations

import random

from tests.detect_helpers import stream

from looprescue.detect import scan_text


def test_a_table_that_keeps_drawing_rows_from_a_handful():
    rng = random.Random(4)
    rows = ["| Monday | Monday | Monday |", "| Saturday | Saturday | Monday |", "| Sunday | Rest |"]
    head = "| Day | Week | Weekend |\n|---|---|---|\n| Tuesday | Wednesday | Friday |\n"
    body = "".join(rng.choice(rows) + "\n" for _ in range(60))
    hit = stream("Here is a table:\n\n" + head + body, "text")
    assert hit is not None and hit.rule == "rows"
    kept = ("Here is a table:\n\n" + head + body)[: hit.prune_offset]
    # cut at the streak of repeated rows: the first rows of the loop stay, hardly more
    assert len(kept.splitlines()) - 5 <= len(rows) + 2


def test_a_real_table_with_distinct_rows_streams_untouched():
    names = ["lock", "header", "frames", "tail", "backup", "undo", "marker", "title", "steps"]
    table = "| part | reads | writes |\n|---|---|---|\n" + "".join(
        f"| {name} {kind} | yes | no |\n" for kind in ("file", "cache", "log") for name in names
    )
    assert scan_text(table, "text") == []


def test_markdown_table_with_repeated_cells_is_not_a_loop():
    rows = "".join(
        f"| {name} | yes | yes | no | default |\n"
        for name in (
            "lock",
            "header",
            "frames",
            "seq",
            "tail",
            "backup",
            "undo",
            "marker",
            "title",
            "turns",
            "steps",
            "tools",
            "jobs",
            "retry",
            "usage",
            "stream",
        )
    )
    table = "| key | read | write | delete | source |\n|---|---|---|---|---|\n" + rows
    assert scan_text(table * 1, "text") == []
    assert stream(table, "text", sizes=(2, 3)) is None


CITIES = [
    ("广州", "广东省", ["1882万", "1873万"], "广州塔、陈家祠", ["早茶、肠粉", "早茶"]),
    ("深圳", "广东省", ["1779万"], "世界之窗", ["椰子鸡", "椰子鸡、潮汕牛肉火锅"]),
    ("成都", "四川省", ["2140万"], "宽窄巷子", ["火锅、串串香", "火锅"]),
    ("杭州", "浙江省", ["1252万", "1237万"], "西湖、灵隐寺", ["西湖醋鱼"]),
]


def test_a_table_going_round_its_rows_with_a_cell_changed_is_cut():
    # no two rounds alike: each row comes back with its population or its food said another
    # way, so its rows are never the same text, nor are the rounds
    rng = random.Random(2)
    head = "以下是几个城市的对比：\n\n| 城市 | 省份 | 人口 | 景点 | 美食 |\n|---|---|---|---|---|\n"
    first = (
        "| 北京 | 直辖市 | 2185万 | 故宫、长城 | 北京烤鸭 |\n"
        "| 上海 | 直辖市 | 2487万 | 外滩 | 小笼包 |\n"
    )
    body = "".join(
        f"| {name} | {province} | {rng.choice(people)} | {sights} | {rng.choice(food)} |\n"
        for _ in range(10)
        for name, province, people, sights, food in CITIES
    )
    text = head + first + body
    hit = stream(text, "text", sizes=(3, 11))
    assert hit is not None and hit.rule == "rows", hit
    # the first round is kept: the streak begins with the first row said again
    assert text.index(first) + len(first) + 4 * 24 < hit.prune_offset
    assert hit.prune_offset < text.index("| 广州", text.index("| 杭州") + 1) + 1


def test_rows_of_one_name_with_a_cell_changed_are_a_group():
    # a support matrix: each system's rows together, a version apart; a build matrix that goes
    # round its systems once per architecture (the cell that changes says another thing);
    # and a roster whose day comes first, one shift after another
    systems = [
        ("Ubuntu", "18.04", "20.04", "22.04", "24.04", "24.10"),
        ("Debian", "9", "10", "11", "12", "13"),
        ("Fedora", "37", "38", "39", "40", "41"),
        ("Alpine", "3.17", "3.18", "3.19", "3.20", "3.21"),
        ("macOS", "11", "12", "13", "14", "15"),
    ]
    matrix = "| System | Version | Wheels |\n|---|---|---|\n" + "".join(
        f"| {name} | {version} | yes |\n" for name, *versions in systems for version in versions
    )
    shifts = ["早班", "中班", "晚班"]
    people = ["张伟", "王芳", "李娜", "刘洋", "陈静"]
    roster = "| 日期 | 班次 | 值班 | 备注 |\n|---|---|---|---|\n" + "".join(
        f"| 周{day} | {shift} | {people[(i + j) % 5]} | 准时交接 |\n"
        for i, day in enumerate("一二三四五六日")
        for j, shift in enumerate(shifts)
    )
    builds = "| System | Arch | Wheel | Tested |\n|---|---|---|---|\n" + "".join(
        f"| {name} | {arch} | yes | nightly |\n"
        for arch in ("x86_64", "aarch64", "riscv64", "ppc64le", "s390x", "armv7l")
        for name in ("Linux", "macOS", "Windows")
    )
    for table in (matrix, builds, roster):
        assert scan_text(table, "text") == []
        assert stream(table, "text", sizes=(3,)) is None
