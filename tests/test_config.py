"""The one config model: defaults, YAML loading, overrides, and loud errors naming the key."""

from __future__ import annotations

import pytest

from looprescue.config import ConfigError, LoopRescueConfig, config_from_mapping, load_config


def test_defaults_match_the_documented_thresholds():
    cfg = LoopRescueConfig()
    d = cfg.detector
    assert (d.cycleMinPeriod, d.cycleMaxPeriod, d.cycleMinRepeats, d.cycleMinChars) == (
        1,
        4000,
        3,
        600,
    )
    assert (d.cycleEarlyChars, d.cycleShortRepeats, d.cycleBlockRepeats, d.cycleCharRepeats) == (
        300,
        10,
        4,
        30,
    )
    assert (d.counterMinRepeats, d.counterMinChars, d.codeFenceFactor, d.codeFenceRepeatFactor) == (
        4,
        200,
        2.0,
        3.0,
    )
    assert (d.poolWindow, d.poolMinCoverage) == (30, 0.75)
    assert (d.linesWindow, d.linesMaxMedianChars, d.linesMinDuplicateRatio) == (50, 20, 0.7)
    assert cfg.watch == "both" and cfg.mode == "rescue"


def test_yaml_file_with_dsh_plugin_style_keys(tmp_path):
    path = tmp_path / "looprescue.yaml"
    path.write_text("watch: reasoning\ndetector:\n  poolWindow: 40\n  cycleMinChars: 800\n")
    cfg = load_config(path)
    assert cfg.watch == "reasoning"
    assert cfg.detector.poolWindow == 40 and cfg.detector.cycleMinChars == 800


def test_overrides_win_over_the_file(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("detector:\n  poolWindow: 40\n")
    cfg = load_config(path, {"detector.poolWindow": 24, "watch": "text"})
    assert cfg.detector.poolWindow == 24 and cfg.watch == "text"


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ({"detector": {"poolWindw": 30}}, "detector.poolWindw: unknown key"),
        ({"detector": {"poolMinCoverage": 1.5}}, "detector.poolMinCoverage"),
        ({"watch": "everything"}, "watch"),
        ({"detector": {"cycleMinPeriod": 500, "cycleMaxPeriod": 100}}, "cycleMaxPeriod (100)"),
        ({"detector": {"cycleMinChars": "lots"}}, "detector.cycleMinChars"),
    ],
)
def test_bad_config_names_the_key_and_the_reason(data, needle):
    with pytest.raises(ConfigError) as err:
        config_from_mapping(data, "my.yaml")
    assert needle in str(err.value)
    assert str(err.value).startswith("my.yaml: ")


def test_unreadable_and_invalid_yaml_files(tmp_path):
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("detector: [unclosed\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_config(bad)
    listy = tmp_path / "list.yaml"
    listy.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_config(listy)
