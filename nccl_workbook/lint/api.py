"""Lint files, folders or source text: the calls behind ``nccl-workbook lint`` and the notebook.

Results are values: a file that does not exist or does not parse is a :class:`LintError` in the
report (the other files are still checked), never an exception.

Usage::

    from nccl_workbook.lint import lint_paths, lint_source
    report = lint_paths(["train.py", "scripts/"])
    print(report.render_text())            # path:line: rule: message / fix / notebook
    report.exit_code                       # 0 clean, 1 findings, 2 bad input
    lint_source("import torch.distributed as dist\\nif dist.get_rank() == 0:\\n    dist.barrier()\\n")
"""

from __future__ import annotations

import ast
import html
import os
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nccl_workbook.lint.checks import CHECKS, RawFinding
from nccl_workbook.lint.rules import RULES, Rule, notebook_for
from nccl_workbook.lint.project import Project
from nccl_workbook.lint.source import EPOCH_SYNC, SourceFacts, dotted

__all__ = ["LintFinding", "LintError", "LintReport", "lint_source", "lint_file", "lint_paths", "python_files"]

#: how many imports deep the local files of a named script are checked with it (run.py imports
#: exp/exp_forecast.py, whose loop calls utils/tools.py's early stopping: OpenLTM; OpenNMT-py's train.py ->
#: onmt/bin/train.py -> onmt/train_single.py -> onmt/trainer.py, where the loop is)
IMPORT_DEPTH = 3
#: Python 3.12's type parameters (`class C[T: Base]:`, `def f[T](x: T):`, `type Alias[T] = ...`), which an older
#: Python's parser rejects
_NEWER_SYNTAX = re.compile(r"^[ \t]*(?:(?:async[ \t]+)?def|class)[ \t]+\w+[ \t]*\["
                           r"|^[ \t]*type[ \t]+\w+[ \t]*(?:\[[^\]]*\])?[ \t]*=", re.M)
#: folders never entered when a folder is linted
_SKIP_DIRS = frozenset({".git", ".hg", ".venv", "venv", "env", "__pycache__", "node_modules", ".tox", ".mypy_cache",
                        "site-packages", "build", "dist", ".ipynb_checkpoints"})


@dataclass(frozen=True)
class LintFinding:
    """One hazard: where, which rule, why it can hang, the fix, and the notebook that shows it."""

    path: str
    line: int
    rule: Rule
    message: str
    fix: str
    notebook: str
    #: a note, not a hazard: why it is not counted (a rank-0 save of a model nothing says is large); ``""``
    #: for a hazard
    note: str = field(default="", repr=False)

    def to_json(self) -> dict[str, Any]:
        out = {"path": self.path, "line": self.line, "rule": self.rule.value, "message": self.message,
               "fix": self.fix, "notebook": self.notebook}
        return {**out, "note": self.note} if self.note else out


@dataclass(frozen=True)
class LintError:
    """A path that could not be checked, and why."""

    path: str
    error: str

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "error": self.error}


@dataclass(frozen=True)
class LintReport:
    """Findings and errors of one run, sorted by path and line."""

    findings: tuple[LintFinding, ...] = ()
    errors: tuple[LintError, ...] = ()
    #: places worth a look that are not counted as hazards (see :attr:`LintFinding.note`)
    notes: tuple[LintFinding, ...] = ()

    #: the findings and the notes together, file by file in the order checked (:attr:`with_notes`)
    everything: tuple[LintFinding, ...] = field(default=(), repr=False, compare=False)

    @property
    def with_notes(self) -> tuple[LintFinding, ...]:
        """The findings and the notes together, file by file in the order checked, by line within a file."""
        return self.everything or (*self.findings, *self.notes)
    files_checked: int = 0
    #: of the files checked, those not named but imported by a named file
    files_imported: int = 0

    @property
    def exit_code(self) -> int:
        """2 when a path was bad (whatever else was found), 1 when something was found, 0 when clean."""
        return 2 if self.errors else 1 if self.findings else 0

    def rules(self) -> list[str]:
        """The rule ids found, in order of appearance."""
        return [f.rule.value for f in self.findings]

    def to_json(self) -> dict[str, Any]:
        return {"findings": [f.to_json() for f in self.findings], "errors": [e.to_json() for e in self.errors],
                "notes": [f.to_json() for f in self.notes]}

    def render_text(self) -> str:
        lines: list[str] = []
        for f in self.findings:
            lines.append(f"{f.path}:{f.line}: {f.rule.value}: {f.message}")
            lines.append(f"    fix: {f.fix}")
            if f.notebook:
                lines.append(f"    see: notebooks/{f.notebook}")
        for e in self.errors:
            lines.append(f"{e.path}: error: {e.error}")
        for f in self.notes:
            lines.append(f"{f.path}:{f.line}: note: {f.rule.value}: {f.message}")
        for why in dict.fromkeys(f.note for f in self.notes):
            lines.append(f"    (notes) {why}")
        n = len(self.findings)
        lines.append(f"{n} hazard{'s' if n != 1 else ''} in {self.files_checked} file{'s' if self.files_checked != 1 else ''}"
                     + (f" ({self.files_imported} imported by the files named)" if self.files_imported else "")
                     + (f", {len(self.errors)} not checked" if self.errors else "")
                     + (f"; {len(self.notes)} note{'s' if len(self.notes) != 1 else ''}" if self.notes else ""))
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td><code>{html.escape(f.path)}:{f.line}</code></td><td><code>{f.rule.value}</code></td>"
            f"<td>{html.escape(f.message)}<br><small>fix: {html.escape(f.fix)}</small></td>"
            f"<td>{html.escape(f.notebook)}</td></tr>"
            for f in self.findings)
        errs = "".join(f"<tr><td><code>{html.escape(e.path)}</code></td><td>error</td><td>{html.escape(e.error)}</td>"
                       f"<td></td></tr>" for e in self.errors)
        notes = "".join(
            f"<tr><td><code>{html.escape(f.path)}:{f.line}</code></td><td>note: <code>{f.rule.value}</code></td>"
            f"<td>{html.escape(f.message)}<br><small>{html.escape(f.note)}</small></td><td></td></tr>"
            for f in self.notes)
        rows += notes
        return (f"<p>{len(self.findings)} hazard(s) in {self.files_checked} file(s)"
                f"{f', {len(self.notes)} note(s)' if self.notes else ''}</p>"
                "<table><tr><th>where</th><th>rule</th><th>why / fix</th><th>notebook</th></tr>"
                f"{rows}{errs}</table>")


#: the rules about ranks that wait for one another (not the settings' rules, true of any run)
_BETWEEN_RANKS = (Rule.COLLECTIVE_IN_RANK_BRANCH, Rule.RANK0_LONG_WORK, Rule.UNEVEN_COLLECTIVE_COUNT,
                  Rule.EXCEPTION_ON_ONE_RANK)


def _finish(raw: RawFinding, path: str) -> LintFinding:
    info = RULES[raw.rule]
    scenario = raw.scenario or info.scenario
    # a note says why it is not counted instead of why the rule's pattern hangs
    message = f"{raw.message}." if raw.note else f"{raw.message}: {raw.why or info.why}."
    return LintFinding(path=path, line=raw.line, rule=raw.rule, message=message,
                       fix=raw.fix or info.fix, notebook=notebook_for(scenario), note=raw.note)


def lint_source(text: str, path: str = "<string>", project: Project | None = None, *,
                notes: bool = False) -> list[LintFinding]:
    """The findings in one file's source text. A ``SyntaxError`` propagates (see :func:`lint_file`).
    With a :class:`~nccl_workbook.lint.project.Project`, calls into the project's other files are followed.
    ``notes``: also return the notes (findings whose ``note`` says why they are not counted as hazards)."""
    facts = project.facts(Path(path), text) if project is not None else None
    if facts is None:
        facts = SourceFacts.parse(text, path)
    seen: set[tuple[int, Rule]] = set()
    out: list[LintFinding] = []
    # a file checked as an import of a script: rank-0 work whose waiting is in the script is reported at the
    # call there (``utils.save_model()`` at main.py:443), not twice
    imported_only = project is not None and not project.named(Path(path))
    for check in CHECKS:
        for raw in check(facts):
            if raw.across and imported_only:
                continue
            if raw.rule in (Rule.UNEVEN_COLLECTIVE_COUNT, Rule.EXCEPTION_ON_ONE_RANK) and EPOCH_SYNC in raw.message:
                continue   # a Lightning log reduced once at the epoch's end: not a collective per call
            if raw.rule in _BETWEEN_RANKS and facts.single_process_only(raw.line):
                continue   # code only a run of one process reaches: no other rank waits for it
            if (raw.line, raw.rule) not in seen:
                seen.add((raw.line, raw.rule))
                out.append(_finish(raw, path))
    return sorted((f for f in out if notes or not f.note), key=lambda f: (f.line, f.rule.value))


def lint_file(path: str | os.PathLike[str], project: Project | None = None, *,
              notes: bool = False) -> tuple[list[LintFinding], LintError | None]:
    """One file: its findings (and, with ``notes``, its notes), or the error that kept it from being checked.
    Its local imports are followed (the files beside and above it, see :mod:`nccl_workbook.lint.project`)."""
    project = project if project is not None else Project([Path(path)])
    p = Path(path)
    try:
        text = p.read_bytes().decode("utf-8-sig", errors="replace")   # a BOM is valid Python (StyleGAN2-ADA)
    except OSError as exc:
        return [], LintError(str(path), f"cannot read: {exc.strerror or exc}")
    try:
        return lint_source(text, str(path), project, notes=notes), None
    except SyntaxError as exc:
        newer = _NEWER_SYNTAX.search(text) if sys.version_info < (3, 12) else None
        if newer is not None:
            # Fast-LLM's `class ForwardKLEvaluator[ConfigType: ...]` (blind collection of stop 53) on Python 3.11
            line = text.count("\n", 0, newer.start()) + 1
            return [], LintError(str(path), f"does not parse with this Python ({sys.version_info.major}."
                                            f"{sys.version_info.minor}): line {line} uses the type parameters of "
                                            f"Python 3.12 (PEP 695); run the lint with the Python the project needs")
        return [], LintError(str(path), f"does not parse: {exc.msg} (line {exc.lineno})")
    except (ValueError, RecursionError) as exc:  # null bytes; absurdly deep nesting
        try:
            ast.parse(text)
        except (SyntaxError, ValueError, RecursionError):
            return [], LintError(str(path), f"does not parse: {exc}")
        # the file parses: the lint's own reading of it failed (ms-swift's ring attention, before stop 35)
        return [], LintError(str(path), f"not checked: the lint failed on it ({type(exc).__name__}: {exc}); "
                                        f"please report it with the file")
    except Exception as exc:  # noqa: BLE001 - a bug of the lint must not hide the other files' findings
        return [], LintError(str(path), f"not checked: the lint failed on it ({type(exc).__name__}: {exc}); "
                                        f"please report it with the file")


def python_files(path: Path) -> list[Path]:
    """The ``.py`` files under a folder, sorted, skipping virtual environments and caches."""
    out: list[Path] = []
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        out.extend(Path(root) / name for name in sorted(files) if name.endswith(".py"))
    return out


def _shown(path: Path) -> Path:
    """An imported file's path as the user would type it: relative to the current folder when it is under
    it (as the named files usually are), else absolute."""
    try:
        rel = Path(os.path.relpath(path))
    except ValueError:   # another drive
        return path
    return path if rel.parts[:1] == ("..",) else rel


def _imported_files(project: Project, files: list[Path]) -> list[Path]:
    """The local files the named ones import, not named themselves, :data:`IMPORT_DEPTH` imports deep. Past
    the first level, only those in the named script's own folder or in the package of the file that
    imports them (RT-DETR's ``src/solver/__init__.py`` -> ``det_solver.py``), and the subpackages a module of
    that package imports (prismatic's ``training/materialize.py`` -> ``training/strategies/fsdp.py``, whose
    rank-0 save the base class's barrier follows: blind collection of stop 50; not every subpackage a package's
    ``__init__.py`` names, which brings in whole libraries), not a whole library above an example (physicsnemo's
    ``examples/weather/graphcast``)."""
    seen = {f.resolve() for f in files}
    extra: list[Path] = []
    level = [(f, f.resolve().parent) for f in files]   # (file, the named script's folder)
    for depth in range(IMPORT_DEPTH):
        found: list[tuple[Path, Path]] = []
        for file, home in level:
            facts = project.facts(file)
            here = file.resolve()
            for module in facts.local_modules() if facts is not None else []:
                real = Path(module.path).resolve()
                if real in seen or depth and not (real.is_relative_to(home) or real.parent == here.parent or (
                        here.name != "__init__.py" and real.is_relative_to(here.parent))):
                    continue
                seen.add(real)
                found.append((_shown(real), home))
        extra += [p for p, _ in found]
        level = found
    return extra


#: a decorator that enters a class or function in a registry, to be built from the name a configuration gives
_REGISTERS = re.compile(r"(?i)regist")


def _names_used(node: ast.AST) -> set[str]:
    """The names code refers to: its names, attributes and identifier-like strings (``getattr(self, "evaluate")``,
    a registry's ``"ResNet"``); not what it imports (a package's ``__init__.py`` imports every class it exports)."""
    out: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.Attribute):
            out.add(n.attr)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and len(n.value) < 200:
            # (a dotted path too: `"models.model.Palette"`)
            out.update(w for w in n.value.split(".") if w.isidentifier())
    return out


def _unreached(project: Project, files: list[Path], extra: list[Path]) -> dict[Path, list[tuple[int, int]]]:
    """The lines of the imported files' top-level functions and classes that nothing the named files run refers to:
    torchrec's ``train_pipelines.py``, imported by its DLRM example for ``TrainPipelineSparseDist``, holds a dozen
    other pipelines (held-out round 102: 16 false reports in classes the script never makes). A function or class
    is reached when reached code names it (by name, attribute or string, or under an alias it is imported as); a
    class reached is reached whole (a framework calls its hooks: Lightning's ``training_step``), with its bases.
    The named files are reached whole, and every file's module-level code (it runs on import); and what the run
    configurations name (a Hydra ``_target_``, a trainer class looked up by the name a YAML file gives)."""
    trees = [(p, f.tree) for p in files + extra if (f := project.facts(p)) is not None]
    named = {p.resolve() for p in files}
    alias: dict[str, set[str]] = {}   # `from .x import foo as bar`: `bar` names `foo`
    for _p, tree in trees:
        for n in ast.walk(tree):
            if isinstance(n, ast.ImportFrom):
                for a in n.names:
                    if a.asname and a.asname != a.name:
                        alias.setdefault(a.asname, set()).add(a.name)
    # a module named by a string (Palette's `init_obj(opt, default_file_name='models.model')`, a Hydra `_target_`)
    # is imported at run time and its contents looked up by names only the run knows: reached whole
    dotted_names = {n.value for p, tree in trees if p.resolve() in named for n in ast.walk(tree)
                    if isinstance(n, ast.Constant) and isinstance(n.value, str) and "." in n.value
                    and all(w.isidentifier() for w in n.value.split("."))}
    dotted_names |= {t for p in files for t in project.config_targets(p)}
    tails = {tuple(x.split("."))[-k:] for x in dotted_names for k in (2, 3)} | {
        tuple(x.split("."))[:-1][-k:] for x in dotted_names for k in (2, 3)}

    def named_by_string(path: Path) -> bool:
        parts = path.with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        return any(parts[-k:] in tails for k in (2, 3) if len(parts) >= k)

    def with_aliases(names: set[str]) -> set[str]:
        # `from tools import pretrain_run_net as pretrain`, where tools/__init__.py has `from .runner_pretrain import
        # run_net as pretrain_run_net` (Point-MAE): a chain of aliases
        out, todo = set(names), [a for a in names if a in alias]
        while todo:
            for n in alias[todo.pop()] - out:
                out.add(n)
                if n in alias:
                    todo.append(n)
        return out

    used: set[str] = set()
    for p in files:
        used |= project.config_words(p)
    units: list[tuple[Path, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef]] = []   # not reached yet
    for p, tree in trees:
        whole = p.resolve() in named or named_by_string(p)
        for stmt in tree.body:
            if isinstance(stmt, (ast.Import, ast.ImportFrom)) or isinstance(stmt, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "__all__" for t in stmt.targets):
                continue   # (what a module imports or exports is not what it runs)
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not whole and not any(
                    _REGISTERS.search(dotted(d.func if isinstance(d, ast.Call) else d)) for d in stmt.decorator_list):
                units.append((p, stmt))   # (a class a registry keeps, `@MODELS.register_module()`, is built by name)
            else:
                used |= _names_used(stmt)
    while True:   # until no unit is newly reached by what the reached ones name
        names = with_aliases(used)
        now = [u for u in units if u[1].name in names]
        if not now:
            break
        for _p, stmt in now:
            used |= _names_used(stmt)
        units = [u for u in units if u[1].name not in names]
    out: dict[Path, list[tuple[int, int]]] = {}
    for p, stmt in units:
        start = min([stmt.lineno] + [d.lineno for d in stmt.decorator_list])
        out.setdefault(p.resolve(), []).append((start, stmt.end_lineno or stmt.lineno))
    return out


def lint_paths(paths: Iterable[str | os.PathLike[str]], *, imports: bool = True) -> LintReport:
    """Files and folders (their ``.py`` files) -> one report. Missing paths and files that do not parse
    are reported as errors; every other file is still checked.

    ``imports``: also report the hazards of the local files the named files import (``engine.py``,
    ``utils.py`` beside or above a script, not installed packages), and the files those import inside the
    script's folder or their own package (see :func:`_imported_files`): a script's training loop or
    checkpoint helper often lives there. With ``imports=False`` they are read for their functions only
    (a pre-commit hook that checks the changed files alone)."""
    findings: list[LintFinding] = []
    errors: list[LintError] = []
    checked = 0
    files: list[Path] = []
    for raw_path in paths:
        p = Path(raw_path)
        if p.is_dir():
            files.extend(python_files(p))
        elif p.exists():
            files.append(p)
        else:
            errors.append(LintError(str(raw_path), "no such file or folder"))
    # one project: a call from one file into another is followed, and so is what follows a call
    project = Project(files)
    extra = _imported_files(project, files) if imports else []
    project.include(extra)
    unreached = _unreached(project, files, extra) if extra else {}
    for file in files + extra:
        found, error = lint_file(file, project, notes=True)
        if error is not None:
            errors.append(error)
        else:
            checked += 1
            # in an imported file, only what the named files can run (see :func:`_unreached`)
            spans = unreached.get(file.resolve(), [])
            findings.extend(f for f in found if not any(a <= f.line <= b for a, b in spans))
    return LintReport(findings=tuple(f for f in findings if not f.note), errors=tuple(errors), files_checked=checked,
                      files_imported=len(extra), notes=tuple(f for f in findings if f.note), everything=tuple(findings))
