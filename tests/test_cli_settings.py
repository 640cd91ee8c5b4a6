"""``--set KEY=VALUE`` overrides on every command that reads the config."""

from __future__ import annotations

import subprocess
import sys

import pytest
from tests.paths import CORPUS, SESSIONS

from looprescue.commands.common import parse_settings
from looprescue.config import ConfigError, LoopRescueConfig, load_config


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "looprescue.cli", *args], capture_output=True, text=True, timeout=300
    )


def test_values_are_read_as_yaml_scalars():
    settings = parse_settings(["detector.poolWindow=40", "marker=false", "watch=text", "x=1.5"])
    assert settings == {"detector.poolWindow": 40, "marker": False, "watch": "text", "x": 1.5}


@pytest.mark.parametrize("bad", ["detector.poolWindow", "=3", " =x"])
def test_malformed_settings_name_the_flag(bad):
    with pytest.raises(ConfigError, match=r"--set .*expected KEY=VALUE"):
        parse_settings([bad])


def test_flags_override_the_file_and_bad_values_name_the_key(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("detector:\n  poolWindow: 40\n")
    cfg = load_config(path, parse_settings(["detector.poolWindow=24"]))
    assert cfg.detector.poolWindow == 24
    with pytest.raises(ConfigError, match=r"^command line: detector\.poolWindow"):
        load_config(None, parse_settings(["detector.poolWindow=2"]))


def test_a_flag_can_set_a_key_to_null_over_its_default_and_the_file(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("retryPresencePenalty: 0.2\n")
    cfg = load_config(path, parse_settings(["retryTemperature=null", "retryPresencePenalty=~"]))
    assert cfg.retryTemperature is None and cfg.retryPresencePenalty is None
    # untouched keys keep their default
    assert cfg.retryFrequencyPenalty == LoopRescueConfig().retryFrequencyPenalty is not None
    with pytest.raises(ConfigError, match=r"mode"):
        load_config(None, parse_settings(["mode=null"]))


def test_scan_honours_watch_from_the_command_line():
    session = str(SESSIONS / "a_reasoning_loop")  # its loop is in the reasoning channel
    assert _cli("scan", session).returncode == 1
    assert _cli("scan", session, "--set", "watch=text").returncode == 0
    assert _cli("scan", session, "--set", "watch=reasoning").returncode == 1


def test_doctor_threshold_from_the_command_line():
    session = str(SESSIONS / "d_tool_loop")  # six identical bash calls
    assert _cli("doctor", session, "--set", "doctor.repeatToolMin=6").returncode == 1
    assert _cli("doctor", session, "--set", "doctor.repeatToolMin=7").returncode == 0


def test_eval_and_proxy_reject_a_bad_setting_with_exit_two():
    result = _cli("eval", str(CORPUS), "--set", "detector.poolMinCoverage=2")
    assert result.returncode == 2 and "detector.poolMinCoverage" in result.stderr
    result = _cli("proxy", "--upstream", "http://127.0.0.1:9", "--set", "mode=bogus")
    assert result.returncode == 2 and "mode" in result.stderr
