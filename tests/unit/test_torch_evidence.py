"""The doctor's evidence, checked on the installed torch and on a made-up installation."""

from __future__ import annotations

from pathlib import Path

from nccl_workbook.torch_evidence import evidence_text, header_aliases, name_in_libraries, name_in_python


def test_installed_torch_reads_no_nccl_timeout_but_reads_the_deprecated_alias() -> None:
    assert not name_in_libraries("NCCL_TIMEOUT") and not name_in_python("NCCL_TIMEOUT")
    assert name_in_libraries("NCCL_BLOCKING_WAIT")
    assert header_aliases()["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "NCCL_ASYNC_ERROR_HANDLING"
    assert "NCCL_TIMEOUT in a torch library: False" in evidence_text()


def test_whole_words_only_and_a_missing_header(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "libx.so").write_bytes(b"\0_DEFAULT_PG_NCCL_TIMEOUT\0NCCL_TIMEOUTS\0")
    assert not name_in_libraries("NCCL_TIMEOUT", tmp_path)  # only inside longer names
    (lib / "liby.so.1").write_bytes(b"x\0NCCL_TIMEOUT\0")
    assert name_in_libraries("NCCL_TIMEOUT", tmp_path)
    (tmp_path / "m.py").write_text("os.environ.get('NCCL_TIMEOUT')\n")
    assert name_in_python("NCCL_TIMEOUT", tmp_path)
    assert header_aliases(root=tmp_path) == {"TORCH_NCCL_BLOCKING_WAIT": None, "TORCH_NCCL_ASYNC_ERROR_HANDLING": None}
    assert "header checks skipped" in evidence_text(tmp_path)
