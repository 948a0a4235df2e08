"""The environment is read in one place: ``chamvi.settings``."""

from __future__ import annotations

import re
from pathlib import Path

from chamvi.settings import Settings, hf_hub_offline, openai_credentials

ROOT = Path(__file__).resolve().parents[2]


def test_only_the_settings_module_reads_the_environment() -> None:
    readers = [
        f"{path.relative_to(ROOT)}:{number}"
        for folder in ("chamvi", "workflows", "activities")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path != ROOT / "chamvi" / "settings.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"os\.environ|getenv\(", line)
    ]
    assert readers == []


def test_the_api_tokens_come_with_the_settings_and_stay_out_of_their_repr() -> None:
    settings = Settings.from_env({"CHAMVI_TOKENS": '[{"value": "s3cret", "id": "a", "permissions": ["*"]}]'})
    assert settings.tokens is not None and "s3cret" in settings.tokens
    assert "s3cret" not in repr(settings)
    assert Settings.from_env({}).tokens is None


def test_late_readers_take_the_variable_as_it_is_when_asked() -> None:
    assert openai_credentials({"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": ""}) == ("k", None)
    assert openai_credentials({}) == (None, None)
    offline = [hf_hub_offline({"HF_HUB_OFFLINE": v}) for v in ("1", "On", "no", "")]
    assert offline == [True, True, False, False]
