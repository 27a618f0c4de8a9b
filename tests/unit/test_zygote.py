"""The fork server's small parts that need no server (the server itself: tests/dist/test_fork_engines.py)."""

from __future__ import annotations

import os
import tempfile
import time

import pytest

from nccl_workbook import _zygote


@pytest.fixture()
def tmp_tempdir(tmp_path, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN001, ANN201
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_no_server_means_no_fork(tmp_tempdir) -> None:  # noqa: ANN001
    assert _zygote.request_fork("nwb-none", argv=[], env={}, cwd="/", output="/dev/null") is None
    # a stale socket file of a server that is gone is the same
    _zygote._private_dir(_zygote.zygote_dir("nwb-stale"))
    open(_zygote.socket_path("nwb-stale"), "w").close()
    assert _zygote.request_fork("nwb-stale", argv=[], env={}, cwd="/", output="/dev/null") is None


def test_socket_path_is_short_and_private(tmp_tempdir) -> None:  # noqa: ANN001
    cid = "nwb-4242424-abcdef"
    assert _zygote.socket_path(cid).startswith(str(tmp_tempdir))
    assert len(_zygote.socket_path(cid)) - len(str(tmp_tempdir)) < 60
    _zygote._private_dir(_zygote.zygote_dir(cid))
    assert os.stat(os.path.dirname(_zygote.zygote_dir(cid))).st_mode & 0o777 == 0o700


def test_a_shared_parent_folder_is_refused(tmp_tempdir) -> None:  # noqa: ANN001
    parent = os.path.dirname(_zygote.zygote_dir("x"))
    os.makedirs(parent)
    os.chmod(parent, 0o777)
    with pytest.raises(PermissionError, match="only this user"):
        _zygote._private_dir(_zygote.zygote_dir("x"))


def test_exit_codes_are_read_once_and_missing_ones_time_out(tmp_tempdir) -> None:  # noqa: ANN001
    folder = _zygote.zygote_dir("nwb-exit")
    _zygote._private_dir(folder)
    with open(os.path.join(folder, "123.exit"), "w") as f:
        f.write("-6")
    assert _zygote.read_exit_code("nwb-exit", 123) == -6
    assert not os.path.exists(os.path.join(folder, "123.exit"))
    t0 = time.monotonic()
    assert _zygote.read_exit_code("nwb-exit", 123, wait_s=0.2) is None
    assert 0.15 < time.monotonic() - t0 < 2


def test_the_server_command_needs_one_argument(capsys: pytest.CaptureFixture[str]) -> None:
    assert _zygote.main([]) == 2
    assert "Usage" in capsys.readouterr().err
