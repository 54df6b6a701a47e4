"""Where slotline.yaml is found: `--config`, `$SLOTLINE_CONFIG`, the project's file found by
walking up from the current folder, the user's file under `$XDG_CONFIG_HOME`; and that the
file's relative paths are relative to its own folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from slotline.config.file import find_config_file, load_config, lookup_places, redacted
from slotline.errors import InvalidInput


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project with a nested folder, an empty user config folder, no $SLOTLINE_CONFIG;
    the current folder is the project's nested one."""
    monkeypatch.delenv("SLOTLINE_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    nested = tmp_path / "app" / "src" / "pkg"
    nested.mkdir(parents=True)
    monkeypatch.chdir(nested)
    return tmp_path


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_the_projects_file_is_found_from_a_nested_folder(home: Path) -> None:
    project = write(home / "app" / "slotline.yaml", "max_concurrent: 2\n")
    write(home / "xdg" / "slotline" / "slotline.yaml", "max_concurrent: 9\n")
    assert find_config_file(None) == project
    config = load_config(env={})
    assert (config.max_concurrent, config.source) == (2, str(project))


def test_the_nearest_file_above_wins(home: Path) -> None:
    write(home / "slotline.yaml", "max_concurrent: 1\n")
    nearer = write(home / "app" / "src" / "slotline.yaml", "max_concurrent: 5\n")
    assert find_config_file(None) == nearer
    assert load_config(env={}).max_concurrent == 5


def test_a_file_others_may_write_is_passed_over_with_a_warning(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A slotline.yaml planted in a shared parent (as /tmp) chooses no one's commands
    owned = write(home / "slotline.yaml", "max_concurrent: 1\n")
    planted = write(home / "app" / "slotline.yaml", "max_concurrent: 7\n")
    planted.chmod(0o666)
    assert find_config_file(None) == owned
    assert f"warning: {planted} is ignored" in capsys.readouterr().err
    # but one named explicitly is read
    assert load_config(planted, env={}).max_concurrent == 7


def test_an_unreadable_file_is_a_clear_error(home: Path) -> None:
    broken = write(home / "app" / "slotline.yaml", "max_concurrent: 2\n")
    broken.write_bytes(b"max_concurrent: \xff\xfe\n")
    with pytest.raises(InvalidInput, match=r"slotline\.yaml: cannot be read"):
        load_config(env={})


def test_the_users_file_applies_when_the_project_has_none(home: Path) -> None:
    user = write(home / "xdg" / "slotline" / "slotline.yaml", "max_concurrent: 9\n")
    assert find_config_file(None) == user
    assert load_config(env={}).max_concurrent == 9


def test_slotline_config_beats_the_projects_file_and_config_beats_both(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(home / "app" / "slotline.yaml", "max_concurrent: 2\n")
    named = write(home / "elsewhere" / "named.yaml", "max_concurrent: 6\n")
    monkeypatch.setenv("SLOTLINE_CONFIG", str(named))
    assert load_config(env={}).max_concurrent == 6
    explicit = write(home / "explicit.yaml", "max_concurrent: 7\n")
    assert load_config(explicit, env={}).max_concurrent == 7
    # A relative name is the current folder's, and said as a full path.
    here = write(Path.cwd() / "here.yaml", "max_concurrent: 8\n")
    assert find_config_file("here.yaml") == here
    monkeypatch.setenv("SLOTLINE_CONFIG", "here.yaml")
    assert load_config(env={}).source == str(here)


def test_with_no_file_anywhere_the_defaults_apply(home: Path) -> None:
    assert find_config_file(None) is None
    config = load_config(env={})
    assert (config.max_concurrent, config.source) == (3, None)
    user = home / "xdg" / "slotline" / "slotline.yaml"
    assert lookup_places() == f"{Path.cwd()} and the folders above it, then {user}"


def test_relative_paths_in_the_file_are_relative_to_its_folder(home: Path) -> None:
    # Given a project's file naming its store and an agent's repository relatively,
    write(
        home / "app" / "slotline.yaml",
        "store: .slotline/queue.db\n"
        "agents:\n"
        "  coder: {command: [coder, '{prompt}'], isolation: worktree, repo: ../lib}\n"
        "  home: {command: [coder, '{prompt}'], isolation: worktree, repo: ~/lib}\n",
    )
    # when it is read from a nested folder,
    config = load_config(env={})
    # then they name the places beside the file, not below the current folder;
    assert config.store == str(home / "app" / ".slotline" / "queue.db")
    assert config.agents["coder"].repo == str(home / "lib")
    assert config.agents["home"].repo == str(Path("~/lib").expanduser())
    # a store given in the environment stays as given, and a URL is no path.
    assert load_config(env={"SLOTLINE_STORE": "mine.db"}).store == "mine.db"
    write(home / "app" / "slotline.yaml", "store: postgresql://me:secret@db/q?sslmode=off\n")
    assert load_config(env={}).store == "postgresql://me:secret@db/q?sslmode=off"


def test_a_password_in_the_store_urls_query_is_hidden_too() -> None:
    config = load_config(env={"SLOTLINE_STORE": "postgresql://db/q?user=me&password=secret"})
    assert redacted(config)["store"] == "postgresql://db/q?user=me&password=***"


def test_a_removed_current_folder_is_a_clear_error(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gone = home / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    with pytest.raises(InvalidInput, match="the current folder no longer exists"):
        load_config(env={})
