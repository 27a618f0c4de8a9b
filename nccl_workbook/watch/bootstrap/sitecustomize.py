"""Put first on ``PYTHONPATH`` by ``nccl-workbook watch``: starts the workbook's agent in the rank
processes of the watched job (nothing in any other process), then runs the ``sitecustomize`` that
this one hides, if there is one, so the user's environment behaves as before."""

import importlib.util
import os
import sys


def _chain() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        if not entry or os.path.abspath(entry) == here:
            continue
        candidate = os.path.join(entry, "sitecustomize.py")
        if os.path.isfile(candidate):
            spec = importlib.util.spec_from_file_location("_nccl_workbook_chained_sitecustomize", candidate)
            if spec is not None and spec.loader is not None:
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
            return


try:
    _chain()
except Exception as e:  # noqa: BLE001 - the user's own sitecustomize failing is theirs to see
    print(f"nccl-workbook watch: your sitecustomize raised {type(e).__name__}: {e}", file=sys.stderr)

if os.environ.get("NCCL_WORKBOOK_WATCH") and os.environ.get("RANK") is not None:
    try:
        from nccl_workbook.watch.agent import activate

        activate()
    except Exception:  # noqa: BLE001 - watching is optional, the job is not
        pass
