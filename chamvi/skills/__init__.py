"""Skills: procedures an agent follows, written by its creator, reviewed, pinned, loaded by name.

A skill is an Agent Skills folder (a ``SKILL.md`` with ``name`` and ``description`` front matter,
then Markdown instructions, beside optional ``scripts/``, ``references/`` and ``assets/``). Give
every agent defaults with ``App(skills=[...])`` and an agent its own with
``define_agent(skills=[...])``; sources are :func:`skills_folder`, :func:`git_skills`,
:func:`skill` (in code) and :func:`define_skill_source` (your own).

A run's model gets one extra system block after the agent's instructions listing its skills (name
and description), and two tools: ``skill_load(name)`` (the instructions and the list of files) and
``skill_read(name, path)`` (one text file). A run records its catalog's version when it starts, and
reads that version to its end, whatever a later deploy changed (the copies live in the artifact
store, content-addressed).
"""

from chamvi.skills._format import Skill, SkillFile
from chamvi.skills.catalog import SkillCatalog
from chamvi.skills.git import GitSkills, git_skills
from chamvi.skills.library import SkillLibrary, load_skill_catalog, skill_catalog
from chamvi.skills.limits import SkillLimits
from chamvi.skills.sources import (
    CustomSkillSource,
    InlineSkill,
    PinRecord,
    PinStore,
    SkillLoadContext,
    SkillsFolder,
    SkillSource,
    define_skill_source,
    skill,
    skills_folder,
)
from chamvi.skills.tools import SKILL_LOAD, SKILL_READ, SKILLS

__all__ = [
    "SKILLS",
    "SKILL_LOAD",
    "SKILL_READ",
    "CustomSkillSource",
    "GitSkills",
    "InlineSkill",
    "PinRecord",
    "PinStore",
    "Skill",
    "SkillCatalog",
    "SkillFile",
    "SkillLibrary",
    "SkillLimits",
    "SkillLoadContext",
    "SkillSource",
    "SkillsFolder",
    "define_skill_source",
    "git_skills",
    "load_skill_catalog",
    "skill",
    "skill_catalog",
    "skills_folder",
]
