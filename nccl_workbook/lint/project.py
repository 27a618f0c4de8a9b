"""The other files of the user's project, so that a call into them is followed like a call in the file.

A training script rarely holds its whole loop: ``from engine import train_one_epoch, evaluate``,
``utils.save_on_master(...)``, ``from open_clip_train.train import evaluate``. :class:`Project` finds
the file a local import names (among the files being linted first, then beside and above the importing
file on disk), parses it once, and hands its :class:`~nccl_workbook.lint.source.SourceFacts` to the
file that imports it. Their own findings are reported when they were named on the command line, or
imported by a file that was (``lint_paths(..., imports=True)``, the command's default: the loop of a
script's job is often in ``engine.py``); otherwise they are read for their functions only.

Installed packages are never read (``torch``, ``accelerate``, anything under ``site-packages``): what
a library does is known by name in :mod:`nccl_workbook.lint.source`, and reading it would be slow.

Usage::

    project = Project([Path("train.py")])
    facts = project.facts(Path("train.py"))     # its imports resolve through the project
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Callable
from pathlib import Path

from nccl_workbook.lint.source import SourceFacts, subtree

__all__ = ["Project"]

#: a file bigger than this is not read for context (generated code, vendored data)
MAX_CONTEXT_BYTES = 2_000_000
#: how many folders above the importing file a top-level import is looked for (a script in
#: ``src/pkg/train.py`` importing ``pkg.utils``)
LEVELS_UP = 5
_NEVER = ("site-packages", "dist-packages")
#: folders where a checkout keeps other projects it installs from source (``pip install -e modules/X``, a git
#: submodule): Tora's ``modules/SwissArmyTransformer``, whose ``sat`` package its ``sat/train_video.py`` imports
_VENDORED = frozenset({"modules", "third_party", "thirdparty", "third-party", "3rdparty", "external", "externals",
                       "extern", "vendor", "vendored", "deps", "submodules", "libs", "lib", "packages"})
#: the files that make a folder an installable project
_INSTALLABLE = ("setup.py", "pyproject.toml", "setup.cfg")
#: top-level names of the standard library and of the libraries training scripts import: an absolute import of one
#: is that library, never a file of the project that shares its name (Megatron's
#: ``dist_checkpointing/strategies/torch.py`` is not what ``import torch`` beside it means)
_LIBRARIES = frozenset(sys.stdlib_module_names) | {
    "torch", "torchvision", "torchaudio", "numpy", "scipy", "pandas", "transformers", "accelerate", "deepspeed",
    "lightning", "pytorch_lightning", "datasets", "tokenizers", "peft", "trl", "timm", "einops", "wandb", "tqdm",
    "yaml", "omegaconf", "hydra", "PIL", "cv2", "sklearn", "safetensors", "huggingface_hub", "triton", "apex",
    "fairscale", "jax", "tensorflow", "mpi4py", "ray", "vllm", "xformers", "flash_attn"}


#: folders of a project's run configurations (Hydra's, OmegaConf's), looked for beside and above a script
_CONFIG_DIRS = ("configs", "config", "conf", "cfg", "cfgs")
#: a class or function a configuration names for ``hydra.utils.instantiate`` (``_target_:``) or for the latent-diffusion
#: family's ``instantiate_from_config`` (``target:``)
_TARGET = re.compile(r"^\s*-?\s*_?target_?\s*:\s*['\"]?([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)['\"]?\s*(?:#.*)?$", re.M)
#: a name in a configuration's text
_WORD = re.compile(r"[A-Za-z_]\w*")
#: at most this many configuration files are read per script, each at most this many bytes
MAX_CONFIG_FILES = 400
MAX_CONFIG_BYTES = 256_000
#: the launch mode an ``accelerate config`` file sets (YAML, or the JSON that ``accelerate config`` can write too)
_DISTRIBUTED_TYPE = re.compile(r"""^\s*["']?distributed_type["']?\s*:\s*["']?([A-Z_]+)""", re.M)
#: the ZeRO stage a DeepSpeed launch configuration sets, in the accelerate file or the DeepSpeed file it names
_ZERO_STAGE = re.compile(r"""^\s*["']?(?:zero_)?stage["']?\s*:\s*["']?(\d)""", re.M)
_DEEPSPEED_FILE = re.compile(r"""^\s*["']?deepspeed_config_file["']?\s*:\s*["']?([^"'\s#]+)""", re.M)


def _zero_stage(path: Path, text: str) -> int | None:
    """The ZeRO stage of an accelerate DeepSpeed configuration: its ``zero_stage:``, or the ``stage`` of the DeepSpeed
    file its ``deepspeed_config_file:`` names (relative to the folder ``accelerate launch`` runs in: looked for from
    the configuration's folder up); None when neither can be read."""
    own = _ZERO_STAGE.search(text)
    if own is not None:
        return int(own.group(1))
    named = _DEEPSPEED_FILE.search(text)
    if named is None:
        return None
    for folder in [path.parent, *path.parent.parents][:LEVELS_UP + 2]:
        other = folder / named.group(1)
        try:
            if other.is_file() and other.stat().st_size <= MAX_CONFIG_BYTES:
                stage = _ZERO_STAGE.search(other.read_text(errors="replace"))
                return int(stage.group(1)) if stage is not None else None
        except OSError:
            continue
    return None


class Project:
    """Parsed files by path, and module names resolved to them (see the module docstring)."""

    def __init__(self, files: list[Path]) -> None:
        self._given = [f.resolve() for f in files]
        self._named = set(self._given)
        self._facts: dict[Path, SourceFacts | None] = {}
        self._module_cache: dict[tuple[str, Path], Path | None] = {}
        #: module() by its arguments: Megatron-LM's 395 files ask it 425,000 times, and building the key of
        #: ``_module_cache`` (a resolved folder) then looking the file's facts up again took a third of its lint
        self._module_facts: dict[tuple[str, Path, int], SourceFacts | None] = {}
        #: bumped whenever the files given change (what an import resolves to may change with them)
        self.generation = 0
        self._resolved: dict[Path, Path] = {}   # a path as asked -> resolved, once (resolve() stats every part)
        self._callers: dict[tuple[int, str], list[tuple[SourceFacts, ast.stmt]]] = {}
        self._calls_into: dict[int, list[tuple[SourceFacts, ast.Call, str]]] = {}
        self._imports_index: dict[int, list[tuple[SourceFacts, str, str, SourceFacts | None,
                                                  SourceFacts | None]]] | None = None
        self._resolved_imports: list[tuple[SourceFacts, str, str, SourceFacts | None, SourceFacts | None]] | None = None
        self._parents: dict[Path, Path] = {}
        self._additions: dict[Path, list[Path]] = {}
        self._class_index: tuple[int, dict[str, list[SourceFacts]]] | None = None
        self._targets: dict[Path, list[str]] = {}
        self._config_text: dict[tuple[Path, tuple[str, ...]], list[str]] = {}
        self._accelerate: dict[Path, tuple[tuple[str, str, int | None], ...]] = {}
        self._given_index: tuple[int, dict[str, list[Path]]] | None = None
        self._vendored: dict[Path, list[Path]] = {}

    def facts(self, path: Path, text: str | None = None) -> SourceFacts | None:
        """The facts of one file, parsed once (None when it cannot be read or parsed). A ``SyntaxError``
        of a file read with ``text`` given propagates, as :meth:`SourceFacts.parse` does."""
        key = self._resolved.get(path)
        if key is None:
            key = self._resolved[path] = path.resolve()
        if key in self._facts:
            return self._facts[key]
        if text is not None:
            facts = SourceFacts.parse(text, str(path))
        else:
            try:
                if key.stat().st_size > MAX_CONTEXT_BYTES:
                    facts = None
                else:
                    facts = SourceFacts.parse(key.read_bytes().decode("utf-8-sig", errors="replace"), str(path))
            except (OSError, SyntaxError, ValueError, RecursionError):
                facts = None
        if facts is not None:
            facts.project = self
        self._facts[key] = facts
        return facts

    def _config_texts(self, script: Path, suffixes: tuple[str, ...] = (".yaml", ".yml")) -> list[str]:
        """The texts of the run configurations of the script's project (the files of these suffixes in the
        configuration folders beside the script and up to :data:`LEVELS_UP` folders above it; at most
        :data:`MAX_CONFIG_FILES`, each at most :data:`MAX_CONFIG_BYTES`), read once per folder."""
        key = (script.resolve().parent, suffixes)
        if key in self._config_text:
            return self._config_text[key]
        files: list[Path] = []
        for folder in [key[0], *key[0].parents][:LEVELS_UP + 1]:
            for name in _CONFIG_DIRS:
                where = folder / name
                if where.is_dir() and not any(p in _NEVER for p in where.parts):
                    files += sorted(p for p in where.rglob("*") if p.suffix in suffixes)
            if len(files) >= MAX_CONFIG_FILES:
                break
        texts: list[str] = []
        for path in files[:MAX_CONFIG_FILES]:
            try:
                if path.stat().st_size > MAX_CONFIG_BYTES:
                    continue
                texts.append(path.read_text(errors="replace"))
            except OSError:
                continue
        self._config_text[key] = texts
        return texts

    def config_targets(self, script: Path) -> list[str]:
        """The modules the run configurations of the script's project name as what to build (bio-diffusion's
        ``_target_: src.models.qm9_mol_gen_ddpm.QM9MoleculeGenerationDDPM``, whose ``training_step`` the script
        never imports: blind collection of stop 46): the dotted name without its last part, in the order found."""
        key = script.resolve().parent
        if key in self._targets:
            return self._targets[key]
        found: list[str] = []
        for text in self._config_texts(script):
            for target in _TARGET.findall(text):
                module = target.rsplit(".", 1)[0]
                if module.split(".")[0] not in _LIBRARIES and module not in found:
                    found.append(module)
        self._targets[key] = found
        return found

    def config_words(self, script: Path) -> frozenset[str]:
        """Every name the run configurations of the script's project spell: the classes and functions they have
        built or looked up by name (Hydra's ``_target_``, Palette's ``"which_model": ["models.model", "Palette"]``,
        HALOs' ``trainer: PPOTrainer`` read with ``getattr(trainers, config.loss.trainer)``, MMDetection's Python
        configurations' ``type='FCAF3DNeckWithHead'``)."""
        return frozenset(w for suffixes in ((".yaml", ".yml"), (".json",), (".py",))
                         for text in self._config_texts(script, suffixes) for w in _WORD.findall(text))

    def accelerate_configs(self, script: Path) -> tuple[tuple[str, str, int | None], ...]:
        """The ``accelerate`` launch configurations a project ships beside the script, up to :data:`LEVELS_UP`
        folders above it, or in a configuration folder there or one folder below it (Wonder3D's ``8gpu.yaml``,
        TangoFlux's ``configs/accelerator_config.yaml``, InternVLA-M1's ``config/deepseeds/zero2.yaml``): each file's
        name, the ``distributed_type`` it sets and, for DeepSpeed, the ZeRO stage (its own ``zero_stage``, or the
        ``stage`` of the DeepSpeed file it names; None when neither says), in order."""
        key = script.resolve().parent
        if key in self._accelerate:
            return self._accelerate[key]
        found: list[tuple[str, str, int | None]] = []
        files: list[Path] = []
        def entries(folder: Path) -> list[Path]:
            try:
                return sorted(folder.iterdir()) if folder.is_dir() else []
            except OSError:   # a folder above the project that this user may enter but not list
                return []
        for folder in [key, *key.parents][:LEVELS_UP + 1]:
            if any(p in _NEVER for p in folder.parts):
                break
            here = entries(folder)
            for where in [folder, *(folder / name for name in _CONFIG_DIRS),
                          *(d for d in here if "accelerate" in d.name.lower())]:
                listed = here if where == folder else entries(where)
                files += [p for p in listed if p.suffix in (".yaml", ".yml", ".json")]
                if where != folder:
                    files += [p for sub in listed if sub.is_dir() for p in entries(sub)
                              if p.suffix in (".yaml", ".yml", ".json")]
            if len(files) >= MAX_CONFIG_FILES:
                break
        for path in dict.fromkeys(files[:MAX_CONFIG_FILES]):
            try:
                if not path.is_file() or path.stat().st_size > MAX_CONFIG_BYTES:
                    continue
                text = path.read_text(errors="replace")
            except OSError:
                continue
            kind = _DISTRIBUTED_TYPE.search(text)
            if kind is not None:
                found.append((path.name, kind.group(1), _zero_stage(path, text) if kind.group(1) == "DEEPSPEED" else None))
        self._accelerate[key] = tuple(found)
        return self._accelerate[key]

    def include(self, paths: list[Path]) -> None:
        """Report the findings of these files too (the local files a script imports, see
        :func:`~nccl_workbook.lint.api.lint_paths`)."""
        for path in paths:
            if path.resolve() not in self._given:
                self._given.append(path.resolve())
        self._module_cache.clear()
        self._module_facts.clear()
        self.generation += 1
        self._callers.clear()
        self._calls_into.clear()
        self._imports_index = None
        self._resolved_imports = None

    def any_data_parallel(self) -> bool:
        """Does a file named on the command line wrap a model for data parallelism (DDP, FSDP, ...)?"""
        return any(f is not None and f.data_parallel for f in (self.facts(p) for p in self._given))

    def any_named(self, test: Callable[[SourceFacts], bool]) -> bool:
        """Does ``test`` hold for a file named on the command line?"""
        return any(f is not None and test(f) for f in (self.facts(p) for p in self._named))

    def scripts(self) -> list[SourceFacts]:
        """The parsed files named on the command line."""
        return [f for f in (self.facts(p) for p in self._named) if f is not None]

    def checked(self) -> list[SourceFacts]:
        """The parsed files whose findings are reported (named, or imported by a named one)."""
        return [f for f in (self.facts(p) for p in self._given) if f is not None]

    def classes_named(self, key: str) -> list[SourceFacts]:
        """The checked files that define a top-level class whose name, lower-cased, is ``key``."""
        if self._class_index is None or self._class_index[0] != self.generation:
            index: dict[str, list[SourceFacts]] = {}
            for f in self.checked():
                for node in f.tree.body:
                    if isinstance(node, ast.ClassDef):
                        index.setdefault(node.name.lower(), []).append(f)
            self._class_index = (self.generation, index)
        return self._class_index[1].get(key, [])

    def given(self, path: Path) -> bool:
        """Was this file named on the command line, or included as an import of one (its own findings
        are reported)?"""
        return path.resolve() in self._given

    def named(self, path: Path) -> bool:
        """Was this file named on the command line (not only imported by one)?"""
        return path.resolve() in self._named

    def callers(self, facts: SourceFacts, name: str) -> list[tuple[SourceFacts, ast.stmt]]:
        """The statements of the other files named on the command line that call ``name`` of ``facts``
        (imported by name, or through its module): what follows them is what every rank reaches next."""
        key = (id(facts), name)
        if key in self._callers:
            return self._callers[key]
        out: list[tuple[SourceFacts, ast.stmt]] = []
        self._callers[key] = out
        for other, alias, sub, module, submodule in self._imports():
            if other is facts:
                continue
            if sub == name and module is facts:
                out.extend((other, stmt) for stmt in other.calls_to.get(alias, []))
            elif not sub and module is facts or sub and sub != name and submodule is facts:
                out.extend((other, stmt) for stmt in other.calls_to.get(name, []))
        return out

    def calls_into(self, facts: SourceFacts) -> list[tuple[SourceFacts, ast.Call, str]]:
        """The calls of the other files named on the command line to a top-level function or class of
        ``facts`` (``from model.trainer import XMemTrainer`` then ``XMemTrainer(config, logger=logger)``,
        or ``trainer.XMemTrainer(...)``): (the calling file, the call, the name called in ``facts``). Found once
        per file (Megatron-LM asks 818 times, each a pass over its 3,000 imports)."""
        if id(facts) in self._calls_into:
            return self._calls_into[id(facts)]
        out: list[tuple[SourceFacts, ast.Call, str]] = []
        self._calls_into[id(facts)] = out
        top = {n.name for n in facts.tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        for other, alias, sub, module, submodule in self._imports_of(facts):
            if other is facts:
                continue
            if sub and module is facts and sub in top:
                names, recv = {alias: sub}, None
            elif sub and module is not None and module is not facts and self._reexports(module, sub) is facts \
                    and sub in top:
                # through a package's ``__init__.py`` that re-exports it (PELICAN's ``from src.trainer import
                # Trainer``, whose ``src/trainer/__init__.py`` holds ``from .trainer import Trainer``)
                names, recv = {alias: sub}, None
            elif not sub and module is facts or sub and submodule is facts:
                names, recv = {n: n for n in top}, alias
            else:
                continue
            for called, name in names.items():
                for stmt in other.calls_to.get(called, []):
                    for node in subtree(stmt):
                        if not isinstance(node, ast.Call):
                            continue
                        func = node.func
                        if recv is None and isinstance(func, ast.Name) and func.id == called or \
                                recv is not None and isinstance(func, ast.Attribute) and func.attr == called \
                                and isinstance(func.value, ast.Name) and func.value.id == recv:
                            out.append((other, node, name))
        return out

    def _imports_of(self, facts: SourceFacts) -> list[tuple[SourceFacts, str, str, SourceFacts | None,
                                                         SourceFacts | None]]:
        """The imports of :meth:`_imports` that may name ``facts``: the module, the submodule, or the file a
        package's ``__init__.py`` re-exports the name from (indexed once, in import order)."""
        if self._imports_index is None:
            index: dict[int, list[tuple[SourceFacts, str, str, SourceFacts | None, SourceFacts | None]]] = {}
            for entry in self._imports():
                _other, _alias, sub, module, submodule = entry
                targets = [module, submodule]
                if sub and module is not None:
                    targets.append(self._reexports(module, sub))
                for target in {id(t): t for t in targets if t is not None}:
                    index.setdefault(target, []).append(entry)
            self._imports_index = index
        return self._imports_index.get(id(facts), [])

    def reexported(self, package: SourceFacts, name: str) -> SourceFacts | None:
        """The file of a package that its ``__init__.py`` takes ``name`` from, if ``package`` is one."""
        return self._reexports(package, name) if Path(package.path).name == "__init__.py" else None

    def _reexports(self, module: SourceFacts, name: str) -> SourceFacts | None:
        """The file ``module`` takes ``name`` from by ``from .file import name`` (under the same name), if any."""
        how = module.import_from.get(name)
        if how is None or how[1] != name or not how[0]:
            return None
        return self.module(how[0], Path(module.path), how[2])

    def _imports(self) -> list[tuple[SourceFacts, str, str, SourceFacts | None, SourceFacts | None]]:
        """Every local import of the files named on the command line, resolved once: (the importing file,
        the name bound, the name imported from the module, the module's facts, the facts of
        ``module.name`` when that is a module itself)."""
        if self._resolved_imports is None:
            self._resolved_imports = []
            for path in self._given:
                other = self.facts(path)
                if other is None:
                    continue
                for alias, (module, sub, level) in other.import_from.items():
                    self._resolved_imports.append((
                        other, alias, sub, self.module(module, path, level),
                        self.module(f"{module}.{sub}", path, level) if sub else None))
        return self._resolved_imports

    def module(self, name: str, importer: Path, level: int = 0) -> SourceFacts | None:
        """The facts of the file that ``import name`` (``from`` ``level`` dots) means from ``importer``."""
        asked = (name, importer, level)
        if asked in self._module_facts:
            return self._module_facts[asked]
        if importer not in self._parents:
            self._parents[importer] = importer.resolve()
        resolved = self._parents[importer]
        key = (f"{'.' * level}{name}", resolved.parent)
        if key not in self._module_cache:
            self._module_cache[key] = self._find(name, resolved, level)
        found = self._module_cache[key]
        facts = self._module_facts[asked] = self.facts(found) if found is not None else None
        return facts

    def _given_named(self, name: str) -> list[Path]:
        """The given files whose file name is ``name``, in the order given (indexed once per generation)."""
        if self._given_index is None or self._given_index[0] != self.generation:
            index: dict[str, list[Path]] = {}
            for g in self._given:
                index.setdefault(g.name, []).append(g)
            self._given_index = (self.generation, index)
        return self._given_index[1].get(name, [])

    def _path_additions(self, importer: Path) -> list[Path]:
        """The folders the importing script adds to ``sys.path`` by a literal name (SEA-RAFT's
        ``sys.path.append('core')``, then ``from datasets import fetch_dataloader``), beside the script. Found
        once per file: every top-level import of it asks (a 6,700-line file with 250 imports spent most of its
        lint walking its own tree again for each)."""
        facts = self._facts.get(importer)
        if facts is None:
            return []
        if importer in self._additions:
            return self._additions[importer]
        out: list[Path] = []
        self._additions[importer] = out
        for node in ast.walk(facts.tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in ("append", "insert") and ast.unparse(node.func.value) == "sys.path":
                arg = node.args[-1] if node.args else None
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value \
                        and not Path(arg.value).is_absolute():
                    out.append((importer.parent / arg.value).resolve())
        return out

    def _find(self, name: str, importer: Path, level: int) -> Path | None:
        parts = [p for p in name.split(".") if p]
        if level:
            bases = [importer.parents[level - 1]] if level <= len(importer.parents) else []
        elif parts and parts[0] in _LIBRARIES:
            # a library's name is a file of the project only in the folder of a script named on the command line (it
            # is first on sys.path, for the files that script imports too: DETR's engine.py importing
            # `datasets.coco_eval` beside main.py) or in a folder the script adds to sys.path (SEA-RAFT's
            # `core/datasets.py`)
            bases = sorted({named.parent for named in self._named})
            bases += self._path_additions(importer)
            # ... or the library itself, for a file inside it: TRL's own `trl/scripts/sft.py` importing `from trl
            # import SFTTrainer` means the package it sits in (blind collection of stop 48, TRL issue 4578)
            # (not the standard library's: a package's own `logging/` does not make its `import logging` local)
            if parts[0] not in sys.stdlib_module_names:
                bases += [p.parent for p in importer.parents
                          if p.name == parts[0] and (p / "__init__.py").is_file()][:1]
        else:
            bases = [importer.parents[i] for i in range(min(LEVELS_UP + 1, len(importer.parents)))]
            bases += self._path_additions(importer)
            # the "src layout" of a package installed from its checkout (LTX-Video-Trainer's
            # ``scripts/train.py`` importing ``ltxv_trainer``, which is ``src/ltxv_trainer/``)
            bases += [b / "src" for b in bases[:LEVELS_UP + 1]]
            # a file given on the command line whose path ends with the module's (``pkg/utils.py``), other than
            # the importer (AllenAct's ``main.py`` beside ``allenact/``, whose ``import allenact.main`` is the
            # package's own ``allenact/main.py``)
            suffix = Path(*parts).with_suffix(".py") if parts else None
            given = [g for g in self._given_named(suffix.name) if g != importer
                     and g.parts[-len(suffix.parts):] == suffix.parts] if suffix is not None else []
            if given:
                return min(given, key=lambda g: len(g.parts))
        found = self._first_in(bases, parts, importer)
        if found is None and not level and parts and parts[0] not in _LIBRARIES:
            # last, a project the checkout installs from one of its folders (Tora's `pip install -e
            # modules/SwissArmyTransformer`, then `from sat.training.deepspeed_training import training_main`)
            found = self._first_in([v for b in bases[:LEVELS_UP + 1] for v in self._installed_below(b)], parts,
                                   importer)
        return found

    @staticmethod
    def _first_in(bases: list[Path], parts: list[str], importer: Path) -> Path | None:
        for base in bases:
            for cand in (base.joinpath(*parts).with_suffix(".py") if parts else None,
                         base.joinpath(*parts, "__init__.py")):
                if cand is not None and cand.is_file() and not any(n in cand.parts for n in _NEVER) \
                        and cand != importer:
                    return cand
            # as Python does: the submodules of a package come from the package found first, not from a folder of
            # the same name further up (d2go's `d2go.tools.train_net`, which the checkout installs from its top
            # `tools/`, is not the `d2go/tools/train_net.py` of another checkout beside it: blind collection of stop
            # 52)
            if len(parts) > 1 and (base / parts[0] / "__init__.py").is_file() \
                    and not any(n in (base / parts[0]).parts for n in _NEVER):
                return None
        return None

    def _installed_below(self, base: Path) -> list[Path]:
        """The installable projects in the vendoring folders of ``base`` (see :data:`_VENDORED`), each as the
        folders its packages are imported from (its own, and its ``src/``), listed once per folder."""
        if base in self._vendored:
            return self._vendored[base]
        out: list[Path] = []
        self._vendored[base] = out
        for name in sorted(_VENDORED):
            folder = base / name
            try:
                children = sorted(folder.iterdir()) if folder.is_dir() else []
            except OSError:
                continue
            for child in children:
                if child.is_dir() and any((child / marker).is_file() for marker in _INSTALLABLE):
                    out += [child, child / "src"]
        return out

