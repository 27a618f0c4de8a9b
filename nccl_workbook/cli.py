"""``nccl-workbook``: the workbook without a notebook.

Subcommands::

    nccl-workbook scenarios                         # ids with a one-line symptom
    nccl-workbook run ID [--variant NAME|all] [--world-size N] [--timeout S] [--out DIR] [--json]
    nccl-workbook check [--world-size N] [--sweep]  # health check (+ bandwidth sweep) of a local cluster
    nccl-workbook stacks [--native]                 # py-spy stacks of every local engine, e.g. during a hang
    nccl-workbook lab [--no-browser] [--port N]     # JupyterLab on the workbook's notebooks
    nccl-workbook triage [FILE|-] [--json]          # read a failed job's log
    nccl-workbook doctor [--json]                   # check settings for known-bad/no-op values
    nccl-workbook watch [--out DIR] [--json PATH] -- torchrun ... train.py   # watch your own job live
    nccl-workbook attach [--pid PID] [--json]       # a job hung right now: every rank's stack, the odd ones out
    nccl-workbook lint PATH... [--json]             # hang hazards in training scripts, before they run

``run`` uses the same :func:`nccl_workbook.runner.run_scenario` as the notebooks, so both give the
same answers. Bad input exits with status 2 and a one-line message naming what is valid; a run
whose broken variant times out is a result (exit 0), not an error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

__all__ = ["main", "build_parser", "max_local_ranks"]

#: rough resident size of one engine with torch imported (measured ~300 MiB; keep headroom)
_ENGINE_MIB = 450


def max_local_ranks() -> int:
    """How many ranks this machine can hold as local engines: by memory, and at most 4 per core."""
    try:
        import psutil

        by_mem = int(psutil.virtual_memory().available / (_ENGINE_MIB * 2**20))
    except Exception:  # noqa: BLE001
        by_mem = 8
    return max(2, min(by_mem, 4 * (os.cpu_count() or 1)))


def _fail(msg: str) -> int:
    print(f"nccl-workbook: error: {msg}", file=sys.stderr)
    return 2


def _cmd_scenarios(args: argparse.Namespace) -> int:
    from nccl_workbook.scenarios import SCENARIOS

    if args.json:
        print(json.dumps([
            {"id": s.id, "symptom": s.symptom, "seed": s.seed, "variants": s.variant_names, "notebook": s.notebook}
            for s in SCENARIOS.values()
        ], indent=2))
        return 0
    width = max(len(s) for s in SCENARIOS)
    for s in SCENARIOS.values():
        print(f"{s.id:<{width}}  {s.symptom}")
        print(f"{'':<{width}}  variants: {', '.join(s.variant_names)}   notebook: notebooks/{s.notebook}")
    return 0


def _progress_printer(label: str, enabled: bool):  # noqa: ANN202
    """On a terminal: one line updated in place every second. Elsewhere (CI logs, pipes): a line
    every 5 s, so long runs still show they are alive without flooding the log."""
    tty = sys.stderr.isatty()
    every = 1.0 if tty else 5.0
    last = [0.0]

    def show(elapsed: float, done: int, total: int) -> None:
        if not enabled or done == total or elapsed - last[0] < every:
            if enabled and done == total and tty:
                print("\r\033[K", end="", file=sys.stderr, flush=True)
            return
        last[0] = elapsed
        text = f"  {label}: {elapsed:5.1f} s, {done}/{total} ranks finished"
        print(f"\r{text}" if tty else text, end="" if tty else "\n", file=sys.stderr, flush=True)

    return show


def _cmd_run(args: argparse.Namespace) -> int:
    from nccl_workbook.cluster import ClusterError, RankCluster
    from nccl_workbook.runner import resolve_variants, validate_run_args
    from nccl_workbook.scenarios import get_scenario

    # validate everything before starting a cluster (that takes ~10 s)
    try:
        scenario = get_scenario(args.scenario)
        variants = resolve_variants(scenario.id, args.variant)
        validate_run_args(args.world_size, args.timeout, max_local_ranks())
    except (KeyError, ValueError) as e:
        return _fail(str(e.args[0] if e.args else e))
    out = Path(args.out) if args.out else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    show = not args.quiet
    t0 = time.perf_counter()
    if show:
        print(f"starting a local {args.world_size}-rank cluster (gloo on CPU)…", file=sys.stderr, flush=True)
    results = []
    try:
        with RankCluster.start_or_attach(args.world_size, backend=args.backend) as cluster:
            if show:
                print(f"  cluster ready in {cluster.start_s:.1f} s", file=sys.stderr, flush=True)
            from nccl_workbook.runner import run_scenario

            for v in variants:
                r = run_scenario(cluster, scenario.id, v, world_size=args.world_size, timeout_s=args.timeout,
                                 progress=_progress_printer(f"{scenario.id} [{v}]", show))
                results.append(r)
                if show:
                    print(f"  -> {r.summary_line()}", file=sys.stderr, flush=True)
    except ClusterError as e:
        return _fail(str(e))
    if out is not None:
        _write_outputs(out, results)
    if args.json:
        print(json.dumps([r.to_json() for r in results], indent=2))
    else:
        _print_summary(results)
    if show:
        print(f"done in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return 0


def _print_summary(results: list) -> None:  # noqa: ANN001
    from nccl_workbook.render import results_text

    print(results_text(results))


def _write_outputs(out: Path, results: list) -> None:  # noqa: ANN001
    from nccl_workbook import plots
    from nccl_workbook.runner import combined_trace

    df = combined_trace(results)
    scenario = results[0].scenario
    df.to_csv(out / f"{scenario}-trace.csv", index=False)
    (out / f"{scenario}-results.json").write_text(json.dumps([r.to_json() for r in results], indent=2))
    timeouts = {r.variant: r.pg_timeout_s for r in results}
    plots.timeline(df, timeouts_s=timeouts, title=scenario).savefig(out / f"{scenario}-timeline.png", dpi=100)
    plots.step_and_collective_times(df, title=scenario).savefig(out / f"{scenario}-times.png", dpi=100)
    print(f"wrote trace, results and plots to {out}/", file=sys.stderr)


def _cmd_check(args: argparse.Namespace) -> int:
    from nccl_workbook import health
    from nccl_workbook.cluster import ClusterError, RankCluster
    from nccl_workbook.runner import validate_run_args

    try:
        validate_run_args(args.world_size, None, max_local_ranks())
        sizes = health.default_sizes(args.max_size)
        if not sizes:
            raise ValueError(f"--max-size must be at least 4 bytes, got {args.max_size}")
    except ValueError as e:
        return _fail(str(e))
    out: dict[str, object] = {}
    try:
        with RankCluster.start_or_attach(args.world_size, backend=args.backend) as cluster:
            print(f"cluster of {args.world_size} ranks ready in {cluster.start_s:.1f} s", file=sys.stderr, flush=True)
            report = health.check(cluster, timeout_s=args.timeout)
            out["health"] = {"ok": report.ok, "failed_ranks": list(report.failed_ranks), "wall_s": round(report.wall_s, 3),
                             "ranks": report.frame().reset_index().to_dict("records")}
            if not args.json:
                print(report.summary())
                print(report.frame().drop(columns=["error"]).to_string())
            if args.sweep and report.ok:
                print("sweeping message sizes…", file=sys.stderr, flush=True)
                result = health.sweep(cluster, sizes=sizes)
                out["sweep"] = {"host_copy_gbps": result.host_copy_gbps, "rows": result.frame.to_dict("records")}
                if not args.json:
                    print(f"\nhost memory copy: {result.host_copy_gbps:.2f} GB/s ({result.backend}, {result.world_size} ranks)")
                    for op, g in result.frame.groupby("op", sort=False):
                        print(f"\n{op}\n{'bytes':>10} {'time(us)':>11} {'algbw(GB/s)':>12} {'busbw(GB/s)':>12}")
                        for _, r in g.iterrows():
                            print(f"{int(r['bytes']):>10} {r['time_us']:>11.1f} {r['algbw_gbps']:>12.4f} {r['busbw_gbps']:>12.4f}")
    except (ClusterError, RuntimeError) as e:
        return _fail(str(e))
    if args.json:
        print(json.dumps(out, indent=2, default=str))
    return 0 if out["health"]["ok"] else 1  # type: ignore[index]


def _cmd_stacks(args: argparse.Namespace) -> int:
    """Every local engine's stack, from outside (py-spy): use it from a second terminal while a
    notebook's run seems stuck."""
    from concurrent.futures import ThreadPoolExecutor

    from nccl_workbook._state import local_engine_pids, py_spy_dump

    clusters = local_engine_pids()
    if not clusters:
        print("no workbook engines are running on this host", file=sys.stderr)
        return 1
    for cid, pids in clusters.items():
        print(f"== cluster {cid}: engine pids {pids}")
        with ThreadPoolExecutor(max_workers=len(pids)) as pool:
            dumps = list(pool.map(lambda pid: py_spy_dump(pid, native=args.native), pids))
        for pid, text in zip(pids, dumps):
            print(f"-- pid {pid}\n{text.rstrip()}\n")
    return 0


def _cmd_lab(args: argparse.Namespace) -> int:
    notebooks = Path(args.notebook_dir) if args.notebook_dir else _notebooks_dir()
    if notebooks is None or not notebooks.is_dir():
        return _fail("cannot find the notebooks/ folder; pass --notebook-dir")
    cmd = [sys.executable, "-m", "jupyterlab", f"--notebook-dir={notebooks}", f"--ServerApp.ip={args.ip}"]
    if args.port:
        cmd.append(f"--ServerApp.port={args.port}")
    if args.no_browser:
        cmd.append("--no-browser")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")  # containers and CI run as root; Jupyter refuses that without it
    cmd.append(f"--LabApp.app_settings_dir={_lab_settings_dir()}")
    _trust_notebooks(notebooks)
    print(" ".join(cmd), file=sys.stderr, flush=True)
    os.execv(sys.executable, cmd)
    return 0  # pragma: no cover


#: JupyterLab defaults for the workbook: no news pop-up over the first notebook, no update check
LAB_OVERRIDES = {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False}}


def _lab_settings_dir() -> Path:
    """The workbook's JupyterLab app settings folder: the environment's own ``overrides.json`` and
    ``page_config.json`` (if any) with :data:`LAB_OVERRIDES` on top. A person's own settings in
    JupyterLab's Settings editor still win over these defaults."""
    from jupyterlab.commands import get_app_dir

    from nccl_workbook._state import state_dir

    default = Path(get_app_dir()) / "settings"
    target = state_dir() / "jupyterlab-settings"
    target.mkdir(parents=True, exist_ok=True)
    overrides: dict[str, dict[str, object]] = {}
    try:
        overrides = json.loads((default / "overrides.json").read_text())
    except (OSError, ValueError):
        pass
    for plugin, values in LAB_OVERRIDES.items():
        overrides.setdefault(plugin, {}).update(values)
    (target / "overrides.json").write_text(json.dumps(overrides, indent=1))
    if (default / "page_config.json").is_file():
        (target / "page_config.json").write_text((default / "page_config.json").read_text())
    return target


def _trust_notebooks(folder: Path) -> None:
    """``jupyter trust`` the shipped notebooks (their stored outputs are the workbook's own), so
    JupyterLab does not log "notebook is not trusted" for each one it opens."""
    import nbformat
    from nbformat.sign import NotebookNotary

    notary = NotebookNotary()
    for path in sorted(folder.glob("*.ipynb")):
        try:
            nb = nbformat.read(path, as_version=4)
            if not notary.check_signature(nb):
                notary.sign(nb)
        except Exception as e:  # noqa: BLE001 - an untrusted notebook still opens
            print(f"could not trust {path.name}: {e}", file=sys.stderr)


def _notebooks_dir() -> Path | None:
    for base in (Path.cwd(), Path(__file__).resolve().parent.parent):
        if (base / "notebooks").is_dir():
            return base / "notebooks"
    return None


#: the subcommands other packages add (module, the names it registers): each is imported only when its command
#: runs, or for the full help. ``nccl-workbook lint`` in a pre-commit hook must not pay for pandas (the watch
#: command's observer imports it: 1.1 s of the 1.4 s a one-line file took before)
_PLUGINS = (
    ("nccl_workbook.triage.commands", ("triage", "doctor")),
    ("nccl_workbook.flight.commands", ("fr", "flight-recorder")),
    ("nccl_workbook.watch.command", ("watch",)),
    ("nccl_workbook.attach.commands", ("attach",)),
    ("nccl_workbook.lint.commands", ("lint",)),
)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``nccl-workbook`` parser; given the subcommand about to run, only the package that registers it is
    imported among the plugins (every one otherwise: ``--help``, a misspelt command)."""
    p = argparse.ArgumentParser(prog="nccl-workbook", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser("scenarios", help="list scenario ids with a one-line symptom")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=_cmd_scenarios)

    r = sub.add_parser("run", help="run a scenario's variants on a local cluster")
    r.add_argument("scenario", help="scenario id (see `nccl-workbook scenarios`)")
    r.add_argument("--variant", default="all", help="variant name or 'all' (default)")
    r.add_argument("--world-size", type=int, default=4, help="number of ranks (default 4)")
    r.add_argument("--timeout", type=float, default=None, help="process-group timeout in seconds (default: the scenario's)")
    r.add_argument("--backend", default="gloo", choices=["gloo", "nccl", "auto"], help="default gloo (CPU)")
    r.add_argument("--out", default=None, help="folder for the trace (CSV), results (JSON) and plots (PNG)")
    r.add_argument("--json", action="store_true", help="print a JSON list, one object per variant")
    r.add_argument("--quiet", action="store_true", help="no progress on stderr")
    r.set_defaults(func=_cmd_run)

    c = sub.add_parser("check", help="health check of a local cluster, optionally a bandwidth sweep")
    c.add_argument("--world-size", type=int, default=4)
    c.add_argument("--timeout", type=float, default=5.0, help="group timeout for the check (s)")
    c.add_argument("--sweep", action="store_true", help="also sweep all_reduce/all_gather/reduce_scatter/broadcast sizes")
    c.add_argument("--max-size", type=int, default=64 * 2**20, help="largest message of the sweep in bytes (default 64 MiB)")
    c.add_argument("--backend", default="gloo", choices=["gloo", "nccl", "auto"])
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=_cmd_check)

    st = sub.add_parser("stacks", help="py-spy dump of every local workbook engine (from a second terminal)")
    st.add_argument("--native", action="store_true", help="include C/C++ frames (gloo, NCCL)")
    st.set_defaults(func=_cmd_stacks)

    lab = sub.add_parser("lab", help="open the workbook in JupyterLab")
    lab.add_argument("--no-browser", action="store_true", help="do not open a browser; print the URL")
    lab.add_argument("--port", type=int, default=0)
    lab.add_argument("--ip", default="localhost")
    lab.add_argument("--notebook-dir", default=None)
    lab.set_defaults(func=_cmd_lab)

    import importlib

    wanted = [m for m, names in _PLUGINS if command in names] or [m for m, _names in _PLUGINS]
    for module, _names in _PLUGINS:
        if module in wanted:
            importlib.import_module(module).add_parsers(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv[0] if argv and not argv[0].startswith("-") else None)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:
        # `nccl-workbook lint . | head`: the reader left; say nothing more (Python's documented recipe)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
