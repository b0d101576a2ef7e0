"""Behaviour the mutation run (tests/mutation.sh, issue 18) showed no test would notice: where
the respondent's state file goes and how it is written."""

import os
import stat
import sys
from pathlib import Path

import pytest

from ldpsurvey.client import LocalState
from ldpsurvey.client.state import default_path

KEY = bytes(range(32))
AGGREGATOR = "http://aggregator.example"


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A fresh home folder and none of the variables that choose the state folder."""
    for name in ("LDP_SURVEY_CLIENT_DIR", "XDG_DATA_HOME", "APPDATA"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_the_client_folder_variable_wins(home, tmp_path, monkeypatch):
    monkeypatch.setenv("LDP_SURVEY_CLIENT_DIR", str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_path() == tmp_path / "mine" / "state.json"


@pytest.mark.parametrize("platform", ["linux", "freebsd14"])
def test_unix_uses_the_xdg_data_folder(home, tmp_path, monkeypatch, platform):
    monkeypatch.setattr(sys, "platform", platform)
    assert default_path() == home / ".local" / "share" / "ldp-survey" / "state.json"
    monkeypatch.setenv("XDG_DATA_HOME", "")  # empty means unset (XDG base directory spec)
    assert default_path() == home / ".local" / "share" / "ldp-survey" / "state.json"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_path() == tmp_path / "xdg" / "ldp-survey" / "state.json"


def test_macos_uses_application_support(home, monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    assert default_path() == home / "Library" / "Application Support" / "ldp-survey" / "state.json"


def test_windows_uses_appdata(home, tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "platform", "win32")
    assert default_path() == home / "ldp-survey" / "state.json"
    monkeypatch.setenv("APPDATA", str(tmp_path / "roaming"))
    assert default_path() == tmp_path / "roaming" / "ldp-survey" / "state.json"


def test_the_state_goes_where_asked(home, tmp_path, monkeypatch):
    """LocalState(path) writes at `path`; LocalState() at the default place; nowhere else."""
    monkeypatch.setenv("LDP_SURVEY_CLIENT_DIR", str(tmp_path / "default"))
    chosen = tmp_path / "chosen" / "state.json"
    LocalState(chosen).pin_key(AGGREGATOR, KEY)
    assert chosen.exists() and not (tmp_path / "default").exists()
    assert LocalState(chosen).pinned_key(AGGREGATOR) == KEY
    LocalState().pin_key(AGGREGATOR, KEY)
    assert (tmp_path / "default" / "state.json").exists()
    assert not home.exists()


def test_the_folder_is_created_private_and_holds_only_the_store(tmp_path):
    path = tmp_path / "a" / "b" / "state.json"
    LocalState(path).pin_key(AGGREGATOR, KEY)
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["state.json"]


def test_the_store_is_replaced_from_a_file_beside_it(tmp_path, monkeypatch):
    """An atomic rename needs the new file on the same file system: in the store's folder."""
    path = tmp_path / "state.json"
    renamed = []
    replace = os.replace

    def watching(source, target):
        renamed.append((Path(source).parent, Path(target)))
        replace(source, target)

    monkeypatch.setattr(os, "replace", watching)
    LocalState(path).pin_key(AGGREGATOR, KEY)
    assert renamed == [(tmp_path, path)]


def test_a_failed_write_keeps_the_old_store_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "state.json"
    state = LocalState(path)
    state.pin_key(AGGREGATOR, KEY)
    before = path.read_bytes()

    def disk_full(descriptor):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space"):
        state.pin_key("http://other.example", KEY)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_the_rename_is_made_durable_by_syncing_the_folder(tmp_path, monkeypatch):
    """After the rename, the folder itself is fsynced, or a power cut could bring the old store
    back (and with it surveys this device would randomize again)."""
    synced = []
    real_fsync = os.fsync

    def recording_fsync(descriptor):
        synced.append(stat.S_ISDIR(os.fstat(descriptor).st_mode))
        real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    LocalState(tmp_path / "state.json").pin_key(AGGREGATOR, KEY)
    assert synced == [False, True]  # the temporary file, then the folder
