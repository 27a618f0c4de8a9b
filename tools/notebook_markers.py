"""Move nbval's comment markers into cell tags, so a learner sees no test markers in the code.

``# NBVAL_CHECK_OUTPUT`` -> the cell tag ``nbval-check-output`` (nbval reads tags as it reads
comments); ``# NBVAL_IGNORE_OUTPUT`` is dropped: under ``--nbval-lax`` (how the suite runs) only
checked cells are compared, so it did nothing. Idempotent.

Usage: python tools/notebook_markers.py notebooks/*.ipynb
"""

from __future__ import annotations

import json
import sys

TAGS = {"# NBVAL_CHECK_OUTPUT": "nbval-check-output", "# NBVAL_SKIP": "nbval-skip",
        "# NBVAL_RAISES_EXCEPTION": "raises-exception"}
DROP = {"# NBVAL_IGNORE_OUTPUT"}


def convert(path: str) -> int:
    with open(path, encoding="utf-8") as f:
        nb = json.load(f)
    changed = 0
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        lines = cell["source"] if isinstance(cell["source"], list) else cell["source"].splitlines(keepends=True)
        keep = []
        for line in lines:
            marker = line.strip()
            if marker in TAGS:
                tags = cell.setdefault("metadata", {}).setdefault("tags", [])
                if TAGS[marker] not in tags:
                    tags.append(TAGS[marker])
                changed += 1
            elif marker in DROP:
                changed += 1
            else:
                keep.append(line)
        cell["source"] = keep
    with open(path, "w", encoding="utf-8") as f:
        json.dump(nb, f, indent=1, ensure_ascii=False)
        f.write("\n")
    return changed


if __name__ == "__main__":
    for p in sys.argv[1:]:
        print(p, convert(p))
