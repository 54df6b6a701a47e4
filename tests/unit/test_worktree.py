"""worktrees/worktree.py and the submit check, against real git repositories in tmp_path."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest

from gitrepos import branches, commit_file, make_repo, run, show, worktree_paths
from slotline.errors import InvalidInput
from slotline.spec import parse_spec
from slotline.worktrees import changes, worktree
from slotline.worktrees.git import GitFailed
from slotline.worktrees.isolation import Checkout, DiffStat, KeepPolicy, WorktreeState
from slotline.worktrees.pinning import pin
from slotline.worktrees.worktree import WorktreeError

TASK = "a" * 32


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"app.py": "print('v1')\n", "lib/util.py": "x = 1\n"})


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "data" / "worktrees"


def test_a_worktree_is_a_new_branch_at_the_base_outside_the_repository(
    repo: Path, root: Path
) -> None:
    head = run(repo, "rev-parse", "HEAD")
    checkout = worktree.create(root, str(repo), "main", TASK, 1)
    assert checkout.branch == f"slotline/{TASK}-1"
    assert checkout.base_commit == head
    assert Path(checkout.path).is_relative_to(root)
    assert run(Path(checkout.path), "rev-parse", "HEAD") == head
    assert (Path(checkout.path) / "app.py").read_text() == "print('v1')\n"
    # The user's checkout is untouched: same branch, nothing new in its status.
    assert run(repo, "symbolic-ref", "--short", "HEAD") == "main"
    assert run(repo, "status", "--porcelain") == ""
    assert worktree_paths(repo)[1] == checkout.path


def test_the_base_may_be_any_commit(repo: Path, root: Path) -> None:
    first = run(repo, "rev-parse", "HEAD")
    commit_file(repo, "app.py", "print('v2')\n")
    checkout = worktree.create(root, str(repo), first, TASK, 1)
    assert (Path(checkout.path) / "app.py").read_text() == "print('v1')\n"


def test_clear_errors_for_a_missing_repo_a_plain_folder_and_a_bad_base(
    tmp_path: Path, repo: Path, root: Path
) -> None:
    with pytest.raises(WorktreeError, match="does not exist"):
        worktree.create(root, str(tmp_path / "gone"), "HEAD", TASK, 1)
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(WorktreeError, match="is not a git repository"):
        worktree.create(root, str(plain), "HEAD", TASK, 1)
    with pytest.raises(WorktreeError, match="base 'nope' names no commit"):
        worktree.create(root, str(repo), "nope", TASK, 1)


def test_creating_again_after_a_crash_finds_the_same_worktree(repo: Path, root: Path) -> None:
    first = worktree.create(root, str(repo), "HEAD", TASK, 1)
    again = worktree.create(root, str(repo), "HEAD", TASK, 1)
    assert again == first


def test_concurrent_creates_on_one_repository_all_succeed(repo: Path, root: Path) -> None:
    made: list[Checkout] = []
    failed: list[BaseException] = []

    def create(number: int) -> None:
        try:
            made.append(worktree.create(root, str(repo), "HEAD", TASK, number))
        except BaseException as exc:
            failed.append(exc)

    threads = [threading.Thread(target=create, args=(n,)) for n in range(1, 7)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failed == []
    assert len({c.path for c in made}) == 6
    assert len(worktree_paths(repo)) == 7


def test_the_diff_stat_counts_committed_staged_unstaged_and_new_files(
    repo: Path, root: Path
) -> None:
    checkout = worktree.create(root, str(repo), "HEAD", TASK, 1)
    path = Path(checkout.path)
    assert changes.measure(checkout) == DiffStat(0, 0, 0)
    commit_file(path, "app.py", "print('v2')\nprint('more')\n")  # committed: +2 -1
    (path / "lib" / "util.py").write_text("x = 2\n")  # unstaged: +1 -1
    (path / "new.txt").write_text("a\nb\nc\n")  # untracked: +3
    index_before = run(path, "status", "--porcelain")
    assert changes.measure(checkout) == DiffStat(3, 6, 2)
    # Measuring leaves the worktree's own index as it was.
    assert run(path, "status", "--porcelain") == index_before


# The one object intent-to-add writes: the empty file's, whatever the files hold.
EMPTY_BLOB = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"


def stored_objects(repo: Path) -> set[str]:
    """The ids of the loose objects of `repo`, and its pack files by name."""
    found = (f for f in (repo / ".git" / "objects").rglob("*") if f.is_file())
    return {f.parent.name + f.name if len(f.parent.name) == 2 else f.name for f in found}


def test_measuring_counts_a_new_file_without_storing_it_in_the_repository(
    repo: Path, root: Path
) -> None:
    # Given a run that left a large new file (a build output, a secret) and a staged
    # deletion in its worktree,
    checkout = worktree.create(root, str(repo), "HEAD", TASK, 1)
    path = Path(checkout.path)
    (path / "build.log").write_text("".join(f"secret line {n}\n" for n in range(20000)))
    run(path, "rm", "-q", "lib/util.py")
    blob = run(path, "hash-object", "build.log")  # its id, not written
    before = stored_objects(repo)
    # When it is measured, at the run's end and again by a sweep,
    assert changes.measure(checkout) == DiffStat(2, 20000, 1)
    assert changes.measure(checkout) == DiffStat(2, 20000, 1)
    # Then nothing of it was written to the repository's objects.
    assert stored_objects(repo) - before <= {EMPTY_BLOB}
    with pytest.raises(GitFailed):
        run(repo, "cat-file", "-e", blob)


@pytest.mark.parametrize(
    ("keep", "ended", "dirty", "state"),
    [
        (KeepPolicy.ON_FAILURE, "succeeded", False, WorktreeState.REMOVED),
        (KeepPolicy.ON_FAILURE, "succeeded", True, WorktreeState.KEPT),
        (KeepPolicy.ON_FAILURE, "failed", False, WorktreeState.KEPT),
        (KeepPolicy.ON_FAILURE, "cancelled", True, WorktreeState.REMOVED),
        (KeepPolicy.ALWAYS, "succeeded", False, WorktreeState.KEPT),
        (KeepPolicy.NEVER, "failed", True, WorktreeState.REMOVED),
    ],
)
def test_the_keep_policy(
    repo: Path, root: Path, keep: KeepPolicy, ended: str, dirty: bool, state: WorktreeState
) -> None:
    checkout = worktree.create(root, str(repo), "HEAD", TASK, 1)
    if dirty:
        (Path(checkout.path) / "app.py").write_text("half done\n")
    assert worktree.settle(root, checkout, keep, ended)[0] is state
    assert Path(checkout.path).exists() == (state is WorktreeState.KEPT)


def test_removing_keeps_a_branch_with_commits_and_deletes_an_empty_one(
    repo: Path, root: Path
) -> None:
    worked = worktree.create(root, str(repo), "HEAD", TASK, 1)
    idle = worktree.create(root, str(repo), "HEAD", TASK, 2)
    commit_file(Path(worked.path), "app.py", "print('agent')\n", "agent work")
    state, diff = worktree.settle(root, worked, KeepPolicy.ON_FAILURE, "succeeded")
    assert (state, diff) == (WorktreeState.REMOVED, DiffStat(1, 1, 1))
    worktree.settle(root, idle, KeepPolicy.ON_FAILURE, "succeeded")
    assert branches(repo) == ["main", worked.branch]
    assert show(repo, worked.branch, "app.py") == "print('agent')"
    assert worktree_paths(repo) == [str(repo)]
    # Measured again from the branch alone, as after a crash.
    assert changes.measure(worked) == DiffStat(1, 1, 1)


def test_the_users_own_missing_worktree_stays_registered(
    tmp_path: Path, repo: Path, root: Path
) -> None:
    # The user's own worktree on a drive that is not mounted now: its folder is missing.
    theirs = tmp_path / "usb" / "feature"
    run(repo, "worktree", "add", "--quiet", "-b", "feature", str(theirs))
    shutil.rmtree(theirs)
    # slotline creates, removes, and sweeps its own worktrees beside it,
    ours = worktree.create(root, str(repo), "HEAD", TASK, 1)
    worktree.settle(root, ours, KeepPolicy.ON_FAILURE, "succeeded")
    orphan = worktree.create(root, str(repo), "HEAD", TASK, 2)
    assert worktree.remove_orphan(root, Path(orphan.path)) is None
    # and never forgets the user's.
    assert str(theirs) in worktree_paths(repo)


def test_a_worktree_folder_a_crash_left_registered_is_made_again(repo: Path, root: Path) -> None:
    first = worktree.create(root, str(repo), "HEAD", TASK, 1)
    shutil.rmtree(first.path)  # deleted without git: still registered
    again = worktree.create(root, str(repo), "HEAD", TASK, 1)
    assert Path(again.path).is_dir()
    assert run(Path(again.path), "rev-parse", "HEAD") == first.base_commit


def test_an_orphan_is_removed_and_its_branch_kept_while_it_holds_work(
    repo: Path, root: Path
) -> None:
    worked = worktree.create(root, str(repo), "HEAD", TASK, 1)
    idle = worktree.create(root, str(repo), "HEAD", TASK, 2)
    commit_file(Path(worked.path), "app.py", "print('agent')\n")
    assert worktree.remove_orphan(root, Path(worked.path)) is None
    assert worktree.remove_orphan(root, Path(idle.path)) is None
    assert not Path(worked.path).exists()
    assert not Path(idle.path).exists()
    assert branches(repo) == ["main", worked.branch]
    assert worktree_paths(repo) == [str(repo)]


def test_an_orphan_holding_work_is_kept_and_says_why(repo: Path, root: Path) -> None:
    # Given orphans with uncommitted edits, with a new file, and with a commit made on a
    # detached HEAD (on no branch),
    edited = worktree.create(root, str(repo), "HEAD", TASK, 1)
    (Path(edited.path) / "app.py").write_text("half done\n")
    added = worktree.create(root, str(repo), "HEAD", TASK, 2)
    (Path(added.path) / "notes.txt").write_text("findings\n")
    detached = worktree.create(root, str(repo), "HEAD", TASK, 3)
    run(Path(detached.path), "checkout", "-q", "--detach")
    commit_file(Path(detached.path), "app.py", "print('lost?')\n", "on no branch")
    stray = run(Path(detached.path), "rev-parse", "HEAD")
    # When the sweep removes orphans, then each is kept with the reason, work intact.
    assert "uncommitted" in (worktree.remove_orphan(root, Path(edited.path)) or "")
    assert "uncommitted" in (worktree.remove_orphan(root, Path(added.path)) or "")
    assert "no branch" in (worktree.remove_orphan(root, Path(detached.path)) or "")
    assert (Path(edited.path) / "app.py").read_text() == "half done\n"
    assert (Path(added.path) / "notes.txt").read_text() == "findings\n"
    assert run(Path(detached.path), "rev-parse", "HEAD") == stray
    assert len(worktree_paths(repo)) == 4
    # A detached HEAD whose commits a branch holds loses nothing: it is removed.
    run(repo, "branch", "saved", stray)
    assert worktree.remove_orphan(root, Path(detached.path)) is None
    assert not Path(detached.path).exists()


def test_a_missing_repository_leaves_only_the_folder_to_remove(
    repo: Path, root: Path, tmp_path: Path
) -> None:
    checkout = worktree.create(root, str(repo), "HEAD", TASK, 1)
    moved = Checkout(str(tmp_path / "moved-away"), checkout.path, checkout.branch, "0" * 40)
    worktree.remove(root, moved)
    assert not Path(checkout.path).exists()


def test_the_command_runs_in_the_workspace_subfolder_of_the_worktree(
    repo: Path, root: Path
) -> None:
    checkout = worktree.create(root, str(repo), "HEAD", TASK, 1)
    assert worktree.workdir(checkout, str(repo / "lib")) == str(Path(checkout.path) / "lib")
    assert worktree.workdir(checkout, str(repo)) == checkout.path
    assert worktree.workdir(checkout, "/elsewhere") == checkout.path


# -- the check at submit --------------------------------------------------------------


def test_submit_pins_the_repository_top_and_the_head_commit(repo: Path) -> None:
    spec = pin(
        parse_spec({"command": ["true"], "isolation": "worktree", "workspace": str(repo / "lib")})
    )
    assert spec.repo == str(repo)
    assert spec.base == "main"
    assert spec.base_commit == run(repo, "rev-parse", "HEAD")
    tagged = pin(
        parse_spec(
            {"command": ["true"], "isolation": "worktree", "repo": str(repo), "base": "HEAD"}
        )
    )
    assert (tagged.base, tagged.base_commit) == ("HEAD", spec.base_commit)


def test_submit_refuses_what_cannot_become_a_worktree(tmp_path: Path, repo: Path) -> None:
    def check(**fields: object) -> str:
        with pytest.raises(InvalidInput) as refused:
            pin(parse_spec({"command": ["true"], "isolation": "worktree", **fields}))
        return str(refused.value)

    assert "does not exist" in check(repo=str(tmp_path / "gone"))
    (tmp_path / "plain").mkdir()
    assert "is not a git repository" in check(repo=str(tmp_path / "plain"))
    assert "base: 'nope' names no commit" in check(repo=str(repo), base="nope")
    assert "must be a git ref" in check(repo=str(repo), base="--upload-pack=evil")
    run(tmp_path, "init", "-q", str(tmp_path / "empty"))
    assert "has no commit yet" in check(repo=str(tmp_path / "empty"))
    assert "needs a repository" in check()
    with pytest.raises(InvalidInput, match="only with isolation"):
        parse_spec({"command": ["true"], "repo": str(repo), "keep": "always"})


def test_an_agent_type_gives_its_worktree_settings_as_defaults(tmp_path: Path) -> None:
    from slotline.config.file import load_config
    from slotline.config.templates import expand_agent_type

    path = tmp_path / "slotline.yaml"
    path.write_text(
        "agents:\n  coder:\n    command: [coder, --, '{prompt}']\n    isolation: worktree\n"
        "    repo: ~/src/app\n    base: develop\n    keep: always\n"
    )
    config = load_config(path, env={})
    filled = expand_agent_type(config, {"agent": "coder"}, "fix it")
    assert filled["isolation"] == "worktree"
    assert filled["repo"] == str(Path("~/src/app").expanduser())
    assert (filled["base"], filled["keep"]) == ("develop", "always")
    mine = expand_agent_type(config, {"agent": "coder", "keep": "never"}, "fix it")
    assert mine["keep"] == "never"  # what the submit says wins
    path.write_text("agents:\n  coder:\n    command: [coder]\n    keep: sometimes\n")
    with pytest.raises(InvalidInput, match=r"slotline.yaml:4: agents.coder.keep"):
        load_config(path, env={})
