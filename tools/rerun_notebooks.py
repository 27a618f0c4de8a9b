"""Re-execute notebooks in place (to refresh their stored outputs) on one shared 4-rank cluster, as
the test suite runs them: ``python tools/rerun_notebooks.py notebooks/*.ipynb``."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("NCCL_WORKBOOK_HOME", tempfile.mkdtemp(prefix="nccl-workbook-rerun-"))
os.environ.setdefault("MPLBACKEND", "Agg")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nbbuild import rerun  # noqa: E402

from nccl_workbook.cluster import SHARED_ENV, RankCluster  # noqa: E402

if __name__ == "__main__":
    cluster = RankCluster(n_ranks=4).start()
    os.environ[SHARED_ENV] = cluster.share_spec
    try:
        for p in sys.argv[1:]:
            t0 = time.perf_counter()
            rerun(Path(p))
            print(f"{p}: {time.perf_counter() - t0:.0f} s", flush=True)
    finally:
        cluster.stop()
