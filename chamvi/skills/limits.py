"""How much a skill and an agent's skills may hold: the seed's "small (16 skills, ~1 MiB)"."""

from __future__ import annotations

from dataclasses import dataclass

from chamvi.errors import InvalidAppError


@dataclass(frozen=True)
class SkillLimits:
    """Size limits of skills, checked at the boot (a skill over one fails it, naming its file).

    Args:
        skill_bytes: one skill: its instructions and every file of its folder (256 KiB), so that a
            ``skill_load`` result stays far below what a run's history takes in one step.
        agent_bytes: all the skills of one agent, defaults and its own (1 MiB).
        agent_skills: how many skills one agent has at most (32; the seed's example has 16).
        read_bytes: the most text one ``skill_read`` returns (64 KiB); a longer file is cut, and
            the result says so.
    """

    skill_bytes: int = 256 * 1024
    agent_bytes: int = 1024 * 1024
    agent_skills: int = 32
    read_bytes: int = 64 * 1024

    def __post_init__(self) -> None:
        for name in ("skill_bytes", "agent_bytes", "agent_skills", "read_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InvalidAppError(f"SkillLimits.{name} must be a positive whole number, not {value!r}")
