"""``git_skills``: the skill folders of a git repository, pinned to one commit.

A branch or tag resolves once: the commit it named is recorded in the stack's pin store (the
artifact store's ``skills/pins/``, shared by every worker), and every later boot loads that commit
until someone asks the pin to move (``chamvi skills update``). ``commit=`` pins it in the code
instead. The repository is fetched into a bare clone under the data folder (``<data>/skills/git``)
with the ``git`` command, so a boot whose commit is there already needs no network.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from chamvi._constants import SKILL_FILE
from chamvi.errors import InvalidAgentDefinitionError, InvalidSkillError
from chamvi.skills._format import Skill, skills_from_tree
from chamvi.skills.sources import PinRecord, SkillLoadContext, skill_paths

GIT_TIMEOUT_SECONDS = 300.0
"""The longest one git command may take (a first clone of a large repository)."""
_COMMIT = re.compile(r"^[0-9a-f]{7,64}$")
_SYMLINK = "120000"


def _one_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no detail"


def _git(repo: Path, *args: str, stdin: bytes | None = None) -> bytes:
    """``git -C repo args``'s output; a failure raises ``RuntimeError`` with git's last line."""
    try:
        done = subprocess.run(
            # a credential git lacks fails the fetch instead of waiting at a prompt nobody sees
            ["git", "-c", "core.askPass=true", "-C", str(repo), *args],
            input=stdin,
            capture_output=True,
            timeout=GIT_TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"git {args[0]} took longer than {GIT_TIMEOUT_SECONDS:g} s") from None
    if done.returncode != 0:
        raise RuntimeError(_one_line(done.stderr.decode(errors="replace")))
    return done.stdout


@dataclass(frozen=True)
class GitSkills:
    """Every skill folder below ``path`` in the repository at ``url``, at one commit."""

    url: str
    ref: str = "HEAD"
    path: str = ""
    commit: str | None = None
    trusted: bool = True
    kind: str = "git"

    @property
    def pin_key(self) -> str:
        """The name of this source's pin: one per repository and ref (its paths share the commit)."""
        return hashlib.sha256(f"{self.url}\0{self.ref}".encode()).hexdigest()[:32]

    @property
    def where(self) -> str:
        """The source for messages: ``<url>`` and the ref or commit it follows."""
        return f"{self.url} ({self.commit or self.ref})"

    def check(self) -> None:
        """Refuses a machine without the ``git`` command, at definition.

        Raises:
            InvalidAgentDefinitionError: no ``git`` on the PATH.
        """
        if shutil.which("git") is None:
            raise InvalidAgentDefinitionError(
                f"git_skills({self.url!r}) needs the git command: install git (apt-get install git)"
            )

    def _clone(self, ctx: SkillLoadContext) -> Path:
        repo = ctx.cache / "git" / hashlib.sha256(self.url.encode()).hexdigest()[:16]
        if not (repo / "HEAD").is_file():
            repo.mkdir(parents=True, exist_ok=True)
            _git(repo, "init", "--quiet", "--bare")
        return repo

    def _has(self, repo: Path, commit: str) -> str | None:
        try:
            return _git(repo, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}").decode().strip()
        except RuntimeError:
            return None

    def _fetch(self, repo: Path, refspec: str) -> None:
        try:
            _git(repo, "fetch", "--quiet", "--no-tags", "--force", self.url, refspec)
        except RuntimeError as error:
            raise InvalidSkillError(
                f"skill source git {self.where}: cannot fetch {refspec.split(':')[0]!r}: {error}"
            ) from None

    def _at(self, repo: Path, commit: str) -> str:
        """The full id of ``commit``, fetched when the clone lacks it, kept from garbage collection."""
        found = self._has(repo, commit)
        if found is None:
            try:  # servers that allow asking for a commit by id (GitHub, git >= 2.5 with protocol v2)
                self._fetch(repo, commit)
            except InvalidSkillError:
                self._fetch(repo, f"{self.ref}:refs/chamvi/ref-{self.pin_key}")
            found = self._has(repo, commit)
        if found is None:
            raise InvalidSkillError(
                f"skill source git {self.where}: commit {commit!r} is not in the repository"
            )
        _git(repo, "update-ref", f"refs/chamvi/commit-{found}", found)
        return found

    def resolve(self, ctx: SkillLoadContext) -> str:
        """The commit to load: ``commit=``, else the recorded pin, else what the ref names now.

        A first resolution is recorded (``ctx.record``); ``ctx.update`` resolves the ref again and
        moves the pin.

        Raises:
            InvalidSkillError: the repository, the ref or the commit cannot be fetched.
        """
        repo = self._clone(ctx)
        if self.commit is not None:
            return self._at(repo, self.commit)
        pinned = ctx.pins.get(self.pin_key)
        if pinned is not None and not ctx.update:
            return self._at(repo, pinned.commit)
        local = f"refs/chamvi/ref-{self.pin_key}"
        self._fetch(repo, f"{self.ref}:{local}")
        commit = self._at(repo, local)
        if ctx.record or ctx.update:
            ctx.pins.set(self.pin_key, PinRecord(commit=commit, url=self.url, ref=self.ref))
        return commit

    def _tree(self, repo: Path, commit: str, ctx: SkillLoadContext) -> dict[str, bytes]:
        """The files of the skill folders below ``path`` at ``commit``; sizes checked before reading."""
        prefix = f"{self.path}/" if self.path else ""
        listing = _git(
            repo, "ls-tree", "-r", "-z", "--long", commit, "--", *([self.path] if self.path else [])
        )
        entries: dict[str, tuple[str, int]] = {}
        for raw in listing.split(b"\0"):
            if not raw:
                continue
            meta, _, name = raw.decode("utf-8", errors="surrogateescape").partition("\t")
            mode, kind, obj, length = meta.split()
            rel = name[len(prefix) :] if name.startswith(prefix) else None
            if (
                kind != "blob"
                or mode == _SYMLINK
                or rel is None
                or any(p.startswith(".") for p in rel.split("/"))
            ):
                continue
            entries[rel] = (obj, int(length))
        sizes = {rel: size for rel, (_, size) in entries.items()}
        inside = skill_paths(sizes, ctx.limits, lambda rel: self._name(commit, rel))
        wanted = {rel: entries[rel][0] for rel in inside}
        return _read_blobs(repo, wanted)

    def _name(self, commit: str, rel: str) -> str:
        return f"{self.url}@{commit[:12]}:{posixpath.join(self.path, rel)}"

    def load(self, ctx: SkillLoadContext) -> list[Skill]:
        """The skills at the pinned commit (see :meth:`resolve`).

        Raises:
            InvalidSkillError: fetching failed, a skill breaks the format, or the path holds none.
        """
        self.check()
        commit = self.resolve(ctx)
        files = self._tree(self._clone(ctx), commit, ctx)
        skills = skills_from_tree(
            files,
            f"{self.url}@{commit[:12]}",
            source=self.kind,
            trusted=self.trusted,
            root_name=posixpath.basename(self.path) or None,
            where=lambda rel: self._name(commit, rel),
        )
        if not skills:
            raise InvalidSkillError(
                f"skill source git {self.url}@{commit[:12]}:{self.path or '/'}: holds no skill (a folder "
                f"with a {SKILL_FILE})"
            )
        return skills


def _read_blobs(repo: Path, wanted: dict[str, str]) -> dict[str, bytes]:
    """The bytes of each blob, in one ``git cat-file --batch``."""
    if not wanted:
        return {}
    order = list(wanted.items())
    out = _git(repo, "cat-file", "--batch", stdin="".join(f"{obj}\n" for _, obj in order).encode())
    files: dict[str, bytes] = {}
    at = 0
    for rel, _ in order:
        header_end = out.index(b"\n", at)
        size = int(out[at:header_end].split()[2])
        files[rel] = out[header_end + 1 : header_end + 1 + size]
        at = header_end + 1 + size + 1
    return files


def git_skills(
    url: str, *, ref: str = "HEAD", path: str = "", commit: str | None = None, trusted: bool = True
) -> GitSkills:
    """The skill folders below ``path`` in a git repository, pinned to one commit.

    Args:
        url: what ``git fetch`` takes: ``https://...``, ``git@host:...``, a local path.
        ref: the branch or tag to follow (the remote's default branch by default). It resolves once,
            and the commit is recorded; the pin moves only when asked (``chamvi skills update``).
        path: the folder inside the repository that holds the skill folders (the top by default).
        commit: pin it in the code instead: this commit, whatever the ref says.
        trusted: False for a repository outside your review: loading one of its skills taints
            the run.

    Raises:
        InvalidAgentDefinitionError: a malformed ``url``, ``ref``, ``path`` or ``commit``.
    """
    if not isinstance(url, str) or not url.strip() or url.startswith("-"):
        raise InvalidAgentDefinitionError(f"git_skills() url {url!r} is not a repository address")
    if not isinstance(ref, str) or not ref or ref.startswith("-") or ":" in ref:
        raise InvalidAgentDefinitionError(f"git_skills({url!r}) ref {ref!r} must name a branch or tag")
    if commit is not None and (not isinstance(commit, str) or not _COMMIT.match(commit)):
        raise InvalidAgentDefinitionError(
            f"git_skills({url!r}) commit {commit!r} must be a commit id (7 to 64 hex digits)"
        )
    if os.path.isdir(url):  # a local repository: git runs in the clone's folder, not here
        url = os.path.abspath(url)
    clean = posixpath.normpath(path).strip("/") if path else ""
    if clean in (".", "") or not path:
        clean = ""
    if clean.startswith("..") or clean.startswith("-"):
        raise InvalidAgentDefinitionError(
            f"git_skills({url!r}) path {path!r} must be a folder of the repository"
        )
    return GitSkills(url=url, ref=ref, path=clean, commit=commit, trusted=trusted)
