"""The ``skill_load`` and ``skill_read`` tools every agent with skills has.

Ordinary tools: the agent's tool policy, hooks and trust apply to them as to its own. Each reads
the catalog version its run recorded at the start (``ctx.run.skills_version``) from the worker's
:class:`~chamvi.skills.library.SkillLibrary` (provided under :data:`SKILLS`), so a retried call, a
call after an approval and a call after a deploy read the same text. A skill from an untrusted
source taints the run before its text reaches the model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chamvi._constants import TOOL_SKILL_LOAD, TOOL_SKILL_READ
from chamvi.context import ContextKey, define_context_key, inject
from chamvi.errors import SkillNotFoundError
from chamvi.tools import Tool, ToolContext, tool

if TYPE_CHECKING:
    from chamvi.skills.catalog import SkillCatalog
    from chamvi.skills.library import SkillLibrary

SKILLS: ContextKey[SkillLibrary] = define_context_key("chamvi.skills")
"""The worker's skill library, which a runtime provides to every tool call."""


async def run_catalog(ctx: ToolContext) -> SkillCatalog:
    """The catalog the call's run recorded at its start.

    Raises:
        SkillNotFoundError: the run recorded none (it started before its agent had skills).
        ContextNotProvidedError: no worker's runtime serves the call.
    """
    catalog = await inject(ctx, SKILLS).pinned(ctx.run.skills_version)
    if catalog is None:
        raise SkillNotFoundError(
            "this run has no skills: it started before its agent had any (its next runs have them)"
        )
    return catalog


async def _load(name: str, ctx: ToolContext) -> dict[str, Any]:
    catalog = await run_catalog(ctx)
    if not catalog.get(name).trusted:
        ctx.mark_tainted(f"skill:{name}")
    return await catalog.load(name)


async def _read(name: str, path: str, ctx: ToolContext) -> dict[str, Any]:
    catalog = await run_catalog(ctx)
    if not catalog.get(name).trusted:
        ctx.mark_tainted(f"skill:{name}")
    return await catalog.read(name, path)


SKILL_LOAD: Tool = tool(
    name=TOOL_SKILL_LOAD,
    description=(
        "Loads one of your skills by name (the system message lists them): its instructions, which "
        "you follow, and the files it has."
    ),
)(_load)
SKILL_READ: Tool = tool(
    name=TOOL_SKILL_READ,
    description=(
        "Reads one text file of a skill: give the skill's name and a file path that skill_load listed."
    ),
)(_read)
SKILL_TOOLS: dict[str, Tool] = {SKILL_LOAD.name: SKILL_LOAD, SKILL_READ.name: SKILL_READ}
"""The tools an agent with skills gets beside its own."""
