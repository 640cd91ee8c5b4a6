"""Real agent CLIs (Claude Code, Codex, opencode, Qwen Code) through the proxy."""
