"""The docs' "Skills" page (docs/guides/skills.md), run from the page itself so it cannot drift."""

from __future__ import annotations

from pathlib import Path

from chamvi import App
from chamvi._constants import TOOL_SKILL_LOAD, TOOL_SKILL_READ
from chamvi.worker_state import AppRuntime
from tests.support.docs import python_module

ROOT = Path(__file__).resolve().parents[2]


async def test_the_readme_skills_example_gives_the_app_skill_then_the_agents_own(tmp_path: Path) -> None:
    procedure = tmp_path / "skills" / "refund-procedure"
    procedure.mkdir(parents=True)
    (procedure / "SKILL.md").write_text(
        (ROOT / "examples/support/skills/refund-procedure/SKILL.md").read_text()
    )
    app: App = python_module("guides/skills.md", "skillsapp.py", tmp_path).app
    catalog = await AppRuntime(app).skills.current(app.agent("support"))
    assert catalog is not None
    assert [s.name for s in catalog.skills] == ["customer-tone", "refund-procedure"]
    assert [t.name for t in app.spec("support").tools] == [TOOL_SKILL_LOAD, TOOL_SKILL_READ]
    assert "refund_order" in catalog.get("refund-procedure").description


def test_the_example_skill_folder_is_the_one_the_readme_shows() -> None:
    folder = ROOT / "examples/support/skills"
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    assert files == ["refund-procedure/SKILL.md", "refund-procedure/references/eligibility.md"]
