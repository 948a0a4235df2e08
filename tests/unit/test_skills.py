"""Skills without a server: the format, the sources, catalogs and their pinned versions, the tools."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

import pytest

from chamvi import AgentHooks, AgentTrust, App, ToolCallInfo, ToolContext, Trust, define_agent, tool
from chamvi._constants import TOOL_SKILL_LOAD, TOOL_SKILL_READ
from chamvi._tool_runner import ToolRunner
from chamvi.artifacts import ArtifactStore
from chamvi.errors import InvalidAgentDefinitionError, InvalidSkillError
from chamvi.models import ToolRequest
from chamvi.runtime import local_plugin
from chamvi.skills import (
    SkillLimits,
    SkillLoadContext,
    define_skill_source,
    git_skills,
    load_skill_catalog,
    skill,
    skill_catalog,
    skills_folder,
)
from chamvi.skills.store import StorePins
from chamvi.worker_state import AppRuntime
from tests.unit.test_tool_runner import InMemoryRun, request

REFUND = """---
name: refund-procedure
description: How to refund an order. Use before any refund.
license: Apache-2.0
metadata:
  owner: billing
---
# Refunds

1. Look the order up.
2. Refund at most the order's total.
"""


def write_skill(
    root: Path, name: str, text: str | bytes | None = None, files: dict[str, str | bytes] | None = None
) -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    body = (
        text
        if text is not None
        else f"---\nname: {name}\ndescription: The {name} procedure.\n---\nDo {name}.\n"
    )
    (folder / "SKILL.md").write_bytes(body.encode() if isinstance(body, str) else body)
    for path, data in (files or {}).items():
        target = folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data.encode() if isinstance(data, str) else data)
    return folder


def agent(name: str = "clerk", **options: Any) -> Any:
    return define_agent(name=name, model="local/demo", instructions="Work.", **options)


async def boot(app: App) -> None:
    """A worker's boot, up to polling: what ChamviPlugin.prepare does before any run."""
    await local_plugin(app).prepare()


# ---- the format --------------------------------------------------------------------------------


def test_a_skills_folder_loads_each_skill_with_its_instructions_files_and_front_matter(
    tmp_path: Path,
) -> None:
    write_skill(tmp_path, "refund-procedure", REFUND, {"references/policy.md": "Refunds within 30 days."})
    write_skill(tmp_path, "escalation")
    (tmp_path / "README.md").write_text("not a skill: outside every skill folder")
    catalog = skill_catalog(skills_folder(tmp_path))
    assert [s.name for s in catalog.skills] == ["escalation", "refund-procedure"]
    refund = catalog.get("refund-procedure")
    assert refund.description == "How to refund an order. Use before any refund."
    assert refund.metadata == {"license": "Apache-2.0", "metadata": {"owner": "billing"}}
    assert [(f.path, f.text) for f in refund.files] == [("references/policy.md", True)]
    loaded = asyncio.run(catalog.load("refund-procedure"))
    assert list(loaded) == ["skill", "version", "instructions", "files"]
    assert loaded["instructions"].startswith("# Refunds\n\n1. Look the order up.")
    assert loaded["files"] == [{"path": "references/policy.md", "size": 23}]


def test_the_catalog_block_lists_name_and_description_of_each_skill_and_is_a_plain_string(
    tmp_path: Path,
) -> None:
    write_skill(tmp_path, "refund-procedure", REFUND)
    catalog = skill_catalog(
        skills_folder(tmp_path), skill(name="greeting", description="Say <hi> & smile.", instructions="Hi.")
    )
    block = catalog.instructions
    assert isinstance(block, str)
    assert "skill_load" in block and "skill_read" in block
    assert "<name>refund-procedure</name>" in block
    assert "<description>Say &lt;hi&gt; &amp; smile.</description>" in block
    assert "Look the order up" not in block  # the instructions come with skill_load only


def test_a_version_is_the_content_hash_wherever_the_folder_is_and_changes_with_the_content(
    tmp_path: Path,
) -> None:
    write_skill(tmp_path / "a", "refund-procedure", REFUND)
    write_skill(tmp_path / "b", "refund-procedure", REFUND)
    one, two = skill_catalog(skills_folder(tmp_path / "a")), skill_catalog(skills_folder(tmp_path / "b"))
    assert one.version == two.version
    write_skill(tmp_path / "b", "refund-procedure", REFUND.replace("at most", "up to"))
    assert skill_catalog(skills_folder(tmp_path / "b")).version != one.version


BAD_SKILLS = [
    ("no-front-matter", "# Just markdown\n", "has no front matter: begin the file with a '---' line"),
    ("unclosed", "---\nname: unclosed\ndescription: x\n", "its front matter has no closing '---' line"),
    ("bad-yaml", "---\nname: [bad\n---\n", "its front matter is not valid YAML"),
    ("Bad-Name", "---\nname: Bad-Name\ndescription: x\n---\n", "name 'Bad-Name' is invalid"),
    (
        "mismatch",
        "---\nname: other\ndescription: x\n---\n",
        "name 'other' does not match its folder 'mismatch'",
    ),
    ("no-description", "---\nname: no-description\n---\n", "description is missing"),
    ("long", "---\nname: long\ndescription: " + "x" * 1025 + "\n---\n", "description is 1,025 characters"),
    ("latin", "---\nname: latin\ndescription: caf\xe9\n---\n".encode("latin-1"), "is not UTF-8"),
]


@pytest.mark.parametrize(("folder", "text", "problem"), BAD_SKILLS, ids=[b[0] for b in BAD_SKILLS])
def test_each_bad_skill_fails_the_boot_with_one_line_naming_its_file(
    tmp_path: Path, folder: str, text: str | bytes, problem: str
) -> None:
    write_skill(tmp_path, folder, text)
    app = App(agents=[agent()], skills=[skills_folder(tmp_path)])
    with pytest.raises(InvalidSkillError) as raised:
        asyncio.run(boot(app))
    message = raised.value.message
    assert "\n" not in message
    assert message.startswith(f"skill {tmp_path / folder / 'SKILL.md'}: ")
    assert problem in message


def test_two_skills_of_one_name_fail_the_boot_naming_both_files(tmp_path: Path) -> None:
    write_skill(tmp_path / "defaults", "refund-procedure", REFUND)
    write_skill(tmp_path / "own", "refund-procedure", REFUND.replace("at most", "up to"))
    app = App(
        agents=[agent(skills=[skills_folder(tmp_path / "own")])],
        skills=[skills_folder(tmp_path / "defaults")],
    )
    with pytest.raises(InvalidSkillError) as raised:
        asyncio.run(boot(app))
    assert raised.value.message == (
        f"skill {tmp_path / 'own/refund-procedure/SKILL.md'}: agent 'clerk' has another skill named "
        f"'refund-procedure' ({tmp_path / 'defaults/refund-procedure/SKILL.md'}): rename one of them"
    )


def test_one_source_given_to_the_app_and_to_an_agent_counts_once(tmp_path: Path) -> None:
    write_skill(tmp_path, "refund-procedure", REFUND)
    shared = skills_folder(tmp_path)
    app = App(agents=[agent(skills=[shared])], skills=[shared])
    runtime = AppRuntime(app)
    catalog = asyncio.run(runtime.skills.current(runtime.app.agent("clerk")))
    assert catalog is not None and [s.name for s in catalog.skills] == ["refund-procedure"]


def test_a_skill_over_its_size_limit_fails_the_boot_naming_the_file_that_crosses_it(tmp_path: Path) -> None:
    write_skill(tmp_path, "big", None, {"assets/a.bin": b"\0" * 600, "assets/b.bin": b"\0" * 600})
    app = App(agents=[agent()], skills=[skills_folder(tmp_path)], skill_limits=SkillLimits(skill_bytes=1000))
    with pytest.raises(InvalidSkillError) as raised:
        asyncio.run(boot(app))
    assert raised.value.message.startswith(f"skill {tmp_path / 'big/assets/b.bin'}: takes the skill in ")
    assert "over the limit of 1,000 bytes per skill (SkillLimits.skill_bytes)" in raised.value.message


def test_an_agents_skills_over_their_limits_fail_the_boot(tmp_path: Path) -> None:
    for name in ("one", "two", "three"):
        write_skill(tmp_path, name, None, {"notes.md": "n" * 400})
    by_size = App(
        agents=[agent(skills=[skills_folder(tmp_path)])], skill_limits=SkillLimits(agent_bytes=1000)
    )
    with pytest.raises(InvalidSkillError, match=r"per agent \(SkillLimits.agent_bytes\)") as raised:
        asyncio.run(boot(by_size))
    assert raised.value.message.startswith(
        f"skill {tmp_path / 'two/SKILL.md'}: takes the skills of agent 'clerk'"
    )
    by_count = App(agents=[agent(skills=[skills_folder(tmp_path)])], skill_limits=SkillLimits(agent_skills=2))
    with pytest.raises(InvalidSkillError, match=r"agent 'clerk' has more than 2 skills"):
        asyncio.run(boot(by_count))
    # the App's defaults alone are a runtime agent's skills: over the limits, they are named
    defaults = App(
        agents=[agent()], skills=[skills_folder(tmp_path)], skill_limits=SkillLimits(agent_skills=2)
    )
    with pytest.raises(InvalidSkillError, match=r"App\(skills=\.\.\.\) has more than 2 skills"):
        asyncio.run(boot(defaults))


def test_a_skill_folder_inside_another_fails_the_boot(tmp_path: Path) -> None:
    outer = write_skill(tmp_path, "outer")
    write_skill(outer / "references", "inner")
    with pytest.raises(InvalidSkillError, match="skill folders do not nest") as raised:
        skill_catalog(skills_folder(tmp_path))
    assert raised.value.message.startswith(f"skill {outer / 'references/inner/SKILL.md'}: is inside")


def test_a_skills_folder_never_follows_a_link_and_the_boot_error_names_each_one(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("CHAMVI_APPROVAL_SECRET=hunter2")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "notes.md").write_text("outside notes")
    root = tmp_path / "skills"
    folder = write_skill(root, "refunds", None, {"notes.md": "inside notes"})
    (folder / "environ.md").symlink_to("/proc/self/environ")
    (folder / "secret.md").symlink_to(secret)
    (folder / "shared").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (folder / "again.md").symlink_to("notes.md")  # stays inside: never followed either, like git's
    (root / "README.md").symlink_to(secret)  # outside every skill folder: not read, let be
    app = App(agents=[agent()], skills=[skills_folder(root)])
    with pytest.raises(InvalidSkillError) as raised:
        asyncio.run(boot(app))
    assert raised.value.message == (
        f"skill folder {root}: 'refunds/again.md', 'refunds/environ.md', 'refunds/secret.md', "
        "'refunds/shared/' are symbolic links, and skills_folder() never follows links (they may lead "
        "out of the folder): put the file or folder itself there"
    )
    for link in ("again.md", "environ.md", "secret.md", "shared"):
        (folder / link).unlink()
    (root / "linked-skill").symlink_to(folder, target_is_directory=True)
    with pytest.raises(InvalidSkillError, match=r"'linked-skill/' is a symbolic link"):
        skill_catalog(skills_folder(root))
    (root / "linked-skill").unlink()
    catalog = skill_catalog(skills_folder(root))
    loaded = asyncio.run(catalog.load("refunds"))
    assert loaded["files"] == [{"path": "notes.md", "size": 12}]


def test_a_folder_without_skills_and_a_path_that_is_no_folder_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidSkillError, match="holds no skill"):
        skill_catalog(skills_folder(tmp_path))
    with pytest.raises(InvalidAgentDefinitionError, match="is not a directory"):
        App(agents=[agent()], skills=[skills_folder(tmp_path / "missing")])


def test_a_skill_in_code_is_checked_where_it_is_written() -> None:
    with pytest.raises(InvalidSkillError) as raised:
        skill(name="Refunds", description="x", instructions="y")
    assert raised.value.message.startswith(f"skill 'Refunds' defined at {__file__}:")
    with pytest.raises(InvalidSkillError, match="leaves the skill"):
        skill(name="refunds", description="x", instructions="y", files={"../etc/passwd": "x"})


def test_a_custom_source_sync_or_async_gives_its_kind_and_trust_to_its_skills() -> None:
    def wiki(ctx: SkillLoadContext) -> list[Any]:
        return [skill(name="wiki-edit", description="Edit the wiki.", instructions="Edit.")]

    async def cms(ctx: SkillLoadContext) -> list[Any]:
        return [skill(name="cms-publish", description="Publish.", instructions="Publish.")]

    catalog = asyncio.run(
        load_skill_catalog(
            define_skill_source(kind="wiki", load=wiki),
            define_skill_source(kind="cms", load=cms, trusted=False),
        )
    )
    assert [(s.name, s.source, s.trusted) for s in catalog.skills] == [
        ("wiki-edit", "wiki", True),
        ("cms-publish", "cms", False),
    ]
    with pytest.raises(InvalidSkillError, match="loads asynchronously"):
        skill_catalog(define_skill_source(kind="cms", load=cms))


def test_an_app_refuses_what_is_not_a_skill_source_and_a_tool_under_a_skill_tools_name() -> None:
    with pytest.raises(InvalidAgentDefinitionError, match="is not a skill source"):
        App(agents=[agent()], skills=["skills/"])  # type: ignore[list-item]

    @tool(name=TOOL_SKILL_LOAD)
    async def own(name: str) -> str:
        """Mine."""
        return name

    with pytest.raises(
        InvalidAgentDefinitionError, match="a tool named 'skill_load', the name of a skill tool"
    ):
        App(agents=[agent(tools=[own])], skills=[skill(name="a", description="A.", instructions="A.")])
    App(agents=[agent(tools=[own])])  # without skills the name is free


# ---- catalogs per agent, pinned versions -------------------------------------------------------


def test_each_agent_gets_the_app_defaults_then_its_own_skills_and_the_skill_tools(tmp_path: Path) -> None:
    defaults = skill(name="tone", description="How to write.", instructions="Be brief.")
    own = skill(name="refund-procedure", description="Refunds.", instructions="Refund.")
    app = App(agents=[agent("clerk", skills=[own]), agent("other")], skills=[defaults])
    runtime = AppRuntime(app)
    clerk = asyncio.run(runtime.skills.current(runtime.app.agent("clerk")))
    other = asyncio.run(runtime.skills.current(runtime.app.agent("other")))
    assert clerk is not None and [s.name for s in clerk.skills] == ["tone", "refund-procedure"]
    assert other is not None and [s.name for s in other.skills] == ["tone"]
    assert [t.name for t in app.spec("clerk").tools] == [TOOL_SKILL_LOAD, TOOL_SKILL_READ]
    bare = App(agents=[agent("bare")])
    assert asyncio.run(AppRuntime(bare).skills.current(bare.agent("bare"))) is None
    assert bare.spec("bare").tools == []


def test_a_pinned_version_is_read_back_from_the_store_after_the_skill_changed(tmp_path: Path) -> None:
    store = ArtifactStore.local(tmp_path / "artifacts")
    write_skill(tmp_path / "skills", "refund-procedure", REFUND)

    def runtime() -> AppRuntime:
        return AppRuntime(App(agents=[agent()], skills=[skills_folder(tmp_path / "skills")]), artifacts=store)

    async def scenario() -> None:
        before = runtime()
        await before.skills.load()
        old = await before.skills.current(before.app.agent("clerk"))
        assert old is not None
        write_skill(tmp_path / "skills", "refund-procedure", REFUND.replace("Refund at most", "Refund up to"))
        after = runtime()  # a deploy: another process, the changed folder
        new = await after.skills.current(after.app.agent("clerk"))
        assert new is not None and new.version != old.version
        pinned = await after.skills.pinned(old.version)
        assert pinned is not None and pinned.version == old.version
        assert "Refund at most" in (await pinned.load("refund-procedure"))["instructions"]
        messages = await after.instructions_for(after.app.agent("clerk"), old.version)
        assert [m.role for m in messages] == ["system", "system"]
        assert messages[1].content == old.instructions

    asyncio.run(scenario())


# ---- the tools ---------------------------------------------------------------------------------


def skill_request(name: str, arguments: dict[str, Any], version: str | None) -> ToolRequest:
    return request(name, arguments, skills_version=version)


def test_skill_load_and_skill_read_return_the_runs_version_and_taint_from_an_untrusted_source() -> None:
    notes = "n" * 100
    trusted = skill(name="refunds", description="Refunds.", instructions="Refund.", files={"notes.md": notes})
    outside = skill(
        name="outside",
        description="Theirs.",
        instructions="Theirs.",
        files={"logo.png": b"\x89PNG\xff"},
        trusted=False,
    )
    app = App(agents=[agent()], skills=[trusted, outside], skill_limits=SkillLimits(read_bytes=40))
    runtime = AppRuntime(app)
    runner = ToolRunner(runtime)

    async def scenario() -> None:
        catalog = await runtime.skills.current(runtime.app.agent("clerk"))
        assert catalog is not None
        version = catalog.version
        loaded = await runner.run(
            skill_request(TOOL_SKILL_LOAD, {"name": "refunds"}, version), InMemoryRun(), asyncio.Event()
        )
        assert loaded.status == "ok" and loaded.taint is None
        assert loaded.output["skill"] == "refunds" and loaded.output["instructions"] == "Refund."
        read = await runner.run(
            skill_request(TOOL_SKILL_READ, {"name": "refunds", "path": "notes.md"}, version),
            InMemoryRun(),
            asyncio.Event(),
        )
        assert read.output["content"] == "n" * 40
        assert read.output["version"] == loaded.output["version"]  # the step shows the skill's version
        assert read.output["truncated"] == "the first 40 of 100 bytes"
        theirs = await runner.run(
            skill_request(TOOL_SKILL_LOAD, {"name": "outside"}, version), InMemoryRun(), asyncio.Event()
        )
        assert theirs.taint == "skill:outside"
        assert theirs.output["files"] == [{"path": "logo.png", "size": 5, "text": False}]
        binary = await runner.run(
            skill_request(TOOL_SKILL_READ, {"name": "outside", "path": "logo.png"}, version),
            InMemoryRun(),
            asyncio.Event(),
        )
        assert binary.status == "error" and binary.error is not None
        assert (
            binary.error.message == "file 'logo.png' of skill 'outside' is not text: it cannot be read to you"
        )
        unknown = await runner.run(
            skill_request(TOOL_SKILL_LOAD, {"name": "refundz"}, version), InMemoryRun(), asyncio.Event()
        )
        assert unknown.error is not None and unknown.error.code == "skill_not_found"
        assert unknown.error.message == "unknown skill 'refundz': the skills are 'refunds', 'outside'"
        unpinned = await runner.run(
            skill_request(TOOL_SKILL_LOAD, {"name": "refunds"}, None), InMemoryRun(), asyncio.Event()
        )
        assert unpinned.error is not None and unpinned.error.message.startswith("this run has no skills")

    asyncio.run(scenario())


def test_the_skill_tools_follow_the_agents_tool_policy_hooks_and_trust() -> None:
    def rename(info: ToolCallInfo, ctx: ToolContext) -> dict[str, Any]:
        return {"name": "refunds"} if info.tool_name == TOOL_SKILL_LOAD else info.input

    files = {"a.md": "A"}
    app = App(
        agents=[
            agent(
                tool_policy=lambda name, run: name != TOOL_SKILL_READ,
                hooks=AgentHooks(before_tool_execution=rename),
                trust=AgentTrust(tools={TOOL_SKILL_LOAD: Trust(taint=True)}),
                skills=[skill(name="refunds", description="Refunds.", instructions="Refund.", files=files)],
            )
        ]
    )
    runtime = AppRuntime(app)

    async def scenario() -> None:
        catalog = await runtime.skills.current(runtime.app.agent("clerk"))
        assert catalog is not None
        runner = ToolRunner(runtime)
        refused = await runner.run(
            skill_request(TOOL_SKILL_READ, {"name": "refunds", "path": "a.md"}, catalog.version),
            InMemoryRun(),
            asyncio.Event(),
        )
        assert refused.error is not None and refused.error.code == "tool_not_allowed"
        renamed = await runner.run(
            skill_request(TOOL_SKILL_LOAD, {"name": "refundz"}, catalog.version),
            InMemoryRun(),
            asyncio.Event(),
        )
        assert renamed.status == "ok" and renamed.output["skill"] == "refunds"
        assert renamed.taint == "tool:skill_load"

    asyncio.run(scenario())
    with pytest.raises(InvalidAgentDefinitionError, match="trust classifies 'skill_load', a skill tool, but"):
        App(agents=[agent(trust=AgentTrust(tools={TOOL_SKILL_LOAD: Trust(taint=True)}))])


# ---- git -------------------------------------------------------------------------------------


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def commit_skill(repo: Path, text: str) -> str:
    write_skill(repo / "skills", "refund-procedure", text)
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "skill")
    return git(repo, "rev-parse", "HEAD")


def test_a_git_source_pins_its_branch_once_and_moves_only_when_asked(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "--quiet", "--initial-branch=main")
    first = commit_skill(repo, REFUND)
    store = ArtifactStore.local(tmp_path / "artifacts")
    source = git_skills(str(repo), ref="main", path="skills")

    def app() -> App:
        return App(agents=[agent()], skills=[source])

    async def instructions(runtime: AppRuntime) -> str:
        catalog = await runtime.skills.current(runtime.app.agent("clerk"))
        assert catalog is not None
        return str((await catalog.load("refund-procedure"))["instructions"])

    async def scenario() -> None:
        booted = AppRuntime(app(), artifacts=store, skills_cache=tmp_path / "cache")
        assert "Refund at most" in await instructions(booted)
        pin = StorePins(store).get(source.pin_key)
        assert pin is not None and pin.commit == first
        second = commit_skill(repo, REFUND.replace("Refund at most", "Refund up to"))
        again = AppRuntime(app(), artifacts=store, skills_cache=tmp_path / "cache")
        assert "Refund at most" in await instructions(again)  # the branch moved, the pin did not
        await again.skills.load(update=True)  # asked: `chamvi skills update`
        assert "Refund up to" in await instructions(again)
        moved = StorePins(store).get(source.pin_key)
        assert moved is not None and moved.commit == second
        later = AppRuntime(app(), artifacts=store, skills_cache=tmp_path / "other-cache")
        assert "Refund up to" in await instructions(later)  # another worker, a fresh clone, the new pin
        fixed = App(agents=[agent()], skills=[git_skills(str(repo), path="skills", commit=first[:12])])
        assert "Refund at most" in await instructions(
            AppRuntime(fixed, artifacts=store, skills_cache=tmp_path / "cache")
        )

    asyncio.run(scenario())


def test_a_git_skill_names_its_commit_and_file_when_it_is_bad(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "--quiet", "--initial-branch=main")
    commit = commit_skill(repo, "---\nname: wrong\ndescription: x\n---\n")
    app = App(agents=[agent()], skills=[git_skills(str(repo), path="skills")])
    with pytest.raises(InvalidSkillError) as raised:
        asyncio.run(AppRuntime(app, skills_cache=tmp_path / "cache").skills.load())
    assert raised.value.message.startswith(
        f"skill {repo}@{commit[:12]}:skills/refund-procedure/SKILL.md: name 'wrong'"
    )
    missing = App(agents=[agent()], skills=[git_skills(str(tmp_path / "nowhere"), ref="main")])
    with pytest.raises(InvalidSkillError, match="cannot fetch 'main'"):
        asyncio.run(AppRuntime(missing, skills_cache=tmp_path / "cache").skills.load())


def test_loading_a_skill_from_an_untrusted_git_source_taints_the_run(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "--quiet", "--initial-branch=main")
    commit_skill(repo, REFUND)
    theirs = git_skills(str(repo), ref="main", path="skills", trusted=False)
    runtime = AppRuntime(App(agents=[agent()], skills=[theirs]), skills_cache=tmp_path / "cache")

    async def scenario() -> None:
        catalog = await runtime.skills.current(runtime.app.agent("clerk"))
        assert catalog is not None and not catalog.get("refund-procedure").trusted
        runner = ToolRunner(runtime)
        loaded = await runner.run(
            skill_request(TOOL_SKILL_LOAD, {"name": "refund-procedure"}, catalog.version),
            InMemoryRun(),
            asyncio.Event(),
        )
        assert loaded.status == "ok" and loaded.taint == "skill:refund-procedure"
        assert "Refund at most" in loaded.output["instructions"]  # the text reaches the model, tainted

    asyncio.run(scenario())
