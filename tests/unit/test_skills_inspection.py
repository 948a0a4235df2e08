"""Seeing skills without a server: `chamvi skills list|update`, `chamvi check`, the agents route."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from chamvi import App, define_agent
from chamvi.artifacts import ArtifactStore
from chamvi.cli.runs import _step_line
from chamvi.http import Token, create_api
from chamvi.models.runs import StepView
from chamvi.skills import SkillLibrary, skill, skills_folder
from tests.unit.test_cli import invoke, one_line_error
from tests.unit.test_skills import REFUND, git, write_skill

APP = """
from pathlib import Path

from chamvi import App, define_agent
from chamvi.skills import git_skills, skill, skills_folder

HERE = Path(__file__).parent
tone = skill(name="tone", description="How to write to customers.", instructions="Be brief.")
support = define_agent(
    name="support", model="local/demo", instructions="Help.", skills=[{own}]
)
greeter = define_agent(name="greeter", model="local/demo", instructions="Greet.")
app = App(agents=[support, greeter], skills=[tone])
"""


def write_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, own: str) -> str:
    (tmp_path / f"{name}.py").write_text(APP.replace("{own}", own))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return f"{name}:app"


def test_skills_list_shows_each_agents_catalog_version_and_skills(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_skill(tmp_path / "skills", "refund-procedure", REFUND)
    ref = write_app(tmp_path, monkeypatch, "chamvi_skills_app", "skills_folder(HERE / 'skills')")
    result = invoke("skills", "list", "--app", ref, "--data", str(tmp_path / "data"))
    assert result.exit_code == 0, result.output
    shape = [re.sub(r"\b[0-9a-f]{12}\b", "<v>", line) for line in result.stdout.splitlines()]
    assert shape == [
        "agent support: catalog <v>, 2 skills",
        "  tone              <v>  code    How to write to customers.",
        "  refund-procedure  <v>  folder  How to refund an order. Use before any refund.",
        "agent greeter: catalog <v>, 1 skill",
        "  tone  <v>  code  How to write to customers.",
    ]
    listed = json.loads(invoke("skills", "list", "support", "--app", ref, "--json").stdout)
    assert [s["name"] for s in listed["skills"]] == ["tone", "refund-procedure"]
    assert listed["skills"][1]["files"] == [] and len(listed["version"]) == 64
    unknown = one_line_error(invoke("skills", "list", "nobody", "--app", ref))
    assert unknown == "Error: unknown agent 'nobody': chamvi_skills_app:app serves 'support', 'greeter'"


def test_check_lists_an_agents_skills_and_fails_on_a_bad_skill_with_one_line_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_skill(tmp_path / "skills", "refund-procedure", REFUND)
    good = write_app(tmp_path, monkeypatch, "chamvi_skills_ok", "skills_folder(HERE / 'skills')")
    result = invoke("check", "--app", good, "--data", str(tmp_path / "data"))
    assert result.exit_code == 0, result.output
    assert "  agent support: model local/demo, tools: none, skills: tone, refund-procedure" in result.stdout
    assert "  agent greeter: model local/demo, tools: none, skills: tone" in result.stdout
    write_skill(
        tmp_path / "skills", "refund-procedure", REFUND.replace("name: refund-procedure", "name: refunds")
    )
    bad = invoke("check", "--app", good, "--data", str(tmp_path / "data"))
    assert bad.exit_code != 0
    assert bad.stderr.splitlines()[0] == (
        f"problem: skill {tmp_path / 'skills/refund-procedure/SKILL.md'}: name 'refunds' does not match "
        "its folder 'refund-procedure': rename one of them"
    )


def test_skills_update_moves_a_git_pin_that_boots_leave_where_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "--quiet", "--initial-branch=main")

    def commit(text: str) -> str:
        write_skill(repo / "skills", "refund-procedure", text)
        git(repo, "add", "-A")
        git(repo, "commit", "--quiet", "-m", "skill")
        return git(repo, "rev-parse", "HEAD")

    first = commit(REFUND)
    ref = write_app(
        tmp_path, monkeypatch, "chamvi_git_app", f"git_skills({str(repo)!r}, ref='main', path='skills')"
    )
    data = str(tmp_path / "data")
    pinned = invoke("skills", "update", "--app", ref, "--data", data)
    assert pinned.stdout.strip() == f"git {repo} (main): at {first[:12]}"
    second = commit(REFUND.replace("at most", "up to"))
    moved = invoke("skills", "update", "--app", ref, "--data", data)
    assert moved.stdout.strip() == f"git {repo} (main): moved from {first[:12]} to {second[:12]}"


async def test_get_agent_skills_answers_the_current_catalog_behind_agents_read(tmp_path: Path) -> None:
    write_skill(tmp_path, "refund-procedure", REFUND, {"references/policy.md": "30 days."})
    app = App(
        agents=[
            define_agent(
                name="support", model="local/demo", instructions="Help.", skills=[skills_folder(tmp_path)]
            )
        ],
        skills=[skill(name="tone", description="How to write.", instructions="Be brief.")],
    )
    tokens = [
        Token(value="reader", id="r", permissions=("agents:read",)),
        Token(value="other", id="o", permissions=("runs:read",)),
    ]
    api = create_api(tokens=tokens, managed=None, runs=None, skills=SkillLibrary(app, ArtifactStore.memory))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=api), base_url="http://api") as http:
        answer = await http.get("/agents/support/skills", headers={"Authorization": "Bearer reader"})
        forbidden = await http.get("/agents/support/skills", headers={"Authorization": "Bearer other"})
        unknown = await http.get("/agents/nobody/skills", headers={"Authorization": "Bearer reader"})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["agent"] == "support" and len(body["version"]) == 64
    assert [(s["name"], s["source"]) for s in body["skills"]] == [
        ("tone", "code"),
        ("refund-procedure", "folder"),
    ]
    assert body["skills"][1]["files"][0]["path"] == "references/policy.md"
    assert forbidden.status_code == 403
    assert unknown.status_code == 404
    assert unknown.json()["error"]["message"] == "unknown agent 'nobody': this app serves 'support'"


def test_runs_show_names_the_skill_a_step_loaded_and_its_version() -> None:
    output = {"skill": "refund-procedure", "version": "0123456789ab", "instructions": "Refund.", "files": []}
    step = StepView(
        index=2,
        kind="tool",
        started_at=datetime.now(UTC),
        tool="skill_load",
        input={"name": "x"},
        output=output,
    )
    line = _step_line(step)
    assert line.startswith("    2  tool  skill_load -> ")
    assert '"skill":"refund-procedure"' in line.replace(" ", "") and "0123456789ab" in line
