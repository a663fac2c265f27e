"""The candidate store of a hill-climb: every candidate, decided, kept where a person can look.

``git`` (default; ``runs/<id>/store/``, one commit per candidate on branch ``candidates``,
accepted ones tagged, branch ``best`` following the best) or ``copy`` (the run dir's snapshots).
``hill_climb/store-<kind>.json`` keeps what a store holds,
so a resumed loop commits each candidate once."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._project.candidate import iter_files
from .._project.spec import HILL_CLIMB_STORES
from .._store.files import atomic_write_json, read_json

BEST_BRANCH = "best"
LOG_BRANCH = "candidates"  # every candidate, in the order decided


class StoreError(Exception):
    """The store could not record a candidate; the message says what failed."""


class CandidateStore:
    """Records candidates once each; ``index`` maps tag → what the store made of it."""

    def __init__(self, root: Path, index_path: Path) -> None:
        self.root = root
        self.index_path = index_path

    def index(self) -> dict[str, Any]:
        return dict(read_json(self.index_path)) if self.index_path.is_file() else {}

    def holds(self, tag: str) -> bool:
        return tag in self.index()

    def record(self, tag: str, files: Path, message: str, *, accepted: bool) -> Any:
        """Commit ``tag`` (its files at ``files``) unless already held; returns the store's id."""
        index = self.index()
        if tag in index:
            return index[tag]
        ref = self._commit(tag, files, message, accepted=accepted)
        index[tag] = ref
        atomic_write_json(self.index_path, index)
        return ref

    def _commit(self, tag: str, files: Path, message: str, *, accepted: bool) -> Any:
        return str(files)  # copy: the snapshot is the record


class GitStore(CandidateStore):
    def _repo(self) -> Any:
        import git  # gitpython; imported when a git store is used

        if (self.root / ".git").is_dir():
            return git.Repo(self.root)
        self.root.mkdir(parents=True, exist_ok=True)
        repo = git.Repo.init(self.root)
        repo.git.symbolic_ref("HEAD", f"refs/heads/{LOG_BRANCH}")
        with repo.config_writer() as config:
            config.set_value("user", "name", "capevolve hill-climb")
            config.set_value("user", "email", "hill-climb@capevolve.invalid")
            config.set_value("commit", "gpgsign", "false")
        return repo

    def _commit(self, tag: str, files: Path, message: str, *, accepted: bool) -> Any:
        repo = self._repo()
        try:
            for child in self.root.iterdir():
                if child.name == ".git":
                    continue
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
                else:
                    child.unlink()
            source = files.resolve()
            for path in iter_files(source):
                target = self.root / path.relative_to(source)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
            repo.git.add("-A")
            repo.git.commit("--allow-empty", "--no-verify", "-q", "-m", message)
            sha = repo.head.commit.hexsha
            if accepted:
                repo.create_tag(tag, ref=sha, force=True)
                repo.git.branch("-f", BEST_BRANCH, sha)
            return sha
        finally:
            # reading HEAD starts gitpython's `git cat-file` processes: end them here, not at GC
            repo.close()


# The backends by `--store` name (the spec's HILL_CLIMB_STORES, a floor below, repeats the names)
STORE_KINDS: dict[str, Callable[[Path, Path], CandidateStore]] = {
    "git": lambda root, index: GitStore(root / "store", index),
    "copy": lambda root, index: CandidateStore(root / "candidates", index),
}


def open_store(kind: str, run_root: Path) -> CandidateStore:
    """The store ``kind`` of the run at ``run_root``."""
    index = run_root / "hill_climb" / f"store-{kind}.json"  # what this kind of store holds
    make = STORE_KINDS.get(kind)
    if make is None:
        raise StoreError(f"--store {kind!r}: use one of {', '.join(HILL_CLIMB_STORES)}")
    return make(run_root, index)


def store_anchor(root: Path) -> str:
    """The anchor in the newest commit of the git store at ``root`` (its ``candidates`` branch):
    the log's head when that candidate was booked (:meth:`.._store.log.event_chain.Head.trailer`)."""
    from .._store.log.event_chain import anchor_in_message

    if not (root / ".git").is_dir():
        raise StoreError(f"no git candidate store at {root} (hill-climb --store git makes one)")
    import git  # gitpython; imported when a git store is read

    try:
        repo = git.Repo(root)
        try:
            message = str(repo.commit(LOG_BRANCH).message)
        finally:
            repo.close()  # its `git cat-file` processes end with the read (see GitStore._commit)
    except (git.GitError, ValueError) as exc:  # no such branch, a damaged repository
        raise StoreError(f"the git store at {root} has no readable {LOG_BRANCH!r} branch ({exc})") from None
    anchor = anchor_in_message(message)
    if anchor is None:
        raise StoreError(
            f"the newest commit of the git store at {root} carries no anchor (a store made before anchors)"
        )
    return anchor
