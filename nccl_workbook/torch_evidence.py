"""The evidence behind the doctor's claims, read from the torch that is installed here.

:mod:`nccl_workbook.doctor` says that ``NCCL_TIMEOUT`` is read by nobody and that
``NCCL_BLOCKING_WAIT``/``NCCL_ASYNC_ERROR_HANDLING`` are deprecated aliases still honoured. This
module checks those statements against torch's own files, so a reader (notebook 10) sees them
proved on their machine rather than asserted:

- :func:`header_aliases`: the older name each ``TORCH_NCCL_*`` variable is also read as, from
  ``ProcessGroupNCCL.hpp``'s lists of names;
- :func:`name_in_libraries`: whether a variable's name occurs, as a whole word, in torch's shared
  libraries (``getenv`` needs the string somewhere; ``_DEFAULT_PG_NCCL_TIMEOUT`` does not count);
- :func:`name_in_python`: the same for torch's Python files;
- :func:`evidence_text`: all of it in a few lines.

Limits: it reads files, it does not trace ``getenv`` calls; a name built at run time from parts
would be missed (torch builds none of these). The headers ship with the wheel
(``torch/include``); where they do not, the header checks say so.
"""

from __future__ import annotations

import mmap
import re
from pathlib import Path

__all__ = ["torch_root", "header_aliases", "name_in_libraries", "name_in_python", "evidence_text"]

_WORD = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_C10D = "include/torch/csrc/distributed/c10d"


def torch_root() -> Path:
    import torch

    return Path(torch.__file__).parent


def header_aliases(names: tuple[str, ...] = ("TORCH_NCCL_BLOCKING_WAIT", "TORCH_NCCL_ASYNC_ERROR_HANDLING"),
                   root: Path | None = None) -> dict[str, str | None]:
    """``TORCH_NCCL_X`` -> the other name ``ProcessGroupNCCL.hpp`` lists for it (None: not listed)."""
    header = _read(root, "ProcessGroupNCCL.hpp")
    out: dict[str, str | None] = {}
    for name in names:
        start = header.find(f"static std::vector<std::string> {name} = {{")
        if start < 0:
            out[name] = None
            continue
        block = header[start: header.index("}", start)]
        parts = [p.strip().strip('"') for p in block.split("{", 1)[1].split(",")]
        out[name] = parts[1] if len(parts) > 1 and parts[1] else None
    return out


def _read(root: Path | None, header: str) -> str:
    try:
        return ((root or torch_root()) / _C10D / header).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _occurs(needle: bytes, path: Path) -> bool:
    """``needle`` as a whole upper-case word in a binary file (not inside a longer name)."""
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            i = m.find(needle)
            while i != -1:
                end = i + len(needle)
                if (i == 0 or m[i - 1] not in _WORD) and (end == len(m) or m[end] not in _WORD):
                    return True
                i = m.find(needle, i + 1)
    except (OSError, ValueError):  # ValueError: an empty file cannot be mapped
        return False
    return False


def name_in_libraries(name: str, root: Path | None = None) -> bool:
    """Whether ``name`` occurs as a whole word in any of torch's shared libraries."""
    libs = sorted(((root or torch_root()) / "lib").glob("*.so*"))
    return any(_occurs(name.encode(), p) for p in libs)


def name_in_python(name: str, root: Path | None = None) -> bool:
    """Whether ``name`` occurs as a whole word in any of torch's Python files."""
    word = re.compile(rf"(?<![A-Z_]){re.escape(name)}(?![A-Z_])")
    return any(word.search(p.read_text(errors="ignore")) for p in (root or torch_root()).rglob("*.py"))


def evidence_text(root: Path | None = None) -> str:
    """The checks notebook 10 shows, one per line."""
    lines = []
    aliases = header_aliases(root=root)
    if not _read(root, "ProcessGroupNCCL.hpp"):
        lines.append("ProcessGroupNCCL.hpp is not installed with this torch: header checks skipped")
    else:
        lines += [f"{name} is also read as: {alias}" for name, alias in aliases.items()]
        header = _read(root, "ProcessGroupNCCL.hpp")
        lines.append("NCCL's built-in default timeout in the header is 10 min: "
                     f"{'std::chrono::milliseconds(10 * 60 * 1000)' in header}")
        lines.append(f"'getCvar' warns on deprecated names: {'is deprecated; use' in _read(root, 'Utils.hpp')}")
    lines.append(f"NCCL_BLOCKING_WAIT in a torch library: {name_in_libraries('NCCL_BLOCKING_WAIT', root)}")
    lines.append(f"NCCL_TIMEOUT in a torch library: {name_in_libraries('NCCL_TIMEOUT', root)}")
    lines.append(f"NCCL_TIMEOUT in a torch Python file: {name_in_python('NCCL_TIMEOUT', root)}")
    return "\n".join(lines)
