"""What the rules need to know about one Python file, read once with :mod:`ast`.

:class:`SourceFacts` answers the questions every rule asks, from names and shapes only (nothing
is imported or run):

- *Is this expression true on some ranks only?* (:meth:`SourceFacts.is_rank_condition`): it
  compares a rank (``rank == 0``, ``args.local_rank in [-1, 0]``, ``dist.get_rank() == 0``,
  ``int(os.environ["RANK"]) == 0``), or reads a main-process flag (``accelerator.is_main_process``,
  ``trainer.is_global_zero``, ``master_process``, ``is_main_process()``), or a variable or function
  of the same file that holds or returns one (``is_main = rank == 0``). Comparisons with ``-1`` or
  ``None`` only (``args.local_rank != -1``: "is this a distributed run") are the same on every rank.
- *Does this call imply a collective?* (:meth:`SourceFacts.collective_of`): ``torch.distributed``
  collectives however imported, the helpers real scripts call (``accelerator.gather``,
  ``wait_for_everyone``, DeepSpeed ``save_checkpoint``, ``accelerator.save_state``,
  ``torch.distributed.checkpoint.save``, an FSDP model's ``state_dict``/forward/``generate``,
  a torchmetrics metric's ``compute()`` in a file that imports torchmetrics), a
  ``backward()`` in a file that wraps its model for data parallelism (DDP's gradient all-reduce),
  and functions of the same file that call any of these, followed to a fixed point.
- *Is this long work?* (:meth:`SourceFacts.long_work_of`): evaluation, sampling, checkpoint saving,
  uploads to a logging service (artifacts, models; not metrics, parameters or plots, which are small or
  queued), or a loop over a data loader, again through functions of the file and of the files it imports.

Known limits: names are matched by spelling, not by type (a variable called ``rank`` is a rank);
functions are found by name in the same file (``self.save()`` finds any method ``save``) or, when the
file is read as part of a :class:`~nccl_workbook.lint.project.Project`, through its imports of local
modules (:meth:`SourceFacts.external`);
values are followed through plain assignments, not through containers or other modules.

Usage::

    facts = SourceFacts.parse(text, "train.py")
    facts.is_rank_condition(if_node.test)
"""

from __future__ import annotations

import ast
import contextvars
import re
import warnings
from collections.abc import Callable, Container, Iterable, Iterator, Set
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nccl_workbook.lint.project import Project

__all__ = ["SourceFacts", "Site", "dotted", "call_name", "walk_local", "target_names"]

# -- names --------------------------------------------------------------------------------------------

#: torch.distributed functions every rank of the group must call (the ones ``ops.OPS`` names, plus
#: ``new_group``, which is collective over the whole world)
DIST_COLLECTIVES = frozenset({
    "all_reduce", "all_reduce_coalesced", "broadcast", "broadcast_object_list", "reduce", "all_gather",
    "all_gather_object", "all_gather_coalesced", "all_gather_into_tensor", "_all_gather_base", "gather",
    "gather_object", "scatter", "scatter_object_list", "reduce_scatter", "reduce_scatter_tensor",
    "_reduce_scatter_base", "all_to_all", "all_to_all_single", "barrier", "monitored_barrier", "new_group",
    "send", "recv", "isend", "irecv", "batch_isend_irecv",
})
#: counts the gathers of sharded parameters, ``DTensor.full_tensor()`` (an all-gather over the tensor's mesh),
#: DeepSpeed's ``zero.GatheredParameters(...)`` and FSDP's ``summon_full_params(...)``, as collectives: set by the
#: rank-branch rule only. Under a rank test they are gathers the other ranks never join (bergson PR 376,
#: VideoLLaMA2 PR 48); in a loop over parameters every rank that holds the shards skips the same ones (Megatron-LM,
#: prime-rl, OpenTau: ten reports, all false, when every rule counted ``full_tensor``)
PARAMETER_GATHERS: contextvars.ContextVar[bool] = contextvars.ContextVar("PARAMETER_GATHERS", default=False)
#: point-to-point: a branch on the rank is how they are meant to be used
POINT_TO_POINT = frozenset({"send", "recv", "isend", "irecv", "batch_isend_irecv"})
#: method names that mean a collective whatever the object (no other common meaning)
UNAMBIGUOUS_METHODS = frozenset({
    "barrier", "monitored_barrier", "all_reduce", "all_gather", "all_gather_object", "all_gather_into_tensor",
    "reduce_scatter", "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "broadcast_object_list",
    "wait_for_everyone", "gather_for_metrics", "pad_across_processes",
    # a DeepSpeed engine's ZeRO-3 state dict: every layer's partitioned parameters gathered (MedicalGPT's
    # `save_model_zero3` under `if trainer.is_world_process_zero():`, missed in held-out round 57)
    "_zero3_consolidated_16bit_state_dict",
    # ZeroRedundancyOptimizer's (and fairscale OSS's) gather of every rank's optimizer shard onto one rank:
    # "this needs to be called on all ranks" (torch/distributed/optim/zero_redundancy_optimizer.py)
    "consolidate_state_dict",
})
#: mpi4py's collectives (lower case for Python objects, capitalised for buffers), on a communicator: the
#: guided-diffusion family loads a checkpoint with ``MPI.COMM_WORLD.bcast`` beside its torch.distributed group
MPI_COLLECTIVES = frozenset({
    "bcast", "Bcast", "allreduce", "Allreduce", "allgather", "Allgather", "Allgatherv", "gather", "Gather",
    "Gatherv", "scatter", "Scatter", "Scatterv", "reduce", "Reduce", "Reduce_scatter", "alltoall", "Alltoall",
    "barrier", "Barrier",
})
#: method names that are collectives only on a distributed object (``functools.reduce``, ``torch.gather``)
DIST_RECEIVERS = re.compile(r"(^|\.)(dist|distributed|torch\.distributed|hvd|horovod|accelerator|fabric|strategy|"
                            r"comm|xm|bps|dist_utils|du)$")
#: vLLM's (and its Ascend port's) communicators over a group of a trainer's process and an inference engine's workers
_ENGINE_COMMUNICATORS = frozenset({"PyNcclCommunicator", "PyHcclCommunicator"})
AMBIGUOUS_METHODS = frozenset({"broadcast", "reduce", "gather", "gather_object", "scatter", "synchronize",
                               "get_state_dict", "save_state", "save_model", "save_checkpoint", "load_checkpoint",
                               "push_to_hub"})
#: helpers imported from elsewhere whose names say they communicate (``reduce_dict``, ``all_reduce_mean``)
HELPER_NAME = re.compile(r"(^|_)(all_?reduce|all_?gather|barrier|synchronize|reduce_(dict|tensor|mean|sum|loss|value)|"
                         r"gather_(tensor|object|all)|broadcast)")
#: the DCP/FSDP state-dict getters: a collective only over a sharded model (FSDP, DTensor parameters);
#: FSDP's ``scatter_full_optim_state_dict`` broadcasts rank 0's full optimizer state to the shards
_DCP_GETTERS = frozenset({"get_model_state_dict", "get_optimizer_state_dict", "get_state_dict",
                          "full_optim_state_dict", "optim_state_dict", "sharded_optim_state_dict",
                          "scatter_full_optim_state_dict"})
#: torch.distributed.checkpoint and FSDP state-dict helpers (collective over the group)
DCP_CALLS = frozenset({"save_state_dict"}) | _DCP_GETTERS
#: classes whose instances shard a model: their forward, generate, backward and state_dict are collective
SHARDING_WRAPPERS = re.compile(r"(^|\.)(FSDP|FullyShardedDataParallel|fully_shard|deepspeed\.initialize)$")
#: classes whose instances run collectives (``acc = Accelerator(); acc.gather(t)``)
DIST_OBJECT_CLASSES = re.compile(r"(^|\.)(Accelerator|PartialState|AcceleratorState|Fabric)$")
#: names whose presence means the file's ``backward()`` all-reduces gradients
DATA_PARALLEL_NAMES = frozenset({"DistributedDataParallel", "DDP", "FullyShardedDataParallel", "FSDP", "fully_shard",
                                 "deepspeed", "Accelerator", "DistributedOptimizer", "Fabric"})

#: optimizers that shard their state over the ranks: each step() all-gathers (or broadcasts) the updated
#: parameters, so every rank must step (torch's ZeroRedundancyOptimizer, fairscale's OSS)
_ZERO_OPTIMIZERS = re.compile(r"(^|\.)(ZeroRedundancyOptimizer|OSS)$")
#: a name that says it holds such an optimizer (Neuron_SP's `self._dist_optimizer.step()`: "reduce_scatter ->
#: Adam -> all_gather")
_ZERO_OPTIMIZER_NAME = re.compile(r"^_?(dist|distributed|zero|sharded)_optim(izer)?$")
#: a barrier of the launching processes, outside the process group (KataGo's ``torch.multiprocessing.Barrier``
#: handed to every spawned rank: "the non-zero ranks idle here harmlessly", no NCCL timeout runs there)
_CPU_BARRIER = re.compile(r"\b(multiprocessing|threading|mp|ctx|manager)\.Barrier\(|"
                          r"from\s+(torch\.)?(multiprocessing|threading)\s+import\s[^\n]*\bBarrier\b")
#: names of what a sharding call hands back beside the model
_NOT_A_MODEL = re.compile(r"(?i)optim|sched|loader|data|sampler|^lr|^_$")
#: words that say a script may run sharded under Accelerate (its launch config can also say so)
#: (not automatic checkpoint naming turned off: AudioLDM's Tango)
_MAY_SHARD = re.compile(r"deepspeed|fsdp|FullyShardedDataParallel|zero_?stage|zero3|"
                        r"automatic_checkpoint_naming(?!\s*=\s*False)|DistributedType|megatron", re.IGNORECASE)
#: the ``distributed_type`` values of an ``accelerate`` configuration that shard the model (``save_state`` and
#: ``get_state_dict`` are collectives under them, local under the others: ``MULTI_GPU``, ``NO``, ...)
_ACCELERATE_SHARDING = frozenset({"DEEPSPEED", "FSDP", "MEGATRON_LM"})
#: a ``finally:`` keyword at the start of a line
_FINALLY = re.compile(r"^[ \t]*finally[ \t]*:", re.M)
#: a script that picks a sharding mode in its own code (not only through the launch configuration)
_CODE_SHARDS = re.compile(r"(?i)zero_?stage\s*[=:]\s*3|zero_?3|stage_?3|fsdp|FullyShardedDataParallel|megatron")
#: why a main-process ``save_state``/``get_state_dict`` is a note where the project ships only launch configurations
#: that do not shard
ACCELERATE_LOCAL_NOTE = ("not counted as hazards: Accelerate's `save_state()` or `get_state_dict()` on the main "
                         "process only, in a project whose own `accelerate` configurations run plain data parallelism "
                         "(`MULTI_GPU`), where both are local, or (`get_state_dict()`) DeepSpeed ZeRO-1/2, where every "
                         "rank holds whole parameters. Launched with a DeepSpeed (ZeRO-3 for `get_state_dict()`) or FSDP "
                         "configuration they are collectives of every rank, and the others never join them (diffusers "
                         "issue 2606): call them on every rank there")
#: a pipeline stage's flag (Megatron-LM's `pre_process`, `post_process`, `mtp_process`): handed to a model, it names the
#: stage, and the collectives under it are over groups within the stages that hold it
_STAGE_FLAG = re.compile(r"(?i)(^|[._])(pre|post|mtp)_process|stage|pipeline|model_parallel")
#: a function that runs one training step (or epoch): a call of it reaches the step's collectives
STEP_NAME = re.compile(r"(^|_)(train_step|training_step|train_one_epoch|train_epoch|train_batch|forward_backward|"
                       r"run_step|step_fn)$")
#: calls that wrap a model so that its backward all-reduces (or reduce-scatters) the gradients
_WRAPPERS = frozenset({"DistributedDataParallel", "DDP", "FullyShardedDataParallel", "FSDP", "fully_shard"})
_RANK_PART = re.compile(r"(^|_)(rank|ordinal|process_index)$")
_MAIN_FLAG = re.compile(
    r"^_?(is_|if_)?(local_|global_|world_|node_)?(main|master|primary|chief|leader|zero|rank_?0|rank_?zero|"
    r"global_zero|local_zero|process_zero|main_process|master_ordinal)(_process|_proc|_rank|_node|_worker|_gpu|"
    r"_process_zero)?$"
)
_MAIN_EXTRA = frozenset({"should_save", "should_log", "is_world_process_zero", "is_local_process_zero"})
_NOT_RANK = re.compile(r"(world(?!_rank$)|size|num_|n_|count|ranks$|rank_list|all_ranks|_fn$|_only$|lora|low_rank|"
                       r"adapter|svd|^r_?rank)")
_ENV_RANK = re.compile(r"^(LOCAL_|GLOBAL_|GROUP_|NODE_|SLURM_|OMPI_COMM_WORLD_|PMI_)?(RANK|PROCID|LOCALID|NODEID|"
                       r"LOCAL_RANK)$")
#: decorators that run a function on one rank only (lightning, mmcv/basicsr, accelerate)
RANK_ONLY_DECORATOR = re.compile(r"(rank_zero|master_only|main_process_only|on_main_process|on_local_main_process|"
                                 r"main_only|rank0_only|only_rank|on_rank|on_master|on_process)")

#: word parts of call names that mean long work on the calling rank
LONG_PARTS = frozenset({
    "eval", "evaluate", "evaluation", "evaluator", "validate", "validation", "valid", "test", "predict",
    "prediction", "predictions", "inference", "infer", "sample", "sampling", "samples", "generate", "generation",
    "save", "savefig", "checkpoint", "checkpoints", "ckpt", "export", "upload", "push", "download", "benchmark",
    "visualize", "visualization", "plot", "render",
})
#: an image-generation metric over a folder or set of images (torch-fidelity, pytorch-fid, clean-fid): an Inception
#: network's features of every image, minutes for the usual 50,000
_IMAGE_METRIC = re.compile(r"(?i)(^|[._])(torch_fidelity|fidelity|pytorch_fid|cleanfid|fid)[._]|(^|_)(fid|inception_score)(_|$)")
#: the parts of LONG_PARTS that write a checkpoint of the model on the calling rank: how long that takes is the
#: model's size over the storage's speed, seconds for most models (see :func:`save_kind`)
SAVE_PARTS = frozenset({"save", "checkpoint", "checkpoints", "ckpt", "export", "dump"})
#: text that says the model may be large: sharded training (DeepSpeed, FSDP, Megatron, tensor or pipeline
#: parallelism) or a large pretrained model named by its size (``"meta-llama/Llama-2-7b-hf"``, ``70B``; not the One
#: Billion Word benchmark's files: s4's ``"1b_word_vocab.txt"``, held-out round 61)
_BIG_BY_NAME = r"megatron|tensor_(model_)?parallel|pipeline_(model_)?parallel|model_parallel_size|" \
               r"[\"'/_-]\d{1,3}(\.\d)?[bB](?!_?words?\b|_word)(-|_|\b)|llama|mistral|mixtral|qwen|falcon|gpt-?neox"
_BIG_MODEL = re.compile(r"deepspeed|fsdp|FullyShardedDataParallel|fully_shard\b|zero_?stage|zero3|" + _BIG_BY_NAME,
                        re.IGNORECASE)
#: the same, but not by sharded training alone: a model named large, or split across ranks by tensor or pipeline
_BIG_MODEL_NAMED = re.compile(_BIG_BY_NAME, re.IGNORECASE)
#: the ways of sharding a model that a file may name, each by its words
SHARDING_MODES = {"deepspeed": re.compile(r"(?i)deepspeed|zero_?stage|zero3"),
                  "fsdp": re.compile(r"(?i)fsdp|FullyShardedDataParallel|fully_shard\b")}


#: a test of DeepSpeed's ZeRO stage 3 (``zero_stage == 3``, ``is_deepspeed_zero3_enabled()``), and its negation
_ZERO3_TEST = re.compile(r"zero_?stage\W*(==|!=|<|>=)\W*3\b|is_deepspeed_zero3_enabled\(\)|\bzero3\b")
_NOT_ZERO3 = re.compile(r"zero_?stage\W*(!=|<)\W*3\b|\bnot\s+[\w.]*(zero3|is_deepspeed_zero3_enabled)")


#: text that says the parameters are partitioned across the ranks (DeepSpeed ZeRO-3, FSDP)
_PARTITIONED = re.compile(r"deepspeed\.zero\b|ZeroParamStatus|GatheredParameters|zero3|stage3|"
                          r"FullyShardedDataParallel|fully_shard\b")


#: the kinds of long work that are only a checkpoint save: a save, and a save of the trained tensors only (the
#: frozen ones left out first: an adapter's size, whatever the model)
SAVE_KINDS = ("save", "small save")


def save_kind(name: str) -> str:
    """``"save"`` for a call or function whose name says it only writes a checkpoint (``save_checkpoint``,
    ``torch.save``), ``"work"`` when it says more (``evaluate_and_save``)."""
    parts = LONG_PARTS.intersection(_parts(name))
    return "save" if parts and parts <= SAVE_PARTS else "work"


#: logging services whose pushes block the calling rank (seed 004)
LOGGING_RECEIVERS = re.compile(r"(^|\.)(wandb|mlflow|neptune|comet_ml|clearml|aim|swanlab|tracker|trackers|"
                               r"tracking|run|experiment)$")
LOGGING_METHODS = re.compile(r"^(log|log_\w+|save|upload\w*|push\w*|add_\w+)$")
#: the pushes of a logging service that send files there and then (the rest is queued)
_UPLOAD = re.compile(r"^(log_artifacts?|log_model|upload\w*|push\w*)$")
#: an iterable whose name says it walks a data set
#: a pool of worker processes, and the calls that wait for its work
_POOL = re.compile(r"(^|\.)(Pool|ProcessPoolExecutor)$")
_POOL_WAITS = frozenset({"join", "map", "starmap", "imap", "imap_unordered"})
#: what a file-listing helper makes (``generate_data_list``, ``generate_file_index``)
_LISTING = frozenset({"list", "lists", "index", "manifest", "scp", "split", "splits", "csv", "json", "file", "files"})


def _listing_name(name: str) -> bool:
    """A helper named for generating a list of files (FunCodec's ``generate_data_list``), not a model's output."""
    parts = set(_parts(name))
    return "generate" in parts and bool(_LISTING & parts)


#: the number of steps of a diffusion process (``self.num_timesteps``, ``diffusion.timesteps``)
_TIMESTEPS = re.compile(r"(?i)(^|[._])(num_)?(timesteps|diffusion_steps)$")
#: a network called, or handed to what calls it (``denoise_fn``, ``self.model``, ``unet``)
_NETWORK = re.compile(r"(?i)(^|[._])(model|net|unet|denoiser?|denoise_fn|eps_model|transformer)$")
LOOP_DATA = re.compile(r"(loader|dataset|(?<!meta)data\b|(?<!meta)data_|batches|eval|val_|valid|test|samples|iters|"
                       r"steps|prompts)",   # (not `metadata`: ms-swift's `for name in self.metadata`, a bucket's views)
                       re.IGNORECASE)
_NOT_LONG_RECEIVER = re.compile(r"(^|\.)(random|np\.random|os|os\.path|logging|logger|log|sampler|parser|args|"
                                r"OmegaConf|omegaconf|yaml|json|toml)$|"  # (`*config`: below)
                                # (Apollo's `left_tokenizer.save_pretrained(...)`, held-out round 57)
                                r"(^|\.|_)(tokenizer|processor|feature_extractor|image_processor|config)$|"
                                # (CoLLiE's `AutoConfig.from_pretrained(path).save_pretrained(out)`: a JSON file)
                                r"(^|\.)\w*(Config|Tokenizer|Processor)\.from_pretrained\(")
#: a payload named for evaluation results (scores, metrics, statistics), not for a model
_RESULTS = re.compile(r"eval|metric|(?<![a-z])stats?(?![a-z])|statistic|result|score|histor|record", re.IGNORECASE)
#: a test that the model being trained is an adapter (what it saves is the adapter)
_ADAPTER = re.compile(r"peft|lora|adapter", re.IGNORECASE)
#: a wait for something outside the job: a file or marker another program writes, a server coming up
#: (prime-rl's `sync_wait_for_path(nccl_ready_file)` on the master, blind in stop 53)
_WAITS_OUTSIDE = re.compile(r"(?i)(^|_)(wait|poll)(_for|_until)?_\w*(path|file|marker|ready|exists|server|health|"
                            r"endpoint)")
#: a TensorBoard writer (or a summary writer), whose figures are of values already computed
_WRITER = re.compile(r"(?i)(^|[._])(\w*writer|tb|tensorboard|summary\w*)$")
#: a test that a file or a marker is there yet, in a poll loop (`while not os.path.exists(done): time.sleep(1)`)
_EXISTS_TEST = frozenset({"exists", "isfile", "is_file", "isdir", "is_dir", "is_ready", "ready", "poll"})
#: in a saved literal: what makes it a checkpoint rather than metadata
_HEAVY = re.compile(r"state_dict|model|module|optim|weight|param|ema|tensor|buffer|cpu\(|cuda\(|numpy\(|"
                    r"\bstates?\b|\bsd\b|ckpt|checkpoint", re.IGNORECASE)
_SMALL_FILE_PARTS = frozenset({"config", "configs", "cfg", "args", "hparams", "hyperparameters", "meta", "metadata",
                               "card",   # a model card: the repository's README (finetrainers' save_model_card)
                               "metafile", "statistics", "stats",
                               "json", "yaml", "yml", "txt", "csv", "manifest", "symlink", "info", "readme", "command",
                               "cmd", "argv", "version",
                               # the project's own source tree copied beside the run (ReMax's `save_code(save_dir)`:
                               # `shutil.copytree(project_dir, ...)` without outputs and checkpoints; held-out 126)
                               "code", "source", "sources", "script", "scripts"})
#: a context manager that holds the calling ranks until something happens elsewhere
_WAITING = re.compile(r"(^|_)wait(_|$)|_and_wait$|^wait_for_", re.IGNORECASE)
_SPLIT = re.compile(r"_|(?<=[a-z])(?=[A-Z])")


def dotted(node: ast.AST) -> str:
    """``a.b.c`` for a chain of names and attributes (calls and subscripts read as ``()`` / ``[]``)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return f"{dotted(node.func)}()"
    if isinstance(node, ast.Subscript):
        return f"{dotted(node.value)}[]"
    return "?"


def call_name(call: ast.Call) -> tuple[str, str]:
    """(receiver, name) of a call: ``dist.barrier()`` -> ``("dist", "barrier")``; ``f()`` -> ``("", "f")``."""
    func = call.func
    if isinstance(func, ast.Attribute):
        return dotted(func.value), func.attr
    if isinstance(func, ast.Name):
        return "", func.id
    return "?", ""


#: calls that fetch a file over the network, by names that do not say "download" (Composer's and Keras's
#: ``get_file``, urllib's ``urlretrieve``)
_DOWNLOADS = frozenset({"get_file", "urlretrieve"})


def _parts(name: str) -> list[str]:
    parts = [p.lower() for p in _SPLIT.split(name) if p]
    return parts + ["download"] if name.rsplit(".", 1)[-1] in _DOWNLOADS else parts


def _param_defaults(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[tuple[str, ast.expr]]:
    """(parameter, default) for every parameter of ``fn`` that has a default."""
    positional = fn.args.posonlyargs + fn.args.args
    pairs = list(zip([a.arg for a in positional[len(positional) - len(fn.args.defaults):]], fn.args.defaults,
                     strict=True))
    pairs += [(a.arg, d) for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults, strict=True) if d is not None]
    return pairs


def _log_line_name(name: str) -> bool:
    """``valid_err_log``, ``eval_print``, ``log_validation``: a name that says it writes a line about the work,
    not the work."""
    parts = _parts(name)
    # Tacotron 2's `logger.log_validation(...)`: scalars, histograms and a few images for TensorBoard; AllenNLP's
    # `add_validation_scalar(name, value)`: one TensorBoard scalar
    # NVIDIA semantic-segmentation's `print_evaluate_results(hist, iu, ...)`: a table of the scores
    # Determined's `core_context.train.report_validation_metrics(steps, metrics)`: one small request to its master
    return bool(parts) and (parts[-1] in ("log", "print", "msg", "str", "repr")
                            or parts[0] in ("log", "print") and len(parts) > 1
                            or parts[0] == "add" and parts[-1] in ("scalar", "scalars", "histogram", "text")
                            or parts[0] == "report" and parts[-1] in ("metric", "metrics"))


def ends_group(stmt: ast.AST) -> bool:
    """Does the statement end the process group (``dist.destroy_process_group()``, Accelerate's
    ``end_training()``) or the process (``exit()``, XLM's eval-only run)? After it no rank waits in a
    collective of the group."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) \
            and call_name(stmt.value) in (("", "exit"), ("sys", "exit"), ("os", "_exit"), ("", "quit")):
        return True   # the process ends here (a conditional `if a.evaluate: exit()` does not end the block)
    return any(isinstance(n, ast.Call) and call_name(n)[1] in ("destroy_process_group", "end_training")
               for n in subtree(stmt))


def _small_literal(node: ast.AST | None) -> bool:
    """A dict/list literal of plain values (``torch.save({"step": step, "epoch": epoch}, path)``): a few
    bytes of metadata, not a checkpoint. Anything that names a model, an optimizer or a state dict is not."""
    if not isinstance(node, (ast.Dict, ast.List, ast.Tuple)):
        return False
    return not _HEAVY.search(ast.unparse(node))


#: work that draws a figure: long only in bulk, so a save or an evaluation beside it is the one to name
_PLOT_PARTS = frozenset({"plot", "savefig", "visualize", "visualization", "render"})


def _abstract(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A method left to subclasses: its body only a docstring, ``pass``, ``...`` or ``raise NotImplementedError``."""
    for stmt in fn.body:
        if isinstance(stmt, ast.Pass) or isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue
        if isinstance(stmt, ast.Raise) and stmt.exc is not None and "NotImplementedError" in ast.unparse(stmt.exc):
            continue
        return False
    return True


def _previews_one_batch(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Does the function walk its data only for the first batch: every loop of it a loop over a loader whose body
    ends in an unconditional ``break`` (``for batch in eval_loader: x = batch[:1]; break``)?"""
    loops = [n for n in walk_local(fn) if isinstance(n, (ast.For, ast.AsyncFor, ast.While))]
    return bool(loops) and all(isinstance(n, (ast.For, ast.AsyncFor)) and LOOP_DATA.search(ast.unparse(n.iter))
                               and isinstance(n.body[-1], ast.Break) and not n.orelse for n in loops)


def _light(site: Site) -> bool:
    """An upload, or a plot that is only a plot (``plot_spectrogram_to_numpy``; SlowFast's ``plot_eval``, which
    draws hundreds of figures over the whole evaluation, is evaluation work)."""
    parts = set(_parts(site.label.split("(")[0].rsplit(".", 1)[-1]))
    return site.kind in ("logging", "plot", "service") \
        or bool(_PLOT_PARTS & parts) and not (LONG_PARTS - _PLOT_PARTS) & parts


#: an iterable that loads data as it is walked (walking it is the work, whatever the body does)
_PIPELINE = re.compile(r"loader|dataset(?!_?(indices|idx|ids?|names?|keys|sizes?|lens?|splits?)\b)|dataloader|"
                       r"iterator|stream", re.IGNORECASE)   # (RDT's `zip(dataset_indices, losses)` walks numbers)
def _a_few_picked(it: ast.AST, most: int = 16) -> bool:
    """Does the loop walk a few items it names the count of: ``random.sample(xs, 2)``, ``range(3)``, ``xs[:4]``?"""
    def few(x: ast.AST | None) -> bool:
        value = _const(x) if x is not None else None
        return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= most
    if isinstance(it, ast.Call):
        name = call_name(it)[1]
        if name == "sample" and len(it.args) == 2:
            return few(it.args[1])
        if name in ("choices", "choice"):
            return any(few(k.value) for k in it.keywords if k.arg in ("k", "size"))
        if name == "range" and len(it.args) == 1:
            return few(it.args[0])
        if name in ("enumerate", "zip") and it.args:   # (`enumerate(random.sample(xs, 2))`)
            return any(_a_few_picked(a, most) for a in it.args)
    if isinstance(it, ast.Subscript) and isinstance(it.slice, ast.Slice) and it.slice.lower is None \
            and it.slice.step is None:
        return few(it.slice.upper)
    return False


#: a loop over the entries of the run's settings (``config['eval_datasets']``): a few names and paths, not data
_SETTING_ENTRIES = re.compile(r"(self\.)?(config|cfg|conf|args|opt|opts|hparams|settings)\b\s*[\[.]")
_LIGHT_CALLS = frozenset({"print", "append", "extend", "insert", "update", "add", "pop", "format", "join", "len",
                          "range", "str", "int", "float", "repr", "enumerate", "zip", "isinstance", "getattr",
                          "setattr", "sorted", "min", "max", "sum", "abs", "round", "exists", "isfile", "isdir",
                          "basename", "dirname", "split", "strip", "replace", "startswith", "endswith", "lower",
                          "upper", "write", "info", "debug", "warning", "warn", "error", "item", "tolist", "items", "keys",
                          "values", "touch",   # (an empty marker file: Twitter's recap `fs.touch(done_path)`)
                          "avg", "average",   # (a meter's running mean: PoinTr's `test_metrics.avg(i)`)
                          "iterdir", "listdir", "scandir", "glob", "rglob",   # (a folder's names)
                          # Python's own tests and containers, an array view of one item (SimpleTuner's webhook:
                          # `for frame in vid_data: frames.append(np.asarray(frame))`, one video's frames)
                          "hasattr", "callable", "type", "list", "tuple", "dict", "set", "bool", "asarray"})


def _reads(call: ast.Call) -> bool:
    """``open(path)``, ``open(path, "r")``: a file opened for reading (a write may be of anything)."""
    mode = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "mode"), None)
    return mode is None or isinstance(_const(mode), str) and str(_const(mode)).startswith("r")


def _light_call(call: ast.Call) -> bool:
    """A call that takes no time worth counting: a print or log line, a constructor, list and string methods."""
    recv, name = call_name(call)
    if name in ("system", "run", "call", "check_call", "check_output") and recv in ("os", "subprocess") and call.args:
        # CLAP's `os.system(f"aws s3 cp .../sizes.json ./json_files/.../sizes.json")`: a shell command that moves
        # only small files
        parts = [c.value for c in ast.walk(call.args[0]) if isinstance(c, ast.Constant) and isinstance(c.value, str)]
        text = "".join(parts)   # in order: the f-string's parts joined
        files = re.findall(r"\.(\w+)(?=[\s'\"]|$)", text)
        words = " ".join(parts).split()   # (a command given as a list: its arguments)
        if words[:1] == ["cp"] and any(w == "--link" or re.fullmatch(r"-[a-zA-Z]*l[a-zA-Z]*", w) for w in words):
            return True   # DINOv3's keep_checkpoint_copy: `cp --recursive --link src dst`, hard links, no data copied
        return bool(files) and all(f".{ext.lower()}" in (*_SMALL_DOWNLOAD, ".csv") for ext in files)
    if name in ("rmtree", "unlink", "rmdir", "removedirs") or name == "remove" and recv == "os":
        return True   # a deletion (DINOv3's keep_last_n_checkpoints: `shutil.rmtree` of the old ones), as the names
        # that say they delete (`clean_last_n_checkpoints`) are no long work
    if name in ("copy", "copyfile", "copy2") and recv == "shutil" and call.args \
            and re.search(r"(?i)config|cfg|\.(toml|ya?ml|json|txt)\b|(^|\W)args\b", ast.unparse(call.args[0])):
        return True   # diffusion-pipe's `shutil.copy(eval_dataset['config'], run_dir)`: a configuration file
    # nanoVLM's loop over the lmms-eval result files: a regular expression, a small JSON file read, a dict
    # lookup, a metrics push the logging service queues
    if recv == "re" or name in ("group", "groups", "groupdict", "get") or name == "open" and not recv and _reads(call) \
            or recv in ("json", "yaml", "toml", "tomllib") and name in ("load", "loads", "safe_load") \
            or name == "log" and LOGGING_RECEIVERS.search(recv):
        return True
    # a TensorBoard writer's add_scalar/add_image (RT-DETR's loop over its test stats) is queued to a file
    return name in _LIGHT_CALLS or name in ("makedirs", "mkdir") or name[:1].isupper() or _log_line_name(name) \
        or _writes_a_figure(call) or name.startswith("add_") and "writer" in recv.lower() \
        or bool(re.search(r"(^|\.)(log|logger|logging|pbar|tqdm|os\.path|sys\.stdout)$", recv))


#: keyword arguments that turn data parallelism on or off where a model is built (``_build_model(ddp=False)``)
_PARALLEL_SWITCHES = frozenset({"ddp", "use_ddp", "distributed", "is_distributed", "data_parallel", "wrap_ddp"})
#: a name that holds a model (its call is a forward)
_HOLDS_A_MODEL = re.compile(r"(?i)(^|[._])(model|module|net|network|encoder|decoder|backbone)\w*$")
#: a saved payload that is the state of something small (a loader, a sampler, a scheduler, the RNG)
_SMALL_STATE = re.compile(r"(?i)(loader|sampler|sched|rng|random|scaler|tracker)[\w.]*state")
#: an object that walks the data (its saved state is where it is: a position and a permutation)
_DATA_RECEIVER = re.compile(r"(?i)(^|_)(iter|iterator|loader|dataloader|sampler)$")
_MODEL_STATE = re.compile(r"(?i)model|optim|ema|weight|param|module|net\b")
#: a variable named for a small file: a checkpoint's metadata, a symlink to it, a config
_SMALL_FILE_NAME = re.compile(r"(?i)(^|_)(metadata|symlink|config|cfg)(_|$)")
_SMALL_DOWNLOAD = (".json", ".txt", ".yaml", ".yml", ".md", ".model", ".tiktoken")
_FIGURE = (".pdf", ".png", ".jpg", ".jpeg", ".svg", ".gif")
_TEXT_FILE = (".json", ".yaml", ".yml", ".txt", ".csv", ".md", ".log")


#: a variable named for a data set's files or a node's scratch space (a copy there moves the training data)
_DATA_PATH = re.compile(r"(?i)^(data|dataset|scratch|local_scratch|shard)s?(_(dir|path|file|root))?$|^(dest|src|dst)_"
                        r"(data|dataset)\w*$")
#: calls that build what a run configuration names (Hydra's, the latent-diffusion family's, OmegaConf-driven code)
_INSTANTIATE = frozenset({"instantiate", "instantiate_from_config", "get_obj_from_str", "get_class", "get_method"})
#: a path that names a checkpoint (a copy of it is a copy of the model's weights; `score_sde/models` is source)
_CHECKPOINT_PATH = re.compile(r"(?i)ckpt|checkpoint|resume|weights?\b|\.pth?\b|\.bin\b|safetensors|state_dict")
#: a string that may name a module of the project (``"models.model"``): only a file that exists is read
_MODULE_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$")
#: a call that names a logger (its dotted name is usually its module's, not an import)
_LOGGER_CALL = re.compile(r"(?i)^(get_?logger|setup_logger|Logger)$")
#: a sample written out: one image, clip or sound (its generation, if any, is the long work, not its write)
_MEDIA = re.compile(r"(^|_)(img|imgs|image|images|im|pil|grid|frame|frames|picture|video|videos|gif|audio|wav|mp4|"
                    r"spectrogram|spectrograms)$")   # (audiocraft's save_spectrograms: a PDF of one sample's)


def _writes_a_figure(call: ast.Call) -> bool:
    """A save whose file name (a literal among its arguments) is an image or a PDF, or a save of one image,
    clip or sound (``image.save(path)``, diffusers' ``export_to_video(frames, path)``)."""
    recv, name = call_name(call)
    if _MEDIA.search(recv.rsplit(".", 1)[-1].lower()) or any(_MEDIA.search(p) for p in _parts(name)):
        return True
    if _MEDIA_LIBRARY.match(recv):
        return True   # audiolm's `torchaudio.save(filename, recon, sample_hz)`: one sound written out
    return _names_a_file(call, _FIGURE)


#: libraries that write sounds, images and videos (a save through them writes a sample, not a checkpoint)
_MEDIA_LIBRARY = re.compile(r"^(torchaudio|soundfile|sf|imageio|iio|imageio\.v\d|cv2|mediapy|"
                            r"scipy\.io\.wavfile|wavfile|torchvision\.io|skimage\.io|io)$")


#: a local name that holds a path
_PATH_NAME = re.compile(r"(?i)(path|file|fname|filename|dest)$")


def _names_a_file(call: ast.Call, kinds: tuple[str, ...]) -> bool:
    """Is a literal among the call's arguments a file name with one of these endings? A save to a text file
    (``_TEXT_FILE``: THUMT's ``export_params(params.output, "params.json", params)``) writes no model."""
    return any(_spells_a_file(a, kinds) for a in [*call.args, *(k.value for k in call.keywords)])


def _spells_a_file(node: ast.AST, kinds: tuple[str, ...]) -> bool:
    """Does a string literal in the expression end with one of these endings (``f"{out}/info{suffix}.json"``)?"""
    return any(isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.lower().endswith(kinds)
               for n in subtree(node))


def _lookup_name(name: str) -> bool:
    """``get_latest_checkpoint``, ``find_last_ckpt``, ``is_eval_step``, ``remove_old_checkpoints``,
    ``load_checkpoint``, speechbrain's ``_new_checkpoint_dirpath``: a name that says it looks something up, answers a
    question, deletes or reads back, however much its object is long work to make; or makes a name (HRM's
    ``coolname.generate_slug(2)``)."""
    name = name.lstrip("_")   # physicsnemo's `_get_checkpoint_filename`
    if name.rsplit(".", 1)[-1] in _DOWNLOADS:
        return False   # `get_file` fetches the file
    return name.startswith(("is_", "has_", "get_", "set_", "should_", "find_", "list_", "latest_", "last_",
                            "detect_", "can_", "register_", "ensure_", "load_", "restore_", "resume_", "contains_",
                            "exists_")) \
        or _parts(name)[-1:] in (["id"], ["name"], ["path"], ["dir"], ["key"], ["seed"], ["uuid"], ["filename"],
                                 ["slug"], ["dirpath"], ["filepath"], ["dirname"],
                                 # Accelerate's `test_type(data)`, a predicate handed to recursively_apply (blind
                                 # round 109: three false reports on the dispatcher's batch structure)
                                 ["type"], ["types"], ["kind"], ["dtype"]) \
        or _parts(name)[:1] in (["clean"], ["cleanup"], ["remove"], ["delete"], ["rm"], ["prune"], ["purge"],
                                ["rotate"])   # open-instruct's clean_last_n_checkpoints: an rmtree of old ones


def _small_save_name(name: str) -> bool:
    """``save_config``, ``save_args``, ``write_metadata_json``: a name that says it writes a small file;
    transformers' ``custom_object_save`` copies the source file that defines a custom model (verl)."""
    return bool(_SMALL_FILE_PARTS.intersection(_parts(name))) or name == "custom_object_save"


def bound_arguments(call: ast.Call, fn: ast.FunctionDef | ast.AsyncFunctionDef, *,
                    with_defaults: bool = False) -> list[tuple[str, ast.expr]]:
    """(parameter, value) for each parameter the call gives (a method's ``self`` left out when called through
    an attribute); ``with_defaults``: and the default of each one it leaves out, unless ``**kwargs`` may hide
    it."""
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    if params[:1] in (["self"], ["cls"]) and isinstance(call.func, ast.Attribute):
        params = params[1:]
    given = [(params[i], a) for i, a in enumerate(call.args[:len(params)])] + \
        [(kw.arg, kw.value) for kw in call.keywords if kw.arg]
    if with_defaults and not any(kw.arg is None for kw in call.keywords):
        named = {p for p, _ in given}
        given += [(p, v) for p, v in _param_defaults(fn) if p not in named]
    return given


def _tests_set(term: ast.AST, names: frozenset[str]) -> bool:
    """Is the term ``p`` or ``p is not None`` for a name in ``names`` (false when ``p`` is None, False or 0)?"""
    if isinstance(term, ast.Name):
        return term.id in names
    return isinstance(term, ast.Compare) and isinstance(term.left, ast.Name) and term.left.id in names \
        and len(term.ops) == 1 and isinstance(term.ops[0], ast.IsNot) and _const(term.comparators[0]) is None \
        and isinstance(term.comparators[0], ast.Constant)


def _tests_not(term: ast.AST, names: frozenset[str]) -> bool:
    """Is the term ``not p`` for a name in ``names`` (false when ``p`` is True)?"""
    return isinstance(term, ast.UnaryOp) and isinstance(term.op, ast.Not) and isinstance(term.operand, ast.Name) \
        and term.operand.id in names


def _given_params(call: ast.Call, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[str]:
    """The parameters the call gives a value that is not a constant (so not None)."""
    return frozenset(p for p, v in bound_arguments(call, fn) if not isinstance(v, ast.Constant))


def _tests_unset(term: ast.AST, names: frozenset[str]) -> bool:
    """Is the term ``p is None`` for a name in ``names`` (false when ``p`` is given; ``not p`` is not: a given
    epoch can be 0)?"""
    return isinstance(term, ast.Compare) and isinstance(term.left, ast.Name) and term.left.id in names \
        and len(term.ops) == 1 and isinstance(term.ops[0], ast.Is) and isinstance(term.comparators[0], ast.Constant) \
        and term.comparators[0].value is None


def _not_distributed_call(call: ast.Call, fn: ast.AST) -> bool:
    """Does the call give the function's rank parameter -1, "not a distributed run" (YOLOv9's validation
    ``create_dataloader(..., rank=-1)``, whose ``torch_distributed_zero_first(rank)`` then skips its barriers)?"""
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    # (YOLOv9's val.py leaves create_dataloader's rank at its -1 default)
    return any(_is_rank_name(p) and _const(v) == -1 and not isinstance(_const(v), bool)
               for p, v in bound_arguments(call, fn, with_defaults=True))


#: the answer of a question about other files asked outside a project
_NO_NAMES: frozenset[str] = frozenset()


def _is_rank_name(name: str) -> bool:
    last = name.rsplit(".", 1)[-1].lower()
    # (``rank_in_group``: this process's rank in a vLLM-style GroupCoordinator, FastVideo's
    # ``world_group.rank_in_group``)
    return bool(_RANK_PART.search(last)) and not _NOT_RANK.search(last) or last == "rank_in_group"


#: the size of the run, 1 when it is not distributed
_WORLD_SIZE_NAME = re.compile(
    r"(?i)^(get_)?(world_size|world|num_processes|num_procs|nprocs|n_gpus?|num_gpus|ngpus?|gpus?)$")
#: a flag that the run is distributed
_DISTRIBUTED_FLAG = re.compile(r"(?i)^(is_)?(distributed|ddp|multi_?gpu|use_ddp|use_distributed)$")


def _tests_single_process(test: ast.AST) -> bool:
    """Does the test hold only in a run of one process: ``RANK == -1``, ``world_size == 1``, ``not args.distributed``,
    ``not dist.is_initialized()`` (alone or as one term of an ``and``)?"""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_tests_single_process(v) for v in test.values)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = test.operand
        if isinstance(inner, ast.Call):
            return call_name(inner)[1] == "is_initialized"
        return isinstance(inner, (ast.Name, ast.Attribute)) \
            and bool(_DISTRIBUTED_FLAG.match(dotted(inner).rsplit(".", 1)[-1]))
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        sides = [test.left, test.comparators[0]]
        names = [call_name(x)[1] if isinstance(x, ast.Call) else dotted(x).rsplit(".", 1)[-1] for x in sides]
        consts = [_const(x) for x in sides]
        op = test.ops[0]
        if isinstance(op, ast.Eq) and -1 in consts and any(_is_rank_name(n) for n in names if n):
            return True
        if _WORLD_SIZE_NAME.match(names[0] or ""):   # `world_size == 1`, `dist.get_world_size() < 2`
            return isinstance(op, (ast.Eq, ast.LtE)) and consts[1] == 1 or isinstance(op, ast.Lt) and consts[1] == 2
    return False


def _is_main_flag_name(name: str) -> bool:
    last = name.rsplit(".", 1)[-1]
    if last in ("should_save", "should_log") and name.rsplit(".", 2)[-2:-1] == ["control"]:
        # HF's TrainerControl flags (`self.control.should_save`), set alike on every rank by the callbacks; the
        # main-process flags are the TrainingArguments' (`args.should_save`)
        return False
    # (a bare `zero` is a ZeRO stage: Infinity's `self.zero`, `using_ema = ema_ratio != 0 and zero == 0`)
    return last in _MAIN_EXTRA or bool(_MAIN_FLAG.match(last.lower())) and last.lower().lstrip("_") != "zero"


def _const(node: ast.AST) -> object:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        return -node.operand.value if isinstance(node.operand.value, (int, float)) else None
    return ...


def target_names(target: ast.AST) -> list[str]:
    """The dotted names an assignment target binds (``a, self.b = ...`` -> ``['a', 'self.b']``)."""
    if isinstance(target, (ast.Name, ast.Attribute)):
        return [dotted(target)]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for elt in target.elts for n in target_names(elt)]
    if isinstance(target, ast.Starred):
        return target_names(target.value)
    return []


def assigned_pairs(target: ast.AST, value: ast.AST) -> list[tuple[ast.AST, ast.AST]]:
    """Each target of an assignment with the value it gets: ``a, b = x, y`` pairs ``a`` with ``x``; with
    ``*rest`` on the right (``a, b, c = x, *pair``), the names it fills get ``rest``; anything else pairs the
    whole target with the whole value."""
    if not (isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List))) \
            or any(isinstance(t, ast.Starred) for t in target.elts):
        return [(target, value)]
    stars = [i for i, v in enumerate(value.elts) if isinstance(v, ast.Starred)]
    if not stars and len(target.elts) == len(value.elts):
        return list(zip(target.elts, value.elts, strict=True))
    if len(stars) == 1 and len(value.elts) - 1 <= len(target.elts):
        i = stars[0]
        after = len(value.elts) - i - 1
        star = value.elts[i].value   # type: ignore[attr-defined]
        middle = target.elts[i:len(target.elts) - after]
        return (list(zip(target.elts[:i], value.elts[:i], strict=True)) + [(t, star) for t in middle]
                + list(zip(target.elts[len(target.elts) - after:], value.elts[i + 1:], strict=True)))
    return [(target, value)]


@dataclass(frozen=True)
class Site:
    """Where something happens: a line, and a short label such as ``dist.barrier()``."""

    line: int
    label: str
    #: for long work: ``"logging"`` when it is a push to a logging service, ``"service"`` when it starts a run of
    #: one (``wandb.init()``: a note), ``"save"`` when it is a checkpoint
    #: written on this rank (long for a large model only), else ``"work"``; for a collective:
    #: ``"gathers shards"`` for a call that is a collective because the model is sharded (a DCP state-dict
    #: getter, a sharded model's forward, DeepSpeed's and Accelerate's checkpoint saves)
    kind: str = "work"
    #: the file, when it is not the one being read (a function of another file of the project)
    path: str = ""
    #: for a call of a function of this file that reaches a collective: the line of that collective
    reaches: int = 0
    #: reached by the next pass of a base class's loop (no call in the script stands for it)
    by_base: bool = False
    #: for a call that reaches a collective through other calls (:func:`reach_site`): the call itself, and the calls
    #: it goes through, each with where it is, ending with the collective
    head: str = ""
    via: tuple[tuple[str, str], ...] = ()
    #: for a call that is a collective only under some launch configurations the project does not ship: why a
    #: finding of it is a note (see :data:`ACCELERATE_LOCAL_NOTE`), else ``""``
    note: str = ""

    @property
    def at(self) -> str:
        """``line 12``, or ``train.py:12`` in another file."""
        return f"{self.path}:{self.line}" if self.path else f"line {self.line}"


def _builds_with_cls(fn: ast.FunctionDef) -> bool:
    """Is ``fn`` a factory classmethod, one that builds an object of its class with ``cls(...)``?"""
    return any(dotted(d) == "classmethod" for d in fn.decorator_list) and any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "cls" for n in walk_local(fn))


#: how a Lightning log reduced once at the epoch's end is said (see SourceFacts._logged_per_epoch): how many times a
#: rank calls it does not matter, so the rules about counts (uneven-collective-count, exception-on-one-rank) leave
#: what they find through it alone (lint.api drops them by this label)
EPOCH_SYNC = "(Lightning all-reduces the value over the ranks once, at the epoch's end)"
#: Lightning's per-batch hooks whose `log` defaults to on_step=False (a rank may skip some of their calls; not the
#: epoch-end hooks, called once an epoch: a rank that skips a log there has no value under that name to reduce, nougat)
_EVAL_BATCH_HOOK = re.compile(r"^((validation|test|predict)_step|on_(validation|test|predict)_batch_(start|end))$")
_EPOCH_END_HOOK = re.compile(r"_epoch_(start|end)$")


def reach_site(line: int, label: str, inner: Site, **kw: object) -> Site:
    """The site of a call ``label`` that reaches ``inner`` through other calls, said in one line: ``label (which
    reaches C at X, through A at Y and B at Z)`` instead of one parenthesis inside another (a line without its file
    is in the file of the call before it)."""
    steps = [(inner.head, inner.at), *inner.via] if inner.head else [(inner.label, inner.at)]
    where = ""
    for i, (call, at) in enumerate(steps):
        if at.startswith("line ") and where:
            steps[i] = (call, f"{where}:{at[5:]}")
        elif ":" in at:
            where = at.rsplit(":", 1)[0]
    (last, last_at), through = steps[-1], steps[:-1]
    via = " and ".join(f"{c} at {a}" for c, a in through)
    text = f"{label} (which reaches {last} at {last_at}" + (f", through {via})" if via else ")")
    return Site(line, text, head=label, via=tuple(steps), **kw)   # type: ignore[arg-type]


_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def number_nodes(tree: ast.AST) -> None:
    """Put a parsed tree's nodes in one list, in the order :func:`walk_local` has always visited them (a node,
    then its children's subtrees from the last to the first), and mark each with its slice of it (its
    subtree). The checks walk the same statements again and again: walking was two fifths of the lint's time
    on the largest projects of the corpus. (The shared context nodes, ``Load()`` and the operators, are
    leaves: their slice is themselves wherever they were marked last.)"""
    order: list[ast.AST] = []
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        n, done = stack.pop()
        if done:
            n._lint_end = len(order)
            continue
        n._lint_at, n._lint_order = len(order), order
        order.append(n)
        stack.append((n, True))
        stack.extend((c, False) for c in ast.iter_child_nodes(n))


def subtree(node: ast.AST) -> list[ast.AST]:
    """The node and every node below it, as ``ast.walk`` gives them but in :func:`number_nodes`'s order
    (one slice of a numbered tree: no walk at all)."""
    d = node.__dict__
    if "_lint_end" not in d:
        return list(ast.walk(node))
    return d["_lint_order"][d["_lint_at"]:d["_lint_end"]]


#: what an evaluation hands back (metrics, a score, a validation loss): a value a decision is made on, not a resource
#: (SimpleTuner's ``_get_hub_executor()``, None where pushing in the background is off, main process or not)
_EVAL_RESULT = re.compile(r"(?i)metric|result|score|loss|acc|eval|valid|val_|stat|perf|fitness|best")


def walk_local(node: ast.AST, skip: frozenset[int] = frozenset()) -> Iterable[ast.AST]:
    """``ast.walk`` that does not enter nested functions, classes or lambdas (nor the nodes whose ids
    are in ``skip``); without ``skip``, in a numbered tree, a list kept on the node."""
    d = node.__dict__
    if skip or "_lint_end" not in d:
        return _walk_local(node, skip)
    got = d.get("_lint_local")
    if got is None:
        order, i, end = d["_lint_order"], d["_lint_at"] + 1, d["_lint_end"]
        got = [node]
        while i < end:
            n = order[i]
            if isinstance(n, _NESTED):
                i = n._lint_end
            else:
                got.append(n)
                i += 1
        d["_lint_local"] = got
    return got


def _walk_local(node: ast.AST, skip: frozenset[int]) -> Iterator[ast.AST]:
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        for child in ast.iter_child_nodes(n):
            if not isinstance(child, _NESTED) and id(child) not in skip:
                stack.append(child)


class SourceFacts:
    """Facts about one parsed file (see the module docstring). Build with :meth:`parse`."""

    def __init__(self, tree: ast.Module, path: str) -> None:
        self.tree = tree
        self.path = path
        self.functions: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
        self.parents: dict[int, tuple[list[ast.stmt], int, ast.AST]] = {}
        self.calls_to: dict[str, list[ast.stmt]] = {}
        self.rank_values: set[str] = set()
        self.rank_flags: set[str] = set()
        self.sharded: set[str] = set()
        #: names holding an Accelerator / PartialState / Fabric: their gather/reduce/broadcast are collective
        self.dist_objects: set[str] = set()
        #: names holding an optimizer that shards its state over the ranks: its step() is a collective
        self.zero_optimizers: set[str] = set()
        self.modules: dict[str, str] = {}     # local name -> module it stands for
        self.imported: dict[str, str] = {}    # local name -> "module.name" it was imported as
        self.argparse_defaults: dict[str, object] = {}
        self.data_parallel = False
        #: does the file say it may run sharded (DeepSpeed, FSDP, ZeRO-3)? Accelerate's save_state and
        #: get_state_dict are collectives then; otherwise only if the launch config says so, and the
        #: finding says that (set by :meth:`parse` from the text)
        self.may_shard = True
        #: does the file say its model may be large (see _BIG_MODEL)? A checkpoint save is long work then
        self.big_model = True
        #: ... by more than sharded training alone (see _BIG_MODEL_NAMED)
        self.big_model_named = True
        #: the ways of sharding the file names (see SHARDING_MODES)
        self.shard_modes: frozenset[str] = frozenset(SHARDING_MODES)
        #: does the file say parameters are partitioned across the ranks (ZeRO-3, FSDP)?
        self.partitioned = True
        #: local name -> (module, name in it or "" for the module itself, relative-import level)
        self.import_from: dict[str, tuple[str, str, int]] = {}
        #: (module, relative-import level) of each ``from module import *``
        self.star_imports: list[tuple[str, int]] = []
        #: modules named by a string handed to a call (``importlib.import_module("models.model")``, Palette's
        #: ``init_obj(opt, default_file_name="models.model")``): imports made at run time
        self.lazy_imports: list[str] = []
        #: the other files of the user's project, when linted as part of one (see lint/project.py)
        self.project: Project | None = None
        #: names holding an object on some ranks only, ``None`` on the others (see _index_rank_objects)
        self.rank_objects: set[str] = set()
        #: names a rank-only branch in a loop updates, kept apart on each rank from then on (a running best)
        self.rank_diverged: dict[str, tuple[int, ast.AST | None]] = {}
        #: of those, the results of a function of this file that returns nothing on some ranks, and the parameters
        #: they are handed to (a value there: ``if not val_metrics:`` tests the rank too), each with that function
        self.rank_results: dict[str, str] = {}
        self._collective: dict[str, Site | None] = {}
        self._unless_active: set[tuple[str, frozenset[str], frozenset[str]]] = set()   # recursion guard
        self._long: dict[str, Site | None] = {}
        self._returns_flag: set[str] = set()
        self._stmt_collective: dict[int, Site | None] = {}
        self._stmt_collective_gathers: dict[int, Site | None] = {}   # the same, with parameter gathers counted
        self._stmt_sync: dict[int, Site | None] = {}
        self._stmt_sync_gathers: dict[int, Site | None] = {}
        #: does the file make a process-shared barrier (``torch.multiprocessing.Barrier``)? Its ``wait()`` is where
        #: every rank meets with no process-group timeout (set by :meth:`parse` from the text)
        self.cpu_barriers = False
        self._waiting: list[tuple[int, int]] | None = None
        self._adapter_lines: list[tuple[int, int]] | None = None
        #: results the checks compute once per file (``(check, key) -> value``), kept with the file so that they
        #: live exactly as long as it does
        self.memo: dict[tuple[str, str], object] = {}
        self._wraps: list[tuple[ast.AST | None, int]] = []
        #: ids of calls whose result a later save of the same function writes (open_clip's
        #: ``checkpoint_dict = save_checkpoint(...)`` then ``torch.save(checkpoint_dict, path)``)
        self._payloads: set[int] = set()
        #: every node of the tree, in ``ast.walk``'s order (breadth first: the passes over the file's
        #: assignments take them in this order): walked once here, read by every check
        self.nodes: list[ast.AST] = list(ast.walk(tree))
        #: the lines that start with ``finally`` (the tree has no node for the keyword), where parsed from text
        self.finally_lines: frozenset[int] = frozenset()
        #: the file picks a sharding mode in its own code (ZeRO-3, FSDP), not only through its launch configuration
        self.picks_sharding = True
        self._index()

    def _index_payloads(self, assigns: list[ast.Assign], saves: list[ast.Call]) -> None:
        by_name: dict[str, list[ast.Assign]] = {}
        for node in assigns:
            if isinstance(node.value, ast.Call) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                by_name.setdefault(node.targets[0].id, []).append(node)
        for save in saves:
            arg = save.args[0]
            assert isinstance(arg, ast.Name)
            makers = [a for a in by_name.get(arg.id, []) if a.lineno < save.lineno]
            if makers:
                scope = self._scope_of(save.lineno)
                for maker in makers:
                    if self._scope_of(maker.lineno) is scope:
                        self._payloads.add(id(maker.value))

    @classmethod
    def parse(cls, text: str, path: str = "<string>") -> SourceFacts:
        """Parse ``text``; a ``SyntaxError`` propagates (the caller reports it as a bad file)."""
        with warnings.catch_warnings():
            # the user's code, not ours: an invalid escape in their string is not the lint's to report
            warnings.simplefilter("ignore")
            tree = ast.parse(text, filename=path)
        number_nodes(tree)
        facts = cls(tree, path)
        facts.may_shard = bool(_MAY_SHARD.search(text))
        facts.big_model = bool(_BIG_MODEL.search(text))
        facts.big_model_named = facts.big_model and bool(_BIG_MODEL_NAMED.search(text))
        facts.shard_modes = frozenset(m for m, words in SHARDING_MODES.items() if facts.big_model and words.search(text))
        facts.partitioned = bool(_PARTITIONED.search(text))
        facts.cpu_barriers = bool(_CPU_BARRIER.search(text))
        facts.finally_lines = frozenset(text.count("\n", 0, m.start()) + 1 for m in _FINALLY.finditer(text))
        facts.picks_sharding = bool(_CODE_SHARDS.search(text))
        return facts

    # -- indexing ---------------------------------------------------------------------------------------
    def _index(self) -> None:
        assigns: list[tuple[list[str], ast.AST]] = []
        wrap_calls: list[ast.Call] = []
        ifs: list[ast.If] = []
        plain: list[ast.Assign] = []
        saves: list[ast.Call] = []
        self._index_block(self.tree.body, self.tree)
        for node in self.nodes:
            if isinstance(node, ast.If):
                ifs.append(node)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions.setdefault(node.name, []).append(node)
            elif isinstance(node, ast.Import):
                for a in node.names:
                    self.modules[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
                    # `import training.training_loop` (EDM2), then `training.training_loop.training_loop(...)`:
                    # the dotted name is the receiver of its calls
                    self.import_from[a.asname or a.name] = (a.name, "", 0)
            elif isinstance(node, ast.ImportFrom):
                for a in node.names:
                    if a.name == "*":
                        self.star_imports.append((node.module or "", node.level))
                        continue
                    if node.module:
                        full = f"{node.module}.{a.name}"
                        self.imported[a.asname or a.name] = full
                        self.modules[a.asname or a.name] = full
                    self.import_from[a.asname or a.name] = (node.module or a.name, a.name if node.module else "",
                                                            node.level)
            elif isinstance(node, ast.Assign):
                assigns.append(([t for tgt in node.targets for t in target_names(tgt)], node.value))
                plain.append(node)
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
                assigns.append((target_names(node.target), node.value))
            elif isinstance(node, ast.Call):
                self._index_call(node)
                if call_name(node)[1] == "init_process_group":
                    # DGL's `init_process_group(..., rank=proc_id)`: whatever name the rank is given is the rank
                    self.rank_values.update(kw.value.id for kw in node.keywords
                                            if kw.arg == "rank" and isinstance(kw.value, ast.Name))
                # (a logger's name is no module: d2go's `logging.getLogger("d2go.tools.train_net")`)
                for arg in [*node.args, *(kw.value for kw in node.keywords)] if not _LOGGER_CALL.search(
                        call_name(node)[1]) else []:
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and (
                            _MODULE_PATH.match(arg.value) or call_name(node)[1] in ("import_module", "__import__")
                            and arg.value.isidentifier()) and arg.value not in self.lazy_imports:
                        self.lazy_imports.append(arg.value)
                if dotted(node.func).rsplit(".", 1)[-1] in _WRAPPERS:
                    wrap_calls.append(node)
                if node.args and isinstance(node.args[0], ast.Name) and "save" in _parts(call_name(node)[1]):
                    saves.append(node)
            elif isinstance(node, (ast.Name, ast.Attribute)):
                name = node.id if isinstance(node, ast.Name) else node.attr
                if name in DATA_PARALLEL_NAMES:
                    self.data_parallel = True
        self._wraps = [(self._scope_of(c.lineno), c.lineno) for c in wrap_calls]
        for defs in self.functions.values():
            top = [d for d in defs if self.parents.get(id(d), (None, None, None))[2] is self.tree]
            # a module-level function defined twice is its last definition (Otter's train_utils.py has two
            # `save_checkpoint`s: Python keeps the second)
            for shadowed in top[:-1]:
                defs.remove(shadowed)
        self._index_payloads(plain, saves)
        if any(m.startswith(("deepspeed", "accelerate", "horovod", "lightning", "pytorch_lightning"))
               or m.rsplit(".", 1)[-1] in DATA_PARALLEL_NAMES for m in self.modules.values()):
            self.data_parallel = True
        # values follow plain assignments: two passes reach ``a = rank; b = a == 0``
        for _ in range(3):
            for names, value in assigns:
                if not names:
                    continue
                if self.is_rank_value(value):
                    self.rank_values.update(n for n in names if not _NOT_RANK.search(n.rsplit(".", 1)[-1].lower()))
                elif self.is_rank_condition(value):
                    self.rank_flags.update(names)
        for names, value in assigns:
            if isinstance(value, ast.Call) and SHARDING_WRAPPERS.search(dotted(value.func)):
                # `model, optimizer, _, scheduler = deepspeed.initialize(...)` (FunASR): the engine is the
                # sharded model; the optimizer, the loader and the scheduler it hands back are not
                self.sharded.update(n for n in names if len(names) == 1 or not _NOT_A_MODEL.search(n.rsplit(".", 1)[-1]))
            if isinstance(value, ast.Call) and DIST_OBJECT_CLASSES.search(dotted(value.func)):
                self.dist_objects.update(names)
            if isinstance(value, ast.Call) and _ZERO_OPTIMIZERS.search(dotted(value.func)):
                self.zero_optimizers.update(names)
        for name, defs in self.functions.items():
            for fn in defs:
                for node in walk_local(fn):
                    if isinstance(node, ast.Return) and node.value is not None and self.is_rank_condition(node.value):
                        self._returns_flag.add(name)
                if name not in self._returns_flag and self._answers_by_rank(fn):
                    self._returns_flag.add(name)
        self._index_rank_objects(ifs, plain)
        self._index_branch_flags(ifs)

    def _answers_by_rank(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        """Does the function answer only ``True`` or ``False``, and one of them under a test of the rank (speechbrain's
        ``if_main_process``: ``if int(os.environ["LOCAL_RANK"]) == 0: return True``, ``return False``)?"""
        returns = [n for n in walk_local(fn) if isinstance(n, ast.Return)]
        if len(returns) < 2 or not all(n.value is not None and isinstance(_const(n.value), bool) for n in returns):
            return False
        return any(isinstance(n, ast.If) and self.is_rank_condition(n.test)
                   and any(isinstance(b, ast.Return) for b in n.body) for n in walk_local(fn))

    def _index_rank_objects(self, ifs: list[ast.If], assigns: list[ast.Assign]) -> None:
        """Names bound to an object on some ranks only and to ``None`` everywhere else (timm's ``saver = None``;
        ``if utils.is_primary(args): saver = CheckpointSaver(...)``): ``saver is not None`` tests the rank."""
        under_rank: set[int] = set()
        for node in ifs:
            if self.is_rank_condition(node.test) and not self._each_rank_in_turn(node):
                under_rank.update(id(n) for stmt in node.body for n in subtree(stmt) if isinstance(n, ast.Assign))
        on_some: set[str] = set()
        on_all: set[str] = set()
        results: dict[str, str] = {}
        for node in assigns:
            if _const(node.value) is None:
                # se3_diffusion: `if rank not in [0, -1]: self._exp_conf.ckpt_dir = None` "to avoid saving
                # checkpoints and evaluation": `ckpt_dir is not None` is true on rank 0 only
                if id(node) in under_rank:
                    self.rank_objects.update(dotted(t) for t in node.targets if isinstance(t, (ast.Name, ast.Attribute)))
                continue
            v = node.value
            rank_exp = isinstance(v, ast.IfExp) and self.is_rank_condition(v.test) and None in (
                _const(v.body), _const(v.orelse))
            names = {t.id for t in node.targets if isinstance(t, ast.Name)}
            # an attribute set on some ranks only and nowhere else in the file keeps on the others the value the
            # object was made with (molmo PR 33: `cfg.load_path = str(latest)` under `if get_global_rank() == 0:`,
            # then `if cfg.load_path is not None: trainer.restore_checkpoint(...)` on every rank)
            # (not in a function that then sends what rank 0 set: HRM's load_synced_config, `config.checkpoint_path =
            # ...` under `if rank == 0:`, then `dist.broadcast_object_list([config], src=0)`)
            if any(isinstance(t, ast.Attribute) for t in node.targets) \
                    and not self._sends_objects(self.enclosing_function(node)):
                names |= {dotted(t) for t in node.targets if isinstance(t, ast.Attribute)
                          and isinstance(t.value, ast.Name) and t.value.id not in ("self", "cls")}
            # the result of a function of this file that returns nothing on some ranks (LibreYOLO's `_validate_epoch`:
            # `if self.is_distributed and not is_main_process(): barrier(); return None`, then the metrics)
            if isinstance(v, ast.Call) and self._none_off_rank(v) and (
                    _EVAL_RESULT.search(call_name(v)[1]) or any(_EVAL_RESULT.search(n) for n in names)):
                results.update((n, call_name(v)[1]) for n in names)
            else:
                (on_some if id(node) in under_rank or rank_exp else on_all).update(names)
        # a cache made on first use (TorchRec's `if _INTRA_PG is None: <every rank makes every group, keeps its
        # own>`): every rank binds it there, whichever branch of its body does
        lazy = {node.test.left.id for node in ifs if isinstance(node.test, ast.Compare)
                and isinstance(node.test.left, ast.Name) and len(node.test.ops) == 1
                and isinstance(node.test.ops[0], ast.Is) and _const(node.test.comparators[0]) is None
                and any(isinstance(t, ast.Name) and t.id == node.test.left.id
                        for stmt in node.body for a in subtree(stmt) if isinstance(a, ast.Assign) for t in a.targets)}
        self.rank_objects |= on_some - on_all - lazy
        # a running best kept on some ranks only (t5_11, pytorch issue 77562, collected blind in stop 50: `if rank == 0
        # and curr_val_loss < best_val_loss: best_val_loss = curr_val_loss` in the epoch loop, then `if
        # cfg.save_model and curr_val_loss < best_val_loss:` on every rank, around a barrier and an FSDP full state
        # dict): from the next pass on, the ranks compare with values of their own
        for node in ifs:
            if not self.is_rank_condition(node.test) or self.enclosing_loop(node) is None or self._each_rank_in_turn(node):
                continue
            fn = self.enclosing_function(node)
            if self._sends_objects(fn):
                continue
            for n in (n for stmt in node.body for n in subtree(stmt)):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, ast.AugAssign) else []
                self.rank_diverged.update((t.id, (n.lineno, fn)) for t in targets if isinstance(t, ast.Name)
                                          and t.id in on_all and _EVAL_RESULT.search(t.id) and not self._agreed_in(fn, t.id))
        self.rank_results = {n: fn for n, fn in results.items() if n not in on_all}
        # a parameter of a function of this file that its callers here fill with one of those (LibreYOLO's
        # `self._update_best_state(epoch, val_metrics)`, whose `if not val_metrics: return False` comes before the
        # early-stopping count)
        for node in self.nodes:
            if not (isinstance(node, ast.Call) and self.rank_results):
                continue
            for param, given in self._params_handed(node, self.rank_results):
                if param not in on_all:
                    self.rank_results.setdefault(param, self.rank_results[given])
        self.rank_objects |= self.rank_results.keys()

    def _none_off_rank(self, call: ast.Call) -> bool:
        """Does the call run a function of this file that returns nothing (``return``, ``return None``) when a
        test of the rank holds, and a value otherwise?"""
        recv, name = call_name(call)
        if recv not in ("", "self", "cls") or name in self.imported or not self.functions.get(name):
            return False
        fn = self.functions[name][0]
        returns = [n for n in walk_local(fn) if isinstance(n, ast.Return)]
        if not any(r.value is not None and _const(r.value) is not None for r in returns):
            return False
        return any(isinstance(n, ast.If) and self.is_rank_condition(n.test) and n.body
                   and isinstance(n.body[-1], ast.Return) and (n.body[-1].value is None or _const(n.body[-1].value) is None)
                   for n in walk_local(fn))

    def _index_branch_flags(self, ifs: list[ast.If]) -> None:
        """Flags given one constant under a rank test and the other elsewhere (LightZero's evaluator: ``elif
        self.task_id is None and get_rank() == 0: eval_flag = True`` / ``else: eval_flag = False``, then ``if
        eval_flag: <evaluate>``): they hold on some ranks only."""
        def consts(block: list[ast.stmt]) -> dict[str, object]:
            return {t.id: _const(st.value) for st in block if isinstance(st, ast.Assign)
                    and isinstance(_const(st.value), bool) for t in st.targets if isinstance(t, ast.Name)}
        for node in ifs:
            if not self.is_rank_condition(node.test):
                continue
            taken = consts(node.body)
            if node.orelse:
                other = consts(node.orelse)
            else:   # `flag = False` just before `if rank == 0: flag = True`
                block, i, _owner = self.parents.get(id(node), ([], 0, None))
                other = consts(block[max(0, i - 3):i])
            self.rank_flags.update(n for n, v in taken.items() if n in other and other[n] is not v)

    def _params_handed(self, call: ast.Call, names: Container[str]) -> list[tuple[str, str]]:
        """(parameter, name) for each of ``names`` the call hands to a function of this file, by position or keyword."""
        recv, name = call_name(call)
        defs = self.functions.get(name, []) if recv in ("", "self", "cls") and name not in self.imported else []
        if not defs:
            return []
        params = [a.arg for a in defs[0].args.posonlyargs + defs[0].args.args]
        params = params[1:] if recv and params[:1] in (["self"], ["cls"]) else params
        handed = [(params[i], dotted(a)) for i, a in enumerate(call.args[:len(params)])
                  if isinstance(a, (ast.Name, ast.Attribute)) and dotted(a) in names]
        return handed + [(kw.arg, dotted(kw.value)) for kw in call.keywords if kw.arg
                         and isinstance(kw.value, (ast.Name, ast.Attribute)) and dotted(kw.value) in names]

    def _agreed_in(self, fn: ast.AST | None, name: str) -> bool:
        """Is ``name`` handed to a collective in the function (``dist.broadcast(best, src=0)``), so that every rank
        holds rank 0's value after it?"""
        return any(isinstance(n, ast.Call) and call_name(n)[1] in DIST_COLLECTIVES and any(
            isinstance(a, ast.Name) and a.id == name for arg in n.args for a in ast.walk(arg))
            for n in walk_local(fn if fn is not None else self.tree))

    def _sends_objects(self, fn: ast.AST | None) -> bool:
        """Does the function (or the module, for None) send Python objects from one rank to the others
        (``broadcast_object_list``, ``scatter_object_list``)?"""
        key = ("sends_objects", str(id(fn)))
        if key not in self.memo:
            self.memo[key] = any(isinstance(n, ast.Call) and call_name(n)[1] in (
                "broadcast_object_list", "scatter_object_list", "broadcast_object")
                for n in walk_local(fn if fn is not None else self.tree))
        return bool(self.memo[key])

    def _each_rank_in_turn(self, stmt: ast.If) -> bool:
        """``for group_rank in range(n): ... if my_group_rank == group_rank: _INTRA_PG = pg`` (TorchRec): the loop
        visits every rank's value, so what the branch binds is bound on every rank, at its own pass."""
        loop = self.enclosing_loop(stmt)
        if not isinstance(loop, (ast.For, ast.AsyncFor)):
            return False
        loop_vars = {n.id for n in subtree(loop.target) if isinstance(n, ast.Name)}
        test = stmt.test
        return isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq) and any(
            isinstance(a, ast.Name) and a.id in loop_vars and self.is_rank_value(b)
            for a, b in ((test.left, test.comparators[0]), (test.comparators[0], test.left)))

    def is_rank_object(self, name: str) -> bool:
        """Does ``name`` hold an object on some ranks only and ``None`` on the others (so that ``name is not
        None`` tests the rank)? Bound so in this file, or handed in by a caller in another file."""
        return name in self.rank_objects or name in self._handed_rank_objects() or name in self._results_off_rank()

    def returns_none_first_off_rank(self, name: str) -> bool:
        """Does the function of this file start by returning nothing under a test of the rank (AlgoPerf's
        ``get_log_dir``: ``if RANK != 0: return``), and return a value further on?"""
        fn = next(iter(self.functions.get(name, [])), None)
        if fn is None:
            return False
        body = fn.body[1:] if fn.body and isinstance(fn.body[0], ast.Expr) and isinstance(_const(fn.body[0].value), str) \
            else fn.body
        first = body[0] if body else None
        if len(body) == 1 and isinstance(first, ast.Return) and isinstance(first.value, ast.Name):
            return self._global_set_on_some_ranks(first.value.id)
        return isinstance(first, ast.If) and self.is_rank_condition(first.test) and isinstance(first.body[-1], ast.Return) \
            and (first.body[-1].value is None or _const(first.body[-1].value) is None) and any(
                isinstance(n, ast.Return) and n.value is not None and _const(n.value) is not None for n in walk_local(fn))

    def _global_set_on_some_ranks(self, name: str) -> bool:
        """Is ``name`` a global of this file, ``None`` at first, that its functions set to something else only under a
        test of the rank (Primus' ``_GLOBAL_MLFLOW_WRITER``, set where ``args.rank == (args.world_size - 1)``: its
        getter gives ``None`` on every other rank, and ``if mlflow_writer is None: return`` before a barrier left those
        ranks out of it; fix 1e0f3b8, collected blind in stop 52)?"""
        if not any(isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)
                   and isinstance(n.value, ast.Constant) and n.value.value is None for n in self.tree.body):
            return False
        sets = [n for defs in self.functions.values() for fn in defs for n in walk_local(fn)
                if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)
                and not (isinstance(n.value, ast.Constant) and n.value.value is None)]

        def under_rank_test(stmt: ast.AST) -> bool:
            node = stmt
            while id(node) in self.parents:
                block, _i, owner = self.parents[id(node)]
                if isinstance(owner, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    return False
                if isinstance(owner, ast.If) and block is owner.body and self.is_rank_condition(owner.test):
                    return True
                node = owner
            return False
        return bool(sets) and all(under_rank_test(n) for n in sets)

    def _results_off_rank(self) -> Set[str]:
        """Names bound to what a function of another file of the project gives back on some ranks only (see
        :meth:`returns_none_first_off_rank`), and the parameters of this file's functions that its calls here
        fill with them, call after call (AlgoPerf, PR 251, collected blind in stop 50: ``logging_dir_path =
        logger_utils.get_log_dir(...)``, handed to ``score_submission_on_workload(..., log_dir)``, then to
        ``train_once(..., log_dir)``, whose ``if log_dir is not None:`` saves a checkpoint, with a barrier, on rank
        0 only). None outside a project."""
        key = ("results_off_rank", "")
        if self.project is None:
            return _NO_NAMES
        if key not in self.memo:
            out: set[str] = set()
            self.memo[key] = out
            for node in self.nodes:
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                    ext = self.external(*call_name(node.value))
                    if ext is not None and ext[0].returns_none_first_off_rank(ext[1]):
                        out.update(t.id for t in node.targets if isinstance(t, ast.Name))
            for _ in range(3):
                grown = False
                for node in self.nodes if out else ():
                    if isinstance(node, ast.Call):
                        handed = {param for param, _given in self._params_handed(node, out)}
                        grown |= bool(handed - out)
                        out |= handed
                if not grown:
                    break
        return self.memo[key]   # type: ignore[return-value]

    def _handed_rank_objects(self) -> Set[str]:
        """Parameters of this file's functions and classes that a caller in another file of the project fills
        with one of its rank objects, and the attributes ``__init__`` keeps them in (XMem: ``logger`` made
        under ``if local_rank == 0``, then ``XMemTrainer(config, logger=logger)``; the trainer's ``if
        self.logger is not None: self.save_checkpoint(it)`` runs on rank 0 only)."""
        return self._handed("handed_rank_objects", lambda other, a: dotted(a) in other.rank_objects,
                            lambda other: bool(other.rank_objects))

    def _handed_rank_values(self) -> Set[str]:
        """Parameters of this file's functions and classes that a caller in another file of the project fills
        with one of its rank values, and the attributes ``__init__`` keeps them in (PELICAN: ``device_id =
        int(os.environ["LOCAL_RANK"])``, then ``Trainer(..., device_id, ...)``; the trainer's ``if
        self.device_id <= 0:`` tests the rank)."""
        return self._handed("handed_rank_values", lambda other, a: other.is_rank_value(a))

    def _handed_rank_flags(self) -> Set[str]:
        """... that a caller fills with a test true on some ranks only, a call too (VAR: `VARTrainer(...,
        is_visualizer=dist.is_visualizer(), ...)`, whose `is_visualizer()` is `__rank == 0`; the trainer's `if ... and
        self.is_visualizer:` tests the rank)."""
        return self._handed("handed_rank_flags", lambda other, a: other.is_rank_condition(a)
                            and not _STAGE_FLAG.search(ast.unparse(a)), calls=True)

    def _handed(self, what: str, counts: Callable[[SourceFacts, ast.expr], bool],
                worth: Callable[[SourceFacts], bool] = lambda other: True, calls: bool = False) -> Set[str]:
        """The parameters (and the attributes ``__init__`` keeps them in) that callers in other files fill with an
        argument ``counts`` accepts; none outside a project (asked for every name while the file is indexed: no new
        set each time)."""
        key = (what, "")
        if self.project is None:
            return _NO_NAMES
        if key not in self.memo:
            out: set[str] = set()
            self.memo[key] = out
            classes = {n.name: n for n in self.tree.body if isinstance(n, ast.ClassDef)}
            for other, call, name in self.project.calls_into(self):
                if not worth(other):
                    continue
                if name in classes:
                    fn = next((n for n in classes[name].body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                               and n.name == "__init__"), None)
                    skip = 1
                else:
                    fn, skip = next(iter(self.functions.get(name, [])), None), 0
                if fn is None:
                    continue
                params = [a.arg for a in (fn.args.posonlyargs + fn.args.args)[skip:]]
                kinds = (ast.Name, ast.Attribute, ast.Call) if calls else (ast.Name, ast.Attribute)
                handed = [params[i] for i, a in enumerate(call.args[:len(params)])
                          if isinstance(a, kinds) and counts(other, a)]
                handed += [kw.arg for kw in call.keywords
                           if kw.arg and isinstance(kw.value, kinds) and counts(other, kw.value)]
                out.update(handed)
                for node in walk_local(fn):
                    if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id in handed:
                        out.update(dotted(t) for t in node.targets if isinstance(t, ast.Attribute))
        return self.memo[key]   # type: ignore[return-value]

    def _index_block(self, block: list[ast.stmt], owner: ast.AST) -> None:
        for i, stmt in enumerate(block):
            self.parents[id(stmt)] = (block, i, owner)
            for field in ("body", "orelse", "finalbody"):
                sub = getattr(stmt, field, None)
                if isinstance(sub, list) and sub and isinstance(sub[0], ast.stmt):
                    self._index_block(sub, stmt)
            for handler in getattr(stmt, "handlers", []) or []:
                self.parents[id(handler)] = (block, i, stmt)
                self._index_block(handler.body, stmt)
            if isinstance(stmt, ast.Match):
                for case in stmt.cases:
                    self._index_block(case.body, stmt)
            for node in ast.iter_child_nodes(stmt):
                if isinstance(node, ast.Call) or isinstance(node, ast.expr):
                    for sub_node in subtree(node):
                        if isinstance(sub_node, ast.Call):
                            _recv, name = call_name(sub_node)
                            if name:
                                self.calls_to.setdefault(name, []).append(stmt)

    def _index_call(self, call: ast.Call) -> None:
        _recv, name = call_name(call)
        if name == "add_argument" and call.args:
            dest = None
            for a in call.args:
                if isinstance(a, ast.Constant) and isinstance(a.value, str):
                    if a.value.startswith("--"):
                        dest = a.value[2:].replace("-", "_")
                        break
                    if not a.value.startswith("-") and dest is None:
                        dest = a.value
            for kw in call.keywords:
                if kw.arg == "dest" and isinstance(kw.value, ast.Constant):
                    dest = str(kw.value.value)
            for kw in call.keywords:
                if kw.arg == "default" and dest:
                    self.argparse_defaults[dest] = kw.value

    # -- ranks ------------------------------------------------------------------------------------------
    def resolves_to_dist(self, receiver: str) -> bool:
        """Is ``receiver`` (a dotted name) ``torch.distributed`` or a distributed helper object?"""
        if not receiver:
            return False
        head = receiver.split(".", 1)[0]
        module = self.modules.get(head, head)
        full = module + receiver[len(head):]
        return full.startswith("torch.distributed") or bool(DIST_RECEIVERS.search(receiver)) \
            or receiver in self.dist_objects \
            or full.startswith(("horovod", "deepspeed.comm", "accelerate"))

    def _engine_group(self, receiver: str) -> bool:
        """Is ``receiver`` (or the ``.group`` of it) a group this file makes with an inference engine, vLLM's
        ``StatelessProcessGroup.create(...)`` or a ``PyNcclCommunicator`` over one? Its members are the trainer's
        process that sends the weights and the engine's workers, not the training ranks: TRL's VLLMClient
        broadcasts and waits on it from the main process only, by design (a blind run's other findings, stop 55)."""
        key = ("engine_groups", "")
        if key not in self.memo:
            made: set[str] = set()
            binds = [n for n in self.nodes if isinstance(n, ast.Assign) and len(n.targets) == 1]
            for _ in range(2):   # `pg = StatelessProcessGroup.create(...)`, then `self.communicator = pg`
                for n in binds:
                    v = n.value
                    recv, name = call_name(v) if isinstance(v, ast.Call) else ("", "")
                    if name in _ENGINE_COMMUNICATORS or name == "create" and recv.endswith("StatelessProcessGroup") \
                            or isinstance(v, (ast.Name, ast.Attribute)) and dotted(v) in made:
                        made.add(dotted(n.targets[0]))
            self.memo[key] = frozenset(made)
        return receiver.removesuffix(".group") in self.memo[key]   # type: ignore[operator]

    def _mpi_communicator(self, receiver: str) -> bool:
        """Is ``receiver`` the world's mpi4py communicator (``MPI.COMM_WORLD``, or a ``comm`` of a file that imports
        mpi4py)? Not a communicator split off it (dlio's ``leader_comm``, of the ranks that take the branch)."""
        if not receiver or not any(m.startswith("mpi4py") for m in self.modules.values()):
            return False
        head = receiver.split(".", 1)[0]
        return self.modules.get(head, "").startswith("mpi4py") and receiver.endswith(".COMM_WORLD") \
            or receiver.rsplit(".", 1)[-1] in ("comm", "mpi_comm", "world_comm", "comm_world")

    def is_rank_value(self, node: ast.AST) -> bool:
        """Does this expression hold a value that differs per rank (a rank, a rank-derived number)?"""
        if isinstance(node, (ast.Name, ast.Attribute)):
            name = dotted(node)
            return name in self.rank_values or _is_rank_name(name) or name in self._handed_rank_values()
        if isinstance(node, ast.Call):
            recv, name = call_name(node)
            if name in ("int", "str", "float") and node.args:
                return self.is_rank_value(node.args[0])
            if name in ("get", "getenv") and node.args:
                key = _const(node.args[0])
                return isinstance(key, str) and bool(_ENV_RANK.match(key))
            return _is_rank_name(name) or name in ("get_rank", "get_local_rank", "get_global_rank", "get_ordinal",
                                                   "get_node_rank", "local_process_index")
        if isinstance(node, ast.Subscript):
            key = _const(node.slice)
            # os.environ["RANK"]; a rank kept in a dict (se3_diffusion's `self.ddp_info['rank']`)
            return isinstance(key, str) and (bool(_ENV_RANK.match(key)) and "environ" in dotted(node.value)
                                              or _is_rank_name(key))
        if isinstance(node, ast.BinOp):
            return self.is_rank_value(node.left) or self.is_rank_value(node.right)
        if isinstance(node, ast.IfExp):
            # `int(os.environ['RANK']) if 'RANK' in os.environ else -1` (YOLOv7)
            return self.is_rank_value(node.body) or self.is_rank_value(node.orelse)
        return False

    def is_rank_condition(self, node: ast.AST) -> bool:
        """Is this expression true on some ranks only? (see the module docstring)"""
        if isinstance(node, ast.BoolOp):
            return any(self.is_rank_condition(v) for v in node.values)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return self.is_rank_condition(node.operand)
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Is, ast.IsNot)) \
                and isinstance(node.left, (ast.Name, ast.Attribute)) and self.is_rank_object(dotted(node.left)) \
                and _const(node.comparators[0]) is None:
            return True
        if isinstance(node, ast.Compare) and self.rank_diverged and any(isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE))
                                                                     for op in node.ops) \
                and any(isinstance(s, ast.Name) and s.id in self.rank_diverged
                        and self.rank_diverged[s.id][1] is self._scope_of(node.lineno) for s in [node.left, *node.comparators]):
            return True   # (in the function that keeps it: 3D Diffuser Actor's save_checkpoint has a parameter of its name)
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if not any(self.is_rank_value(s) or self.is_rank_condition(s) for s in sides):
                return False
            consts = []
            for s in sides:
                c = _const(s)
                if isinstance(s, (ast.List, ast.Tuple, ast.Set)):
                    consts.extend(_const(e) for e in s.elts)
                elif c is not ...:
                    consts.append(c)
            # "is this a distributed run": the same answer on every rank
            if len(node.ops) == 1 and len(consts) == 1 and (
                    isinstance(node.ops[0], (ast.GtE, ast.Lt)) and consts[0] == 0
                    or isinstance(node.ops[0], (ast.Gt, ast.LtE)) and consts[0] == -1):
                return False   # HRNet's `distributed = args.local_rank >= 0`: -1 means "not launched distributed"
            return not (consts and all(c in (-1, None) for c in consts))
        if isinstance(node, (ast.Name, ast.Attribute)):
            name = dotted(node)
            return name in self.rank_flags or _is_main_flag_name(name) or \
                (name in self.rank_values and isinstance(node, ast.Name)) or name in self._handed_rank_flags() \
                or name in self.rank_results
        if isinstance(node, ast.Call):
            recv, name = call_name(node)
            if name in self._returns_flag or _is_main_flag_name(name):
                return True
            ext = self.external(recv, name)
            if ext is not None and ext[1] in ext[0]._returns_flag:
                return True
            if ext is None and not recv and name in self.functions:
                ext = (self, name)
            return ext is not None and self._handed_a_gating_flag(node, *ext)
        return False

    def _handed_a_gating_flag(self, call: ast.Call, owner: SourceFacts, func: str) -> bool:
        """Metta's ``should_run(epoch, interval, is_master)`` (PR 1925, collected blind in stop 55): a predicate
        handed this rank's flag, which returns False at once where the flag is false (``if not (non_master_ok or
        is_master): return False``): true on the main rank only."""
        defs = owner.functions.get(func, [])
        if len(defs) != 1:
            return False
        fn = defs[0]
        params = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]
        if params[:1] in (["self"], ["cls"]):
            params = params[1:]
        handed = [params[i] for i, a in enumerate(call.args) if i < len(params) and not isinstance(a, ast.Call)
                  and self.is_rank_condition(a)]
        handed += [k.arg for k in call.keywords if k.arg and not isinstance(k.value, ast.Call)
                   and self.is_rank_condition(k.value)]
        return any(_returns_false_without(fn, p) for p in handed)

    # -- collectives ------------------------------------------------------------------------------------
    def collective_of(self, call: ast.Call, *, include_backward: bool = True) -> Site | None:
        """The collective this call implies, if any (directly or through a function of this file, called
        or, for a step function, handed to the call to run: ijepa's ``gpu_timer(train_step)``)."""
        site = self._collective_of_call(call, include_backward=include_backward)
        if site is not None:
            return site
        for arg in call.args:   # a step function handed to a timer or a runner is run by it
            if isinstance(arg, ast.Name) and STEP_NAME.search(arg.id) and arg.id in self.functions \
                    and arg.id not in self.imported:
                inner = self.function_collective(arg.id, include_backward=include_backward)
                if inner is not None:
                    return Site(call.lineno, f"{dotted(call.func)}({arg.id}) (which runs {arg.id}(), reaching "
                                             f"{inner.label} at {inner.at})")
        return None

    def _collective_of_call(self, call: ast.Call, *, include_backward: bool = True) -> Site | None:
        recv, name = call_name(call)
        if not name:
            return None
        label = f"{recv}.{name}()" if recv else f"{name}()"
        line = call.lineno
        if name in ("log", "log_dict") and any(k.arg == "sync_dist" and _const(k.value) is True for k in call.keywords) \
                and not any(k.arg == "rank_zero_only" and _const(k.value) is True for k in call.keywords):
            # Lightning's `self.log(name, value, sync_dist=True)` reduces the value over the ranks at once
            # (modelforge PR 313, collected blind in stop 40: under `if self.global_rank == 0:` in a hook)
            if self._logged_per_epoch(call):
                return Site(line, f"{recv + '.' if recv else ''}{name}(..., sync_dist=True) {EPOCH_SYNC}")
            return Site(line, f"{recv + '.' if recv else ''}{name}(..., sync_dist=True) (Lightning all-reduces the "
                              f"value over the ranks)")
        full = self.imported.get(name, "") if not recv else ""
        if recv in ("self", "cls", "") and name in self.functions and not full:
            if _not_distributed_call(call, self.functions[name][0]):
                return None
            inner = self.function_collective(name, include_backward=include_backward)
            if inner is not None and self._skipped_by_arguments(name, call, include_backward):
                return None   # evodiff's `epoch(model, False)`: its reduces run `if train:` only
            if inner is not None:
                return reach_site(line, label, inner, reaches=0 if inner.path else inner.reaches or inner.line)
            return None
        if recv not in ("self", "cls", ""):
            own = self.own_instance_class(recv)
            if own is not None and not self._calls_own_ambiguously(own, name):
                # a method of an object of a class of this file (prime-rl's `self.nccl_broadcast_sender =
                # NCCLWeightBroadcastSender(...)`, whose broadcast_weights gathers the DTensors' shards)
                inner = self._method_collective(own, name)
                if inner is not None and len(self.functions.get(name, ())) == 1 \
                        and self._skipped_by_arguments(name, call, include_backward):
                    return None   # ms-swift's `jsonl_writer.append(obj)`: its gather_object only `if gather_obj:`
                if inner is not None:
                    return reach_site(line, label, inner, reaches=0 if inner.path else inner.reaches or inner.line)
        if name == "apply" and recv[:1].isupper() and "." not in recv:
            # a torch.autograd.Function's forward, run by `apply` (weaver's `AllGather.apply(model(*inputs))`,
            # held-out round 51; contrastive learning's GatherLayer): the collectives it calls
            inner = self._autograd_forward_collective(recv)
            if inner is not None:
                return Site(line, f"{label} (whose forward reaches {inner.label} at {inner.at})", kind=inner.kind)
        if name[:1].isupper() and (not recv or recv in self.import_from) and name not in DATA_PARALLEL_NAMES:
            # an object of a class of this file or of the project, whose constructor reaches a collective
            inner = self._constructor_collective(f"{recv}.{name}" if recv else name)
            if inner is not None:
                return Site(line, f"{label} (whose __init__ reaches {inner.label} at {inner.at})", kind=inner.kind)
        if recv[:1].isupper() and "." not in recv and name[:1].islower():
            # a class's factory method, which builds the object as a constructor does (FastVideo PR 1178, collected
            # blind in stop 42: `WanPipeline.from_pretrained(...)`, inherited from ComposedPipelineBase, builds the
            # pipeline with `cls(...)` and runs its post_init(), whose warm-up is an all-to-all of the
            # sequence-parallel group); any method of a class of this file (AgileRL's `with Logger.on_main_process(
            # self.accelerator):`, a barrier around the W&B logger's write). (Not every method of an imported class:
            # Megatron-LM's `Utils.*` test helpers and static batch-size helpers made 14 new reports in its checkout,
            # mostly not hazards.)
            inner = self._method_collective(recv, name, called=True)
            if inner is not None:
                return reach_site(line, label, inner, kind=inner.kind)
        own = self._made_by_cls(recv, call) if recv.isidentifier() and recv not in ("self", "cls") else None
        if own is not None and name in self.functions:
            # a method of the object a classmethod builds (`pipe = cls(...)`, then `pipe.post_init()`); (not of any
            # object of a class of this file: MPP's `trainer.train()` is also handed to `wandb.agent` on the other
            # side, Detic's `oid_eval.run()` reaches a method of another class of that name)
            inner = self._method_collective(own, name, called=True)
            if inner is not None:
                return reach_site(line, label, inner, kind=inner.kind,
                                  reaches=0 if inner.path else inner.reaches or inner.line)
        ext = self.external(recv, name)
        if ext is None and recv.startswith("self.") and recv.count(".") == 1:
            # (for collectives only: long work found through a class guessed from a name was mostly short,
            # YOLOX's W&B image table, sockeye's config file)
            owner = self._attribute_class_file(recv[5:], name)
            ext = (owner, name) if owner is not None else None
        if ext is None and recv.isidentifier() and self._walks_plural(recv, call):
            # an element of a list named for a class of the project: AgileRL PR 586 (collected blind in stop 39),
            # `for logger in self.loggers: logger.write(report)`, whose WandbLogger.write waits for every rank
            owner = self._attribute_class_file(recv, name)
            ext = (owner, name) if owner is not None else None
        if ext is not None:
            other, func = ext
            if other.functions.get(func) and _not_distributed_call(call, other.functions[func][0]):
                return None
            inner = other.function_collective(func, include_backward=include_backward)
            if inner is not None and other._skipped_by_arguments(func, call, include_backward):
                return None
            if inner is not None and inner.kind == "gathers shards" and not self._may_shard_here():
                # physicsnemo's save_checkpoint() calls get_optimizer_state_dict() only for an FSDP or DTensor
                # model; a script that never shards its model (graphcast's DDP) reaches no collective there
                return None
            if inner is not None:
                inner = self._elsewhere(other, inner)
                return reach_site(line, label, inner, kind=inner.kind)
            return None
        if recv and self._engine_group(recv):
            return None
        if name in DIST_COLLECTIVES and (self.resolves_to_dist(recv) or full.startswith("torch.distributed")):
            return Site(line, label)
        if name in MPI_COLLECTIVES and self._mpi_communicator(recv):
            return Site(line, f"{label} (an MPI collective)")
        if full.endswith("DistributedDataParallel") or (name == "DistributedDataParallel" and recv.endswith("parallel")):
            # its constructor checks the parameters' shapes on every rank and broadcasts rank 0's values
            return Site(line, f"{label} (DDP's constructor: an all-gather and a broadcast over the group)")
        if name in UNAMBIGUOUS_METHODS and (recv or full):
            return Site(line, label)
        if name in UNAMBIGUOUS_METHODS and not recv and name in self.imported:
            return Site(line, label)
        if name in ("save_optimizer", "load_optimizer") and recv.rsplit(".", 1)[-1] == "booster" \
                and self._imports("colossalai"):
            # Open-Sora's VAE training (commit c83ee95, collected blind in stop 56): `booster.save_optimizer(...)`
            # under `if coordinator.is_master():`, the others in the barrier after it
            return Site(line, f"{label} (ColossalAI's Booster: under its ZeRO, Gemini and hybrid-parallel plugins the "
                              f"optimizer state is sharded over the ranks, and saving it gathers the shards from "
                              f"every rank)", kind="gathers shards")
        if recv and name in AMBIGUOUS_METHODS:
            low = recv.lower()
            if name in ("save_checkpoint", "load_checkpoint"):
                if "engine" in low or recv in self.sharded or ("deepspeed" in self.modules and "model" in low):
                    return Site(line, label, kind="gathers shards")
                if name == "save_checkpoint" and self._uses_lightning() and (
                        re.search(r"(^|_|\.)trainer$", low) or recv == "super()" and self.method_of_a_class_based_on(
                            self._scope_of(call.lineno), ("Trainer",))):
                    # (zetta_utils PR 969, collected blind in stop 54: a subclass of Lightning's Trainer overrides
                    # save_checkpoint under `@rank_zero_only` and calls `super().save_checkpoint(...)`)
                    # autocast PR 386, collected blind in stop 35: Lightning's Trainer.save_checkpoint ends in
                    # `self.strategy.barrier("Trainer.save_checkpoint")`, to be called on every rank
                    return Site(line, f"{label} (Lightning's Trainer.save_checkpoint ends in a barrier of every rank)")
            elif name in ("save_state", "get_state_dict"):
                # a collective under DeepSpeed/FSDP (and save_state with automatic checkpoint naming); under
                # plain DDP both are local (accelerate's accelerator.py). `accelerate launch` picks DeepSpeed
                # from its config without a change to the script (LCM issue #110: a script that never says
                # "deepspeed" hung in save_state on the main process), so it counts, said so
                if "accelerator" in low and not (name == "get_state_dict" and self._outside_zero3(call)):
                    shipped = self.project.accelerate_configs(Path(self.path)) if self.project is not None else ()
                    # get_state_dict gathers under ZeRO-3 only: under ZeRO-1/2 DeepSpeed keeps whole parameters on
                    # every rank and Accelerate copies them locally (InternVLA-M1's zero2.yaml, held-out round 80)
                    local = bool(shipped) and all(k not in _ACCELERATE_SHARDING or name == "get_state_dict"
                                                  and k == "DEEPSPEED" and z is not None and z < 3 for _n, k, z in shipped)
                    if self.may_shard and (name != "get_state_dict" or self.picks_sharding or not local):
                        return Site(line, label, kind="gathers shards")
                    if local:
                        # Wonder3D's 8gpu.yaml, TangoFlux's configs/accelerator_config.yaml: MULTI_GPU (held-out
                        # rounds 56 and 74, judged false for that reason)
                        names = ", ".join(sorted({n for n, _k, _z in shipped})[:3])
                        kinds = ", ".join(sorted({k if z is None else f"{k} (ZeRO-{z})" for _n, k, z in shipped}))
                        when = "DeepSpeed ZeRO-3" if name == "get_state_dict" else "DeepSpeed"
                        return Site(line, f"{label} (a collective when Accelerate runs {when} or FSDP; the "
                                          f"configurations the project ships, {names}, run {kinds})",
                                    kind="gathers shards", note=ACCELERATE_LOCAL_NOTE)
                    return Site(line, f"{label} (a collective when Accelerate runs DeepSpeed or FSDP, which "
                                      f"`accelerate launch` can choose from its config)", kind="gathers shards")
            elif name == "save_model":
                if "trainer" in low and not self._hf_trainer_runs_ddp():
                    return Site(line, label)
            elif name == "push_to_hub":
                # an HF Trainer's push_to_hub() saves the model first, as save_model() does: under DeepSpeed ZeRO-3
                # or FSDP an all-gather of the shards (alignment-handbook issue 59, collected blind in stop 45: under
                # `if accelerator.is_main_process:`, rank 0 in an ALLGATHER, the others in wait_for_everyone()).
                # A model's or a tokenizer's own push_to_hub() uploads what this rank holds
                if re.search(r"(^|_|\.)trainer$", low) and not self._hf_trainer_runs_ddp():
                    return Site(line, f"{label} (which saves the model first, as Trainer.save_model() does: under "
                                      f"DeepSpeed ZeRO-3 or FSDP an all-gather of the shards)", kind="gathers shards")
            elif name == "synchronize":
                if low.endswith("comm"):
                    return Site(line, label)
            elif self.resolves_to_dist(recv):
                return Site(line, label)
        # Accelerate's are decided above; a bare name imported from elsewhere (ConvNeXt's `from timm.utils
        # import get_state_dict`, which unwraps a model) is not torch's
        dcp = name in DCP_CALLS and "accelerator" not in recv.lower() \
            and not (full and not full.startswith("torch.distributed")) \
            and (not recv or recv.rsplit(".", 1)[-1][:1].isupper() or recv == "dcp" or self.resolves_to_dist(recv)) \
            and (call.args or call.keywords)   # DPR's `model_to_save.get_state_dict()`: an object's own method
        if dcp or (name in ("save", "load") and (
                "checkpoint" in recv.lower() and self.resolves_to_dist(recv) or recv in ("dcp",))):
            if dcp or recv:
                return Site(line, label, kind="gathers shards" if name in _DCP_GETTERS else "work")
        if full and not recv:
            module = full.rsplit(".", 1)[0]
            if module.startswith("torch.distributed") and (name in DIST_COLLECTIVES or name in DCP_CALLS):
                return Site(line, label, kind="gathers shards" if name in _DCP_GETTERS else "work")
            if module.startswith("torch.distributed.checkpoint") and name in ("save", "load", "async_save"):
                return Site(line, f"{label} (torch.distributed.checkpoint)")
            if HELPER_NAME.search(name) and not module.startswith(("torch.nn", "numpy", "functools")):
                return Site(line, label)
        if recv and self.sharded:
            base = recv.split(".")[-1] if recv.startswith("self.") else recv
            target = recv if recv in self.sharded else (f"self.{base}" if f"self.{base}" in self.sharded else "")
            if target and name in ("generate", "forward", "backward", "state_dict", "step") \
                    and not self._before_sharding(recv, call):
                return Site(line, f"{label} (sharded model)", kind="gathers shards")
        if not recv and name in self.sharded:
            return Site(line, f"{label} (sharded model forward)")
        if name == "full_tensor" and recv and not call.args and not call.keywords and PARAMETER_GATHERS.get():
            # a DTensor's full value: an all-gather over its mesh, on every rank that holds a shard (bergson
            # PR 376, collected blind in stop 38: FSDP's moments gathered by a helper called on rank 0 only)
            return Site(line, f"{label} (a DTensor's all-gather over its shards)", kind="gathers shards")
        if name in ("GatheredParameters", "summon_full_params") and PARAMETER_GATHERS.get() and (
                recv or name in self.imported):
            # DeepSpeed's gather of ZeRO-3 partitioned parameters (VideoLLaMA2 PR 48, collected blind in stop 43: a
            # LoRA state dict gathered through `maybe_zero_3` on rank 0 only), FSDP's of its flat parameters
            return Site(line, f"{label} (an all-gather of the sharded parameters, when they are sharded)",
                        kind="gathers shards")
        if name == "step" and recv and not call.args and (
                recv in self.zero_optimizers or _ZERO_OPTIMIZER_NAME.search(recv.rsplit(".", 1)[-1])):
            return Site(line, f"{label} (an optimizer that shards its state: each step gathers the updated "
                              f"parameters from every rank)")
        if name in ("compute", "sync") and "metric" in recv.lower() and self._imports("torchmetrics"):
            return Site(line, f"{label} (torchmetrics gathers the states of every rank)")
        if name in ("save_and_keep_only", "save_checkpoint") and recv.lower().endswith("checkpointer") \
                and self._imports("speechbrain"):
            # SpeechBrain 1.x's Checkpointer (speechbrain PR 2268, collected blind in stop 54): saving broadcasts
            # the checkpoint's folder from the main process and deleting old ones waits at barriers before and after
            return Site(line, f"{label} (SpeechBrain 1.x's Checkpointer broadcasts from the main process and waits "
                              f"at barriers: every rank must call it)")
        if name == "compute" and recv and not call.args and not call.keywords and self._metric_updated(recv, call):
            # NeMo's RNNTJoint (PR 4348, and PR 10787 of its 2024 regression, collected blind in stop 54):
            # `self.wer.update(...)`, `self.wer.compute()`, `self.wer.reset()`, a torchmetrics Metric handed in from
            # the model (sync_on_compute: compute() all-gathers the states of every rank), in a file that never names
            # torchmetrics
            return Site(line, f"{label} (a metric's compute() after its update(): a torchmetrics Metric gathers the "
                              f"states of every rank there)")
        if include_backward and name == "backward" and self._backward_is_all_reduce() \
                and not self._before_the_wrap(call) and not self._in_autograd_function(call) \
                and not self._of_a_model_built_bare(call) and not self._in_lightning_hook(call):
            return Site(line, f"{label} (DDP/sharded gradient all-reduce)")
        if include_backward and not recv and name.lower().endswith("scaler") and call.args \
                and "loss" in ast.unparse(call.args[0]).lower() and self._backward_is_all_reduce():
            # timm's NativeScaler (MAE, DeiT, ConvNeXt, VideoMAE): `loss_scaler(loss, optimizer, ...)` runs
            # `scale(loss).backward()` inside
            return Site(line, f"{label} (its backward: DDP's gradient all-reduce)")
        return None

    def _metric_updated(self, recv: str, call: ast.Call) -> bool:
        """Is ``recv.compute()`` the torchmetrics idiom: ``recv.update(...)`` before it in the same function, and
        either torchmetrics imported by this file or ``recv.reset()`` after it (update, compute, reset: a Metric's
        interface)?"""
        scope = self._scope_of(call.lineno)
        if scope is None:
            return False
        calls = [(n.lineno, call_name(n)[1]) for n in walk_local(scope)
                 if isinstance(n, ast.Call) and call_name(n)[0] == recv]
        if not any(name == "update" and line <= call.lineno for line, name in calls):
            return False
        return self._imports("torchmetrics") or any(name == "reset" and line >= call.lineno for line, name in calls)

    def _in_autograd_function(self, node: ast.AST) -> bool:
        """Is this inside a method of a ``torch.autograd.Function`` subclass (icefall's scaling.py: a backward
        of a detached leaf's own little graph, inside the function's backward)? No DDP parameter is in that
        graph, so no all-reduce."""
        key = ("autograd_function_lines", "")
        if key not in self.memo:
            self.memo[key] = [(c.lineno, c.end_lineno or c.lineno) for c in self.nodes
                              if isinstance(c, ast.ClassDef) and any(
                                  dotted(b).rsplit(".", 1)[-1] == "Function" for b in c.bases)]
        line = getattr(node, "lineno", 0)
        return any(lo <= line <= hi for lo, hi in self.memo[key])   # type: ignore[attr-defined]

    def _scope_of(self, line: int) -> ast.AST | None:
        """The innermost function whose lines hold ``line`` (None: module level)."""
        best: ast.AST | None = None
        for defs in self.functions.values():
            for fn in defs:
                if fn.lineno <= line <= (fn.end_lineno or fn.lineno) and (best is None or fn.lineno > best.lineno):
                    best = fn
        return best

    def _hf_trainer_runs_ddp(self) -> bool:
        """Does this file build the HF ``TrainingArguments`` itself, every keyword written out and none of them
        DeepSpeed or FSDP, in a script that never says it may shard nor parses the arguments from the command line?
        Then ``trainer.save_model()`` writes on the ranks that call it and reaches no collective (transformers'
        ``Trainer.save_model`` gathers only under DeepSpeed, FSDP, SageMaker MP or XLA; ESFT, held-out round 46)."""
        key = ("hf_trainer_runs_ddp", "")
        if key not in self.memo:
            built = [n for n in self.nodes if isinstance(n, ast.Call)
                     and call_name(n)[1] in ("TrainingArguments", "Seq2SeqTrainingArguments")]
            self.memo[key] = bool(built) and not self._may_shard_here() and all(
                not n.args and all(kw.arg is not None and kw.arg not in ("deepspeed", "fsdp", "fsdp_config")
                                   for kw in n.keywords) for n in built) and not any(
                isinstance(n, ast.Call) and call_name(n)[1] in ("HfArgumentParser", "parse_args_into_dataclasses",
                                                                "parse_json_file", "parse_yaml_file")
                for n in self.nodes)
        return self.memo[key]   # type: ignore[return-value]

    def _outside_zero3(self, call: ast.Call) -> bool:
        """Is the call in the branch a ZeRO-3 test leaves out (Apollo's ``if ...zero_stage == 3: <every rank>
        else: if accelerator.is_main_process: model.save_pretrained(state_dict=accelerator.get_state_dict(model))``,
        held-out round 57)? There the parameters are whole on every rank, and Accelerate's state-dict getter copies
        them locally."""
        for node in self.nodes:
            if not isinstance(node, ast.If) or not _ZERO3_TEST.search(ast.unparse(node.test)):
                continue
            negated = bool(_NOT_ZERO3.search(ast.unparse(node.test)))
            side = node.body if negated else node.orelse
            if side and side[0].lineno <= call.lineno <= (side[-1].end_lineno or side[-1].lineno):
                return True
        return False

    def _may_shard_here(self) -> bool:
        """Does this file, or a file named on the command line, say it may shard its model?"""
        return self.may_shard or self.project is not None and self.project.any_named(lambda f: f.may_shard)

    def _base_wraps(self) -> bool:
        """Does a base class of this file's, in another file, wrap the model (DBNet's BaseTrainer builds the DDP
        model its subclass's ``_train_epoch`` steps)?"""
        return any(b.data_parallel for b in self._base_modules())

    def _backward_is_all_reduce(self) -> bool:
        """This file, or a file of the project that imports it (an engine.py whose model main.py wraps),
        wraps a model for data parallelism."""
        return self.data_parallel or self._base_wraps() or self.project is not None and self.project.any_data_parallel()

    def _before_sharding(self, name: str, call: ast.Call) -> bool:
        """Is ``name`` sharded in the call's function only by assignments below the call? Lumina loads
        weights into ``model`` on rank 0 (``model.state_dict()``), then ``model = setup_fsdp_sync(model)``:
        the call runs on a plain module. An assignment counts when its value is a sharding wrapper or a
        function of the file that makes one."""
        scope = self._scope_of(call.lineno)
        lines = []
        for node in walk_local(scope if scope is not None else self.tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                    and any(dotted(t) == name for t in node.targets):
                func = dotted(node.value.func)
                makes = SHARDING_WRAPPERS.search(func) or any(
                    isinstance(n, ast.Call) and SHARDING_WRAPPERS.search(dotted(n.func))
                    for fn in self.functions.get(func, []) for n in walk_local(fn))
                if makes:
                    lines.append(node.lineno)
        return bool(lines) and min(lines) > call.lineno

    def method_of_a_class_based_on(self, fn: ast.AST | None, bases: tuple[str, ...]) -> bool:
        """Is ``fn`` a method of a class of this file with a base of one of these names (``pl.Callback`` ->
        ``Callback``)?"""
        owner = self.parents.get(id(fn), (None, None, None))[2] if fn is not None else None
        return isinstance(owner, ast.ClassDef) and any(dotted(b).rsplit(".", 1)[-1] in bases for b in owner.bases)

    def _uses_lightning(self) -> bool:
        """Does this file import Lightning (``pytorch_lightning``, ``lightning``, ``lightning.pytorch``)?"""
        return self._imports("pytorch_lightning", "lightning")

    def _imports(self, *packages: str) -> bool:
        """Does this file import one of these top-level packages (or a module of one)?"""
        return any(m.split(".")[0] in packages for m in self.modules.values())

    def _in_lightning_hook(self, call: ast.Call) -> bool:
        """Is this in a hook (``on_*``) of a Lightning ``Callback`` or ``LightningModule``? Lightning calls hooks on
        the bare LightningModule; only ``training_step`` runs inside DDP's wrapper, whose forward arms the gradient
        all-reduce. A backward in a hook reduces nothing (stable-audio-tools' demo callback, under
        ``@rank_zero_only``: a discriminator's loss, then ``loss.backward()`` for a sensitivity map)."""
        fn = self._scope_of(call.lineno)
        return isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name.startswith("on_") \
            and self.method_of_a_class_based_on(fn, ("Callback", "LightningModule"))

    def _of_a_model_built_bare(self, call: ast.Call) -> bool:
        """Is every model its function runs one built with data parallelism turned off (UniTS's batch-size probe:
        ``model_tmp = self._build_model(ddp=False)``, then forwards and backwards on it)? A bare model's backward
        reduces nothing."""
        scope = self._scope_of(call.lineno)
        if scope is None:
            return False
        builds = [n for n in walk_local(scope) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
                  and any(kw.arg in _PARALLEL_SWITCHES and _const(kw.value) is False for kw in n.value.keywords)]
        bare = {dotted(t) for n in builds for t in n.targets if isinstance(t, (ast.Name, ast.Attribute))}
        if not bare:
            return False
        made = {id(n.value) for n in builds}
        forwards = [dotted(n.func) for n in walk_local(scope) if isinstance(n, ast.Call) and id(n) not in made
                    and isinstance(n.func, (ast.Name, ast.Attribute)) and _HOLDS_A_MODEL.search(dotted(n.func))]
        return all(fwd in bare for fwd in forwards)

    def _before_the_wrap(self, call: ast.Call) -> bool:
        """A ``backward()`` above every ``DDP(...)``/``FSDP(...)`` wrap of its own function (or of the module
        for top-level code): llm.c's ``train_gpt2.py`` runs a reference step on the bare model before it
        wraps it, and a bare model's backward reduces nothing."""
        scope = self._scope_of(call.lineno)
        wraps = [line for w_scope, line in self._wraps if w_scope is scope]
        return bool(wraps) and min(wraps) > call.lineno

    def class_def(self, name: str, reexport: bool = False) -> tuple[SourceFacts, ast.ClassDef] | None:
        """The definition of a class this file names (its own, or one it imports from the project; with
        ``reexport``, also one a package's ``__init__.py`` takes from one of its files)."""
        head, _, last = name.rpartition(".")
        own = next((n for n in self.tree.body if isinstance(n, ast.ClassDef) and n.name == last), None) \
            if not head else None
        if own is not None:
            return self, own
        if self.project is None:
            return None
        if not head and last in self.import_from:
            module, sub, level = self.import_from[last]
            other = self.project.module(module, Path(self.path), level) if module else None
            if other is not None and sub != last:
                other = None
        elif head in self.import_from:
            module, sub, level = self.import_from[head]
            other = self.project.module(f"{module}.{sub}" if sub else module, Path(self.path), level)
        else:
            return None
        if other is None or other is self:
            return None
        found = next((n for n in other.tree.body if isinstance(n, ast.ClassDef) and n.name == last), None)
        if found is None and reexport and head == "" and self.project is not None:
            # a class a package's __init__.py takes from one of its files (FastVideo's `from fastvideo.pipelines
            # import LoRAPipeline`)
            origin = self.project.reexported(other, last)
            if origin is not None and origin is not self:
                other = origin
                found = next((n for n in other.tree.body if isinstance(n, ast.ClassDef) and n.name == last), None)
        return (other, found) if found is not None else None

    def class_method(self, name: str, method: str, depth: int = 3) -> tuple[SourceFacts, ast.FunctionDef] | None:
        """The definition of ``method`` for the class this file names ``name``: the class's own, or the one it
        inherits from a base class of this file or of the project (a few levels up)."""
        found = self.class_def(name, reexport=True)
        if found is None:
            return None
        other, cls = found
        fn = next((b for b in cls.body if isinstance(b, ast.FunctionDef) and b.name == method), None)
        if fn is not None:
            return other, fn
        for base in cls.bases if depth > 0 else ():
            inherited = other.class_method(dotted(base), method, depth - 1)
            if inherited is not None:
                return inherited
        return None

    def _autograd_forward_collective(self, name: str) -> Site | None:
        """The first collective the ``forward`` of a ``torch.autograd.Function`` subclass of this file or of the
        project reaches, or None."""
        return self._method_collective(name, "forward", autograd_function=True)

    def _constructor_collective(self, name: str) -> Site | None:
        """The first collective the ``__init__`` of a class of this file or of the project reaches (bergson's
        ``MemmapSequenceScoreWriter(...)``, whose constructor ends in ``dist.barrier()``), or None."""
        return self._method_collective(name, "__init__")

    def _method_collective(self, name: str, method: str, *, autograd_function: bool = False,
                           called: bool = False) -> Site | None:
        """The first collective one method of a class of this file or of the project reaches, or None; with
        ``autograd_function``, only for a subclass of ``torch.autograd.Function``. With ``called`` (the method called
        through the class, ``Class.method(...)``), also one it inherits from a base class of the project; of a class
        imported from another file, only a factory classmethod, one that builds the object with ``cls(...)`` as a
        constructor does."""
        key = (f"{method} collective {PARAMETER_GATHERS.get()} {called}", name)
        if key in self.memo:
            return self.memo[key]   # type: ignore[return-value]
        self.memo[key] = None   # recursion guard
        found = self.class_def(name)
        where: tuple[SourceFacts, ast.FunctionDef] | None = None
        if called:
            where = self.class_method(name, method)
            if where is not None and (found is None or found[0] is not self) and not _builds_with_cls(where[1]):
                where = None
        elif found is not None and (not autograd_function
                                    or any(dotted(b).rsplit(".", 1)[-1] == "Function" for b in found[1].bases)):
            fn = next((b for b in found[1].body if isinstance(b, ast.FunctionDef) and b.name == method), None)
            where = (found[0], fn) if fn is not None else None
        site: Site | None = None
        if where is not None and not _abstract(where[1]):
            other, fn = where
            site = other.first_collective(fn.body)
            if site is not None and other is not self:
                site = self._elsewhere(other, site)
        self.memo[key] = site
        return site

    def _calls_own_ambiguously(self, cls_name: str, method: str) -> bool:
        """Does the method of this file's class call ``self.X()`` where the class defines ``X`` and so does another
        class of the file? The reading of ``self.X()`` takes any function of the file by that name (Detic's
        OIDEval.run calls its own ``self.evaluate()``, not the evaluator's, whose ``evaluate`` gathers)."""
        key = ("own ambiguously", f"{cls_name}.{method}")
        if key not in self.memo:
            cls = next((n for n in self.nodes if isinstance(n, ast.ClassDef) and n.name == cls_name), None)
            fn = next((b for b in cls.body if isinstance(b, ast.FunctionDef) and b.name == method), None) \
                if cls else None
            own = {b.name for b in cls.body if isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef))} if cls else set()
            self.memo[key] = fn is not None and any(
                isinstance(n, ast.Call) and call_name(n)[0] == "self" and call_name(n)[1] in own
                and len(self.functions.get(call_name(n)[1], ())) > 1 for n in walk_local(fn))
        return bool(self.memo[key])

    def _made_by_cls(self, recv: str, call: ast.Call) -> str | None:
        """The class of this file whose classmethod holds ``call`` and gives ``recv`` the object it builds
        (``pipe = cls(...)``), or None."""
        key = ("made by cls", "")
        if key not in self.memo:
            spans: dict[str, list[tuple[int, int, str]]] = {}
            for cls in (n for n in self.nodes if isinstance(n, ast.ClassDef)):
                for fn in (b for b in cls.body if isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef))):
                    for a in walk_local(fn):
                        if isinstance(a, ast.Assign) and isinstance(a.value, ast.Call) \
                                and isinstance(a.value.func, ast.Name) and a.value.func.id == "cls":
                            for t in a.targets:
                                if isinstance(t, ast.Name):
                                    spans.setdefault(t.id, []).append((fn.lineno, fn.end_lineno or fn.lineno, cls.name))
            self.memo[key] = spans
        return next((c for lo, hi, c in self.memo[key].get(recv, ())   # type: ignore[union-attr]
                     if lo <= call.lineno <= hi), None)

    def _walks_plural(self, recv: str, call: ast.Call) -> bool:
        """Is ``call`` inside a ``for recv in <...>.recvs:`` loop (the loop's name, the list's in the plural)?"""
        key = ("plural loops", "")
        if key not in self.memo:
            spans: dict[str, list[tuple[int, int]]] = {}
            for n in self.nodes:
                if isinstance(n, (ast.For, ast.AsyncFor)) and isinstance(n.target, ast.Name) \
                        and dotted(n.iter).rsplit(".", 1)[-1] == f"{n.target.id}s":
                    spans.setdefault(n.target.id, []).append((n.lineno, n.end_lineno or n.lineno))
            self.memo[key] = spans
        return any(lo <= call.lineno <= hi for lo, hi in self.memo[key].get(recv, ()))   # type: ignore[union-attr]

    def _attribute_class_file(self, attr: str, method: str) -> SourceFacts | None:
        """The file of the one class of the project that an attribute is named for and that defines ``method``
        (speechbrain's ``self.checkpointer``, a ``Checkpointer`` handed to the ``Brain`` by the recipe:
        ``self.checkpointer.save_and_keep_only()`` broadcasts the checkpoint folder, PR 2192), or None."""
        key = attr.replace("_", "").lower()
        if self.project is None or len(key) < 6:
            return None
        owners = [f for f in self.project.classes_named(key) if f is not self and any(
            isinstance(n, ast.ClassDef) and n.name.lower() == key and any(
                isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)) and b.name == method for b in n.body)
            for n in f.tree.body)]
        return owners[0] if len(owners) == 1 else None

    def external(self, recv: str, name: str) -> tuple[SourceFacts, str] | None:
        """The file of the project that defines the function a call names (``evaluate()`` imported from
        ``engine``, ``utils.save_on_master()``), and its name there; None outside a project."""
        if self.project is None:
            return None
        here = Path(self.path)
        other: SourceFacts | None = None
        func = name
        if not recv and name in self.import_from and name not in self.functions:
            module, func, level = self.import_from[name]
            if func:
                other = self.project.module(module, here, level)
        elif recv in self.import_from:
            module, sub, level = self.import_from[recv]
            other = self.project.module(f"{module}.{sub}" if sub else module, here, level)
        elif "." in recv and any(recv.startswith(f"{k}.") and not v[1] for k, v in self.import_from.items()):
            # OpenNMT's `import onmt.utils`, then `onmt.utils.distributed.all_gather_list(...)`: a submodule of an
            # imported package, named through it
            head = max((k for k, v in self.import_from.items() if recv.startswith(f"{k}.") and not v[1]), key=len)
            module, _sub, level = self.import_from[head]
            other = self.project.module(module + recv[len(head):], here, level)
        elif recv in ("self", "super()") and name not in self.functions:
            # a method inherited from a class of another file (fairchem's OCPTrainer(BaseTrainer).save())
            other = next((base for base in self._base_modules() if name in base.functions), None)
        elif recv in self._instances():
            # an object of a class of another file (picotron's `checkpoint_manager = CheckpointManager()`,
            # then `checkpoint_manager.save_checkpoint(...)`)
            module, sub, level = self.import_from[self._instances()[recv]]
            package = other = self.project.module(module, here, level) if module else None
            if other is None or name not in other.functions:
                other = self.project.module(f"{module}.{sub}" if module else sub, here, level)
            if other is None and package is not None and sub:
                # a class a package's __init__.py takes from one of its files (LightZero's `from lzero.worker
                # import MuZeroEvaluator as Evaluator`, then `evaluator.eval(...)`)
                other = self.project.reexported(package, sub)
        if other is not None and func not in other.functions:
            other = other.defining(func)
        if other is None or other is self or func not in other.functions:
            return None
        return other, func

    def defining(self, name: str) -> SourceFacts | None:
        """The file of the project that defines ``name`` for this one: itself, or a module it re-exports the
        name from (a package's ``__init__.py`` with ``from .checkpoint import *`` or ``from .checkpoint
        import save_model``, 4M's ``import fourm.utils as utils`` then ``utils.save_model(...)``)."""
        if name in self.functions or self.project is None:
            return self
        here = Path(self.path)
        if name in self.import_from:
            module, sub, level = self.import_from[name]
            found = self.project.module(module, here, level) if module and sub == name else None
            return found if found is not None and name in found.functions else None
        for module, level in self.star_imports:
            found = self.project.module(module, here, level)
            if found is not None and found is not self and name in found.functions:
                return found
        return None

    def _instances(self) -> dict[str, str]:
        """Names bound to an object of an imported class (``mgr = CheckpointManager()``): name -> the class's
        imported name."""
        if ("instances", "") not in self.memo:
            out: dict[str, str] = {}
            classes: dict[str, str] = {}
            # `obj = Cls(...)`, and `with Cls(...) as obj:` (molmo's `with Trainer(...) as trainer:`)
            bindings = [(node.targets, node.value) for node in self.nodes
                        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)]
            bindings += [([item.optional_vars], item.context_expr) for node in self.nodes
                         if isinstance(node, (ast.With, ast.AsyncWith)) for item in node.items
                         if item.optional_vars is not None and isinstance(item.context_expr, ast.Call)]
            for targets, value in bindings:
                func = value.func
                if isinstance(func, ast.Name) and func.id in self.import_from and func.id[:1].isupper():
                    imported = func.id
                    cls = self.import_from[func.id][1] or func.id
                elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                        and func.value.id in self.import_from and func.attr[:1].isupper():
                    # a class of an imported module (EDM2's `checkpoint = dist.CheckpointIO(...)`, with
                    # `from torch_utils import distributed as dist`): the module's name
                    imported = func.value.id
                    cls = func.attr
                else:
                    continue
                for t in targets:
                    if isinstance(t, (ast.Name, ast.Attribute)):
                        out[dotted(t)] = imported
                        classes[dotted(t)] = cls
            self.memo[("instances", "")] = out
            self.memo[("instance classes", "")] = classes
        return self.memo[("instances", "")]   # type: ignore[return-value]

    def own_instance_class(self, recv: str) -> str | None:
        """The name of the class of this file whose object ``recv`` is (``self.diffusion = GaussianDiffusion(...)``,
        ``model = Model(...)``), when every value the name is given is an object of that class."""
        if ("own instances", "") not in self.memo:
            classes = {n.name for n in self.nodes if isinstance(n, ast.ClassDef)}
            made: dict[str, set[str]] = {}
            for n in self.nodes if classes else ():
                if isinstance(n, ast.Assign):
                    v = n.value
                    cls = v.func.id if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) else ""
                    for t in n.targets:
                        if isinstance(t, (ast.Name, ast.Attribute)) and not (
                                isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute)
                                and dotted(v.func.value) == dotted(t)):   # `model = model.cuda(rank)`: the same one
                            made.setdefault(dotted(t), set()).add(cls if cls in classes else "")
            self.memo[("own instances", "")] = {k: next(iter(v)) for k, v in made.items() if len(v) == 1 and "" not in v}
        return self.memo[("own instances", "")].get(recv)   # type: ignore[union-attr]

    def instance_class(self, recv: str) -> str | None:
        """The name of the imported class whose object ``recv`` is (``ewa = ExponentialWeightAverager(...)``)."""
        self._instances()
        return self.memo[("instance classes", "")].get(recv)   # type: ignore[union-attr]

    def defs_of(self, name: str, cls: str | None = None) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
        """The functions named ``name``; with ``cls``, only the methods of that class when it has one
        (llm-baselines: ``WeightAverager.step`` saves on rank 0, ``ExponentialWeightAverager.step`` does not)."""
        defs = self.functions.get(name, [])
        if cls and len(defs) > 1:
            own = [fn for n in self.nodes if isinstance(n, ast.ClassDef) and n.name == cls
                   for fn in n.body if any(fn is d for d in defs)]
            return own or defs
        return defs

    def _base_modules(self) -> list[SourceFacts]:
        """The files of the project that define a base class of a class of this file."""
        if ("base_modules", "") not in self.memo:
            out: list[SourceFacts] = []
            here = Path(self.path)
            for node in self.nodes:
                if not isinstance(node, ast.ClassDef) or self.project is None:
                    continue
                for base in node.bases:
                    head = dotted(base).split(".")[0]
                    if head not in self.import_from:
                        continue
                    module, sub, level = self.import_from[head]
                    if isinstance(base, ast.Name) and module:
                        other = self.project.module(module, here, level)
                        # a package that re-exports the class (align-anything's trainers/base/__init__.py:
                        # `from ...rl_trainer import RLTrainerBase`): the file that defines it
                        if other is not None and base.id in other.import_from and not any(
                                isinstance(n, ast.ClassDef) and n.name == base.id for n in other.tree.body):
                            m2, _s2, l2 = other.import_from[base.id]
                            other = self.project.module(m2, Path(other.path), l2) or other
                    else:
                        other = self.project.module(f"{module}.{sub}" if sub else module, here, level)
                    if other is not None and other is not self and all(other is not o for o in out):
                        out.append(other)
            self.memo[("base_modules", "")] = out
        return self.memo[("base_modules", "")]   # type: ignore[return-value]

    def local_modules(self) -> list[SourceFacts]:
        """The files of the project this file imports (``from lavis.common.dist_utils import ...``,
        ``import utils``), each once, in import order; empty outside a project."""
        if self.project is None:
            return []
        key = ("local_modules", str(self.project.generation))
        if key in self.memo:
            return list(self.memo[key])   # type: ignore[call-overload]
        here, out = Path(self.path), []
        # a script that builds what its configurations name (`hydra.utils.instantiate(cfg.model)`) imports those
        configured = self.project.config_targets(here) if any(
            call_name(n)[1] in _INSTANTIATE for n in self.nodes if isinstance(n, ast.Call)) else []
        for module, sub, level in [*self.import_from.values(), *((m, "", lv) for m, lv in self.star_imports),
                                   *((m, "", 0) for m in self.lazy_imports), *((m, "", 0) for m in configured)]:
            # `from train import trainers`: the package's __init__.py and the module train/trainers.py (HALOs)
            package = self.project.module(module, here, level) if module else None
            # a name a package's ``__init__.py`` takes from one of its files is that file's, one import away,
            # not two (GLiNER's ``from .training import Trainer``: the trainer's step is in training/trainer.py)
            through = self.project.reexported(package, sub) if package is not None and sub else None
            for other in (package, through,
                          self.project.module(f"{module}.{sub}" if module else sub, here, level) if sub else None):
                if other is not None and other is not self and all(other is not o for o in out):
                    out.append(other)
        self.memo[key] = out
        return list(out)

    def calls_a_function_of_ours(self, call: ast.Call) -> bool:
        """Does the call go to a function of this file or of the project (not a library's)?"""
        recv, name = call_name(call)
        return name in self.functions or self.external(recv, name) is not None

    def _logged_per_epoch(self, call: ast.Call) -> bool:
        """Is a Lightning ``log(..., sync_dist=True)`` accumulated over the epoch and reduced once at its end, not at
        each call: ``on_step=False``, or left to the default of a per-batch hook where it is False (``validation_step``)?
        Then a rank may skip some of its calls, as long as it makes one in the epoch (anemoi-core's per-timestep metrics,
        held-out round 71: `pl_module.log(..., on_step=False, on_epoch=True, sync_dist=True)` behind a `return` some
        batches take). Not in an epoch-end hook, called once: there a skipped log is a value missing from the epoch's
        reduction on that rank (nougat's `on_validation_epoch_end`, round 38)."""
        fn = self._scope_of(call.lineno)
        name = fn.name if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) else ""
        if _EPOCH_END_HOOK.search(name):
            return False   # called once an epoch: skipping it leaves the value out of the epoch's reduction
        given = next((k.value for k in call.keywords if k.arg == "on_step"), None)
        if given is not None:
            return _const(given) is False
        return _EVAL_BATCH_HOOK.search(name) is not None

    def _elsewhere(self, other: SourceFacts, site: Site) -> Site:
        return site if site.path else replace(site, path=Path(other.path).name)

    def decorator_collective(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> Site | None:
        """The collective a decorator of the project wraps around the function, if any: oumi's ``@local_leader_only()``
        (PR 328, collected blind in stop 53) runs the function on the local leader and then calls ``barrier()`` on
        every rank that enters the wrapper, so a call of the decorated function is a collective, whichever rank
        makes it (``self.log(...)`` after ``if not is_world_process_zero(): return``: rank 0's barrier alone)."""
        for d in fn.decorator_list:
            target = d.func if isinstance(d, ast.Call) else d
            if not isinstance(target, (ast.Name, ast.Attribute)):
                continue
            recv, name = dotted(target).rpartition(".")[::2]
            owner: SourceFacts | None = self if not recv and name in self.functions and name not in self.imported \
                else None
            func = name
            if owner is None:
                ext = self.external(recv, name)
                if ext is None:
                    continue
                owner, func = ext
            for deco in owner.functions.get(func, []):
                # every call the decorator's code makes but the wrapped function's: the first parameter of the
                # decorator, or of the decorator a factory returns (`def local_leader_only(*a): def decorator(fn):`)
                wrapped = {a.arg for n in ast.walk(deco) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                           for a in n.args.args[:1]}
                for node in ast.walk(deco):
                    if not isinstance(node, ast.Call) or isinstance(node.func, ast.Name) and node.func.id in wrapped:
                        continue
                    site = owner.collective_of(node, include_backward=False)
                    if site is not None:
                        at = f"{Path(owner.path).name}:{site.line}" if owner is not self else f"line {site.line}"
                        return Site(fn.lineno, f"{fn.name}() (decorated with @{ast.unparse(d)}, whose wrapper calls "
                                               f"{site.label} at {at})")
        return None

    def function_collective(self, name: str, *, include_backward: bool = True) -> Site | None:
        """The first collective a function of this file reaches (through its own calls), or None.

        ``include_backward=False`` leaves out DDP's implicit all-reduce in ``backward()``: a shared
        ``train(model, loader, optimizer=None)`` that rank 0 reuses for validation calls ``backward``
        only on a path this reading cannot tell apart."""
        key = f"{name}|{include_backward}|{PARAMETER_GATHERS.get()}"
        if key in self._collective:
            return self._collective[key]
        self._collective[key] = None  # recursion guard: a cycle adds nothing
        found: Site | None = None
        defs = self.functions.get(name, [])
        if defs and all(_abstract(fn) for fn in defs) and self.project is not None:
            # OSTrack: BaseTrainer.train() calls `self.train_epoch()`, which raises NotImplementedError here;
            # LTRTrainer(BaseTrainer) of another file defines it, with the backward
            for other in self.project.checked():
                if other is not self and any(b is self for b in other._base_modules()) and name in other.functions:
                    inner = other.function_collective(name, include_backward=include_backward)
                    if inner is not None:
                        found = self._elsewhere(other, inner)
                        break
            self._collective[key] = found
            return found
        for fn in defs:
            if self.rank_only_function(fn):
                continue
            found = self.decorator_collective(fn)
            if found:
                break
            for node in walk_local(fn):
                if isinstance(node, ast.Call) and node is not fn:
                    recv, callee = call_name(node)
                    if recv in ("self", "cls", "") and callee in self.functions and callee not in self.imported:
                        # the innermost collective, for the message; none where what the call passes skips them
                        # all (XTREME's evaluate() calls `load_and_cache_examples(..., evaluate=True)`)
                        site = self.function_collective(callee, include_backward=include_backward)
                        if site is not None and self._skipped_by_arguments(callee, node, include_backward):
                            site = None
                    else:
                        site = self.collective_of(node, include_backward=include_backward)
                    if site is not None:
                        found = site
                        break
            if found:
                break
        self._collective[key] = found
        return found

    def long_work_gated_by(self, call: ast.Call, param: str) -> Site | None:
        """The long work the function this call names (of this file or of the project) does under ``if
        <param>:`` (pycls: ``cache_url(url, cache_dir, download=dist.is_main_proc(local=True))`` downloads
        only where ``download`` holds)."""
        recv, name = call_name(call)
        owner: SourceFacts | None = self if recv in ("self", "cls", "") and name in self.functions else None
        func = name
        if owner is None:
            ext = self.external(recv, name)
            if ext is None:
                return None
            owner, func = ext
        for fn in owner.functions.get(func, []):
            for node in walk_local(fn):
                if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == param:
                    site = owner.first_long_work(node.body)
                    if site is not None:
                        return owner._elsewhere(owner, site) if owner is not self else site
        return None

    def _flag_params(self, call: ast.Call, name: str, falsy: frozenset[str] = frozenset(),
                     truthy: frozenset[str] = frozenset()) -> tuple[frozenset[str], frozenset[str]]:
        """The parameters of ``name`` this call fills with False, None or 0, and those it fills with True: a
        constant, a name of the caller's own in ``falsy`` or ``truthy``, or ``not`` one of them (DensePhrases'
        ``is_training=not evaluate``). A flag left at its default counts too (Composer's ``safe_torch_load(path)``
        broadcasts only ``if load_monolith_rank0_only:``)."""
        fn = next(iter(self.functions.get(name, [])), None)
        if fn is None:
            return frozenset(), frozenset()
        off: set[str] = set()
        on: set[str] = set()
        for p, v in bound_arguments(call, fn, with_defaults=True):
            if isinstance(v, ast.Constant) and v.value in (False, None, 0) \
                    or isinstance(v, ast.Name) and v.id in falsy or _tests_not(v, truthy):
                off.add(p)
            elif isinstance(v, ast.Constant) and v.value is True or isinstance(v, ast.Name) and v.id in truthy \
                    or _tests_not(v, falsy):
                on.add(p)
        return frozenset(off), frozenset(on)

    def _skipped_by_arguments(self, name: str, call: ast.Call, include_backward: bool) -> bool:
        """Does this call of ``name`` (a function of this file that reaches a collective) skip every collective of
        it through what it passes: flags it leaves false (evodiff's ``epoch(model, False)``: reduces only ``if
        train:``; Composer's ``safe_torch_load(path)``: a broadcast only ``if load_monolith_rank0_only:``), flags it
        sets (XTREME's ``load_and_cache_examples(..., evaluate=True)``: barriers only ``if ... and not evaluate:``),
        or values it gives where the function gathers them itself only ``if p is None:`` (OLMo-core's
        ``convert_checkpoint_to_hf(..., model_state_dict=sd)``)?"""
        falsy, truthy = self._flag_params(call, name)
        given = _given_params(call, self.functions[name][0])
        # (only where the function's own body holds the collective: an abstract method's is in a subclass)
        return bool(falsy or given or truthy) and self._collective_unless(
            name, falsy, include_backward, given=given, truthy=truthy) is None \
            and self._collective_unless(name, frozenset(), include_backward) is not None

    def _collective_unless(self, name: str, falsy: frozenset[str], include_backward: bool, depth: int = 0,
                           given: frozenset[str] = frozenset(), truthy: frozenset[str] = frozenset()) -> Site | None:
        """The first collective of ``name`` when the parameters in ``falsy`` are false, those in ``truthy`` true
        and those in ``given`` set: the bodies of ``if p:`` (``if p and ...:``), of ``if not t:`` and of ``if q is
        None:`` are left out, and so are the collectives of its own functions called with them."""
        key = (name, falsy, given, truthy)
        if key in self._unless_active:
            return None   # ms-swift's ring attention: functions that call each other through these questions
        self._unless_active.add(key)
        try:
            return self._collective_unless_body(name, falsy, include_backward, depth, given, truthy)
        finally:
            self._unless_active.discard(key)

    def _collective_unless_body(self, name: str, falsy: frozenset[str], include_backward: bool, depth: int,
                                given: frozenset[str], truthy: frozenset[str] = frozenset()) -> Site | None:
        for fn in self.functions.get(name, []):
            skip = {id(n) for n in walk_local(fn) if isinstance(n, ast.If) and any(
                _tests_set(t, falsy) or _tests_unset(t, given) or _tests_not(t, truthy) for t in (
                    n.test.values if isinstance(n.test, ast.BoolOp) and isinstance(n.test.op, ast.And) else [n.test]))}
            skipped = {id(c) for n in walk_local(fn) if id(n) in skip for b in n.body for c in walk_local(b)}
            for node in walk_local(fn):
                if not isinstance(node, ast.Call) or id(node) in skipped:
                    continue
                recv, callee = call_name(node)
                if recv in ("self", "cls", "") and callee in self.functions and callee not in self.imported and depth < 3:
                    inner_falsy, inner_truthy = self._flag_params(node, callee, falsy, truthy)
                    site = (self._collective_unless(callee, inner_falsy, include_backward, depth + 1, truthy=inner_truthy)
                            if inner_falsy or inner_truthy
                            else self.function_collective(callee, include_backward=include_backward))
                else:
                    site = self.collective_of(node, include_backward=include_backward)
                if site is not None:
                    return site
        return None

    def first_collective(self, stmts: list[ast.stmt] | ast.AST) -> Site | None:
        """The first collective (in source order) in a statement or a list of them."""
        memo = self._stmt_collective_gathers if PARAMETER_GATHERS.get() else self._stmt_collective
        return self._first_site(stmts, memo, self.collective_of)

    def first_sync(self, stmts: list[ast.stmt] | ast.AST) -> Site | None:
        """The first collective or wait at a barrier of the launching processes (see :meth:`cpu_barrier_of`), in
        source order, in a statement or a list of them."""
        if not self.cpu_barriers:
            return self.first_collective(stmts)
        memo = self._stmt_sync_gathers if PARAMETER_GATHERS.get() else self._stmt_sync
        return self._first_site(stmts, memo, lambda c: self.cpu_barrier_of(c) or self.collective_of(c))

    @staticmethod
    def _first_site(stmts: list[ast.stmt] | ast.AST, memo: dict[int, Site | None],
                    site_of: Callable[[ast.Call], Site | None]) -> Site | None:
        """The first call's site (in source order) in a statement or a list of them, each statement's found once."""
        for stmt in stmts if isinstance(stmts, list) else [stmts]:
            key = id(stmt)
            if key not in memo:
                best: Site | None = None
                for node in walk_local(stmt):
                    if isinstance(node, ast.Call):
                        site = site_of(node)
                        if site is not None and (best is None or site.line < best.line):
                            best = site
                memo[key] = best
            if memo[key] is not None:
                return memo[key]
        return None

    def cpu_barrier_of(self, call: ast.Call, depth: int = 1) -> Site | None:
        """A wait at a barrier shared by the launching processes (``barrier.wait()`` in a file that makes a
        ``multiprocessing.Barrier``), or a call of a function of this file that waits there (KataGo's
        ``safe_barrier(barrier, rank)``): every rank meets there, and no process-group timeout runs while the
        others wait for one rank's work. Kind ``"cpu barrier"``."""
        if not self.cpu_barriers:
            return None
        recv, name = call_name(call)
        if name == "wait" and "barrier" in recv.rsplit(".", 1)[-1].lower() and not self.resolves_to_dist(recv):
            return Site(call.lineno, f"{recv}.wait() (a barrier of the launching processes, with no process-group "
                                     f"timeout)", kind="cpu barrier")
        if depth and not recv and name in self.functions and name not in self.imported:
            for fn in self.functions[name]:
                for node in walk_local(fn):
                    if isinstance(node, ast.Call) and self.cpu_barrier_of(node, depth - 1) is not None:
                        return Site(call.lineno, f"{name}() (which waits at a barrier of the launching processes, "
                                                 f"with no process-group timeout)", kind="cpu barrier")
        return None

    def aborts_cpu_barrier(self) -> bool:
        """Does the file abort a barrier of the launching processes (``barrier.abort()``): the ranks waiting there
        are let go (with ``BrokenBarrierError``) when one leaves?"""
        return self.cpu_barriers and any(
            isinstance(n, ast.Call) and call_name(n)[1] == "abort" and "barrier" in call_name(n)[0].lower()
            for n in self.nodes)

    def rank_only_function(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        """Decorated to run on one rank only (``@rank_zero_only``, ``@master_only``, ...), or wrapped so by an
        assignment (``save = rank_zero_only(save)``; DAC's ``checkpoint = when(lambda: accel.local_rank ==
        0)(checkpoint)``)."""
        return any(RANK_ONLY_DECORATOR.search(dotted(d.func if isinstance(d, ast.Call) else d))
                   for d in fn.decorator_list) or fn.name in self._rewrapped_rank_only()

    def _rewrapped_rank_only(self) -> dict[str, tuple[int, str]]:
        """Functions re-bound to a rank-only wrapper: name -> (line, the wrapper's text)."""
        if ("rewrapped", "") not in self.memo:
            out: dict[str, tuple[int, str]] = {}
            for node in self.nodes:
                if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                        and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Call) and len(node.value.args) == 1
                        and isinstance(node.value.args[0], ast.Name) and node.value.args[0].id == node.targets[0].id):
                    continue
                wrapper = node.value.func
                if RANK_ONLY_DECORATOR.search(dotted(wrapper)) or isinstance(wrapper, ast.Call) and any(
                        self.is_rank_condition(a.body if isinstance(a, ast.Lambda) else a) for a in wrapper.args):
                    out[node.targets[0].id] = (node.lineno, ast.unparse(wrapper))
            self.memo[("rewrapped", "")] = out
        return self.memo[("rewrapped", "")]   # type: ignore[return-value]

    def rank_only_mark(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[int, str]:
        """Where and how a rank-only function is marked so: its decorator, or the wrapper it is re-bound to."""
        marks = [d for d in fn.decorator_list
                 if RANK_ONLY_DECORATOR.search(dotted(d.func if isinstance(d, ast.Call) else d))]
        if marks:
            return fn.lineno, f"@{dotted(marks[0])}"
        return self._rewrapped_rank_only().get(fn.name, (fn.lineno, fn.name))

    # -- long work --------------------------------------------------------------------------------------
    def long_work_of(self, node: ast.AST) -> Site | None:
        """Long work this call or loop does on the calling rank, if any."""
        if isinstance(node, ast.While):
            # a poll: sleep until a file, a marker or a server is there, as long as whatever makes it takes
            calls = [call_name(c)[1] for c in walk_local(node) if isinstance(c, ast.Call)]
            if "sleep" in calls and _EXISTS_TEST.intersection(calls):
                test = ast.unparse(node.test)
                test = test if len(test) <= 40 else test[:37] + "..."
                return Site(node.lineno, f"a poll loop (`while {test}`) that sleeps until something outside the job "
                                         f"is ready", "wait")
            return None
        if isinstance(node, (ast.For, ast.AsyncFor)):
            text = ast.unparse(node.iter)
            if self._walks_timesteps(node):
                return Site(node.lineno, f"a loop over the diffusion timesteps ({text[:30]})")
            if isinstance(node.iter, ast.Call) and isinstance(node.iter.func, ast.Attribute) and \
                    node.iter.func.attr in ("items", "keys", "values"):
                return None   # the entries of a dict (``val_loss.items()``): a loop inside walks data, if any
            if LOOP_DATA.search(text):
                # a dict of loaders walked for its names (DUSt3R's `for test_name in data_loader_test:` that
                # builds a log line) loads nothing
                names = isinstance(node.target, ast.Name) and re.search(r"(^|_)(name|key|k)$", node.target.id) \
                    or _SETTING_ENTRIES.match(text)   # diffusion-pipe's `for d in config['eval_datasets']:`
                if (names or not _PIPELINE.search(text)) and all(
                        _light_call(c) for s in node.body for c in walk_local(s) if isinstance(c, ast.Call)):
                    return None   # minimind's `for i in range(len(prompts)): Logger(prompts[i])`; BigVGAN's
                    # loop that builds a DataLoader per validation file list
                if self._stops_after_a_few(node):
                    return None   # cryostar's preview: `num += gt_images.shape[0]; if num >= total: break`, total=25
                if _a_few_picked(node.iter) and all(
                        _light_call(c) for s in node.body for c in walk_local(s) if isinstance(c, ast.Call)):
                    return None   # llm-sagemaker-sample's `for index in random.sample(range(len(train_dataset)), 2):
                    # print(train_dataset[index]["text"])` (blind collection of stop 46, false): two items printed
                return Site(node.lineno, f"a loop over {text[:40]}")
            return None
        if not isinstance(node, ast.Call):
            return None
        if self._in_a_short_loop(node):
            return None   # a few batches (cryostar's 25 preview images): whatever each pass calls
        recv, name = call_name(node)
        if not name:
            return None
        label = f"{recv}.{name}()" if recv else f"{name}()"
        if id(node) in self._payloads:   # builds what a later save writes: the save is the long work
            return None
        if any(kw.arg in ("run_as_future", "async_upload", "background") and _const(kw.value) is True
               or kw.arg == "blocking" and _const(kw.value) is False for kw in node.keywords):
            return None   # handed to a background thread (huggingface_hub's upload_folder(run_as_future=True))
        if _WAITS_OUTSIDE.search(name):
            return Site(node.lineno, f"{label} (a wait for something outside the job)", "wait")
        if name == "init" and recv.rsplit(".", 1)[-1] == "wandb":
            # the start of a W&B run: a handshake with the service, seconds, but unbounded when the service is slow or
            # unreachable (bergson, starVLA PR 369, rsl_rl issue 150: rank 0 in it past the others' timeout)
            return Site(node.lineno, label, "service")
        if recv and LOGGING_RECEIVERS.search(recv) and LOGGING_METHODS.match(name):
            if not _UPLOAD.match(name):
                # `wandb.log(metrics)`, `wandb.save(file)`, a table or an image (AnimateDiff, DPO, SiT, GaLore):
                # handed to the service's own process and queued, in milliseconds; mlflow's `log_param` and
                # `log_metric` are one small HTTP request each (Vim). An artifact or a model upload hashes and
                # sends its files there and then
                return None
            return Site(node.lineno, label, "logging")
        if {"plot", "visualize", "visualization"} & set(_parts(name)) and _WRITER.search(recv or "-"):
            # a TensorBoard writer's figure of values already computed (UniFormerV2's `writer.plot_eval(preds=...,
            # labels=...)`, a confusion matrix; held-out round 107): a plot, not long work alone
            return Site(node.lineno, label, "plot")
        if {"save", "export", "write", "dump"} & set(_parts(name)) and (
                _writes_a_figure(node) or _names_a_file(node, _TEXT_FILE) or self._path_names_a_file(node, _TEXT_FILE)
                or self._under_media_test(node)):
            return None   # nnU-Net's architecture PDF, StyleGAN2-ADA's `save_image_grid(..., 'reals.png')`,
            # THUMT's `export_params(output, "params.json", params)`
        if _ADAPTER.search(name) and {"save", "merge", "export", "push"} & set(_parts(name)):
            return None   # CoLLiE's `pp_merge_peft(...)`, finetrainers' `_save_lora_weights(...)`: an adapter, MB
        own = None if recv in ("self", "cls", "") or name in ("eval", "train") and not node.args \
            else self.own_instance_class(recv)   # (`model.eval()`: a mode switch, whatever the class wraps)
        if (recv in ("self", "cls", "") or own is not None) and name in self.functions and name not in self.imported:
            # (a method of an object of a class of this file: pcdiff-implant's `model.all_kl(x)`, whose
            # `self.diffusion.calc_bpd_loop(...)` runs the network once per diffusion timestep)
            inner = self.function_long_work(name, own)
            if inner is not None:
                extra = "" if inner.label == label else f" (which runs {inner.label} at {inner.at})"
                return Site(node.lineno, f"{label}{extra}", "plot" if _light(inner)
                            and inner.kind not in ("logging", "service") else inner.kind)
            return None
        ext = self.external(recv, name)
        if ext is not None:
            other, func = ext
            inner = other.function_long_work(func, self.instance_class(recv))
            if inner is not None:
                inner = self._elsewhere(other, inner)
                extra = "" if inner.label in (label, f"{func}()") else f" (which runs {inner.label} at {inner.at})"
                return Site(node.lineno, f"{label}{extra}", "plot" if _light(inner)
                            and inner.kind not in ("logging", "service") else inner.kind)
            return None
        if name in _POOL_WAITS and recv and self._pool_of(node, recv):
            # FunCodec's `calc_shape`: `p = Pool(nj)`, `p.apply_async(calc_shape_core, ...)` per split, `p.join()`:
            # every audio file of the data set decoded, in processes, before the call returns (held-out round 62)
            return Site(node.lineno, f"{label}, the work of a process pool")
        if _lookup_name(name) or _NOT_LONG_RECEIVER.search(recv or "-") \
                or (name in ("eval", "train") and recv and not node.args) \
                or name.endswith("_mode"):   # model.eval(), torch.inference_mode(): a mode switch
            return None
        if _log_line_name(name) or name[:1].isupper():   # a class being built (open_clip's SampleWeightedEMA())
            return None
        if name in ("eval", "exec") and not recv and name not in self.imported:
            return None   # Python's own: YOLOP's `eval('dataset.' + cfg.DATASET.DATASET)(...)` names a class
        parts = _parts(name)
        if _listing_name(name):
            return None   # FunCodec's `generate_data_list(data_dir, dataset)`: text files split, not a model's output
        if _IMAGE_METRIC.search(f"{recv}.{name}") and re.search(r"(?i)calc|comput|metric|score", name):
            # RCG (held-out round 39, missed): `torch_fidelity.calculate_metrics(input1=save_folder, ...)` on rank 0,
            # Inception features of 50,000 generated and 50,000 reference images, minutes
            return Site(node.lineno, label)
        if name in ("copy", "copyfile", "copy2", "copytree", "move") and recv and len(node.args) >= 2 \
                and re.search(r"(?i)shutil|path_?mgr|pathmanager|\bfs\b|gfile|file_io", recv) \
                and _CHECKPOINT_PATH.search(ast.unparse(node.args[0])) \
                and not any(isinstance(c, ast.Constant) and isinstance(c.value, str)
                            and c.value.lower().endswith((*_SMALL_DOWNLOAD, ".py", ".cfg", ".sh"))
                            for c in subtree(node.args[0])):   # (HigherHRNet copies the model's source file)
            # SAM 2: `g_pathmgr.copy(self.checkpoint_conf.resume_from, dst)` on rank 0 before the barrier
            return Site(node.lineno, label, "save")
        if name in ("copy", "copyfile", "copy2", "copytree", "move") and recv == "shutil" and len(node.args) >= 2 \
                and any(_DATA_PATH.search(dotted(a).rsplit(".", 1)[-1]) for a in node.args[:2]
                        if isinstance(a, (ast.Name, ast.Attribute))):
            # Poseidon (held-out round 68, missed): local rank 0 copies a data set's file (tens of GB of netCDF)
            # to node-local scratch, `shutil.copy(data_dir, dest_dir)`, before a broadcast the others wait in
            return Site(node.lineno, label)
        if name == "dump" and recv.rsplit(".", 1)[-1] in ("pickle", "joblib", "dill", "cloudpickle"):
            parts = ["save"]   # EDM's network snapshot: `pickle.dump(data, f)` of the networks on rank 0
        if LONG_PARTS.intersection(parts):
            if _small_literal(node.args[0] if node.args else None) or _small_save_name(name):
                return None
            if "download" in parts and any(isinstance(a, ast.Constant) and isinstance(a.value, str)
                                           and a.value.lower().endswith(_SMALL_DOWNLOAD) for a in node.args):
                return None   # `hf_hub_download(repo, "config.json")`: one small file
            if "download" in parts and node.args and isinstance(node.args[0], (ast.Name, ast.Attribute)) \
                    and _SMALL_FILE_NAME.search(dotted(node.args[0]).rsplit(".", 1)[-1]):
                return None   # Composer's `download_object(symlink_file_name, ...)`, `...(metadata_path, ...)`
            if name == "save_pretrained" and "merge" not in recv.lower() and (
                    self._under_adapter_test(node)
                    or any(_ADAPTER.search(ast.unparse(a)) for a in [*node.args, *(k.value for k in node.keywords)])):
                # (OpenVLA's `merged_vla = ....merge_and_unload()` is the whole model again)
                return None   # trlx, LLaVA: `if peft_config is not None and is_main: model.save_pretrained()`;
                # OpenVLA-OFT's `vla.module.save_pretrained(adapter_dir)`: written where the adapter goes
            if name in ("save", "save_file") and (self._picks_trained_tensors(self._scope_of(node.lineno))
                                                  or self._under_adapter_test(node)):
                # AutoTimes: the frozen LLM's tensors deleted from the state dict, then torch.save; fsdp_qlora (held-out
                # round 40): `if train_type in ["custom_lora", ...]:` ... `save_file(lora_state_dict, ...)`
                return Site(node.lineno, label, "small save")
            payload = next((a for a in node.args if not (isinstance(a, ast.Constant) and isinstance(a.value, str))),
                           None)
            if {"save", "dump", "upload", "push", "export"} & set(_parts(name)) \
                    and isinstance(payload, (ast.Name, ast.Attribute)) \
                    and _small_save_name(dotted(payload).rsplit(".", 1)[-1]) \
                    and not _HEAVY.search(name) and not any(   # `push_model_to_hub(cfg)`, `save(cfg, model)`
                        isinstance(a, (ast.Name, ast.Attribute)) and _HEAVY.search(dotted(a))
                        for a in [*node.args, *(k.value for k in node.keywords)] if a is not payload):
                # Lumina's `torch.save(args, path)`: an argparse namespace, not a checkpoint; docTR's ClearML
                # `task.upload_artifact("config", config)`
                return None
            if name == "save_state" and _DATA_RECEIVER.search(recv.rsplit(".", 1)[-1]):
                return None   # Sockeye's `train_iter.save_state(...)`: where the data iterator is, a few KB
            what = ast.unparse(node.args[0]) if node.args else ""
            if name in ("save", "dump") and what and (
                    _ADAPTER.search(what) or _SMALL_STATE.search(what) and not _MODEL_STATE.search(what)):
                return None   # verl's dataloader state, LoRA's `lora.lora_state_dict(model)`: KB to MB
            if name in ("save", "dump") and node.args and _RESULTS.search(ast.unparse(node.args[0])) \
                    and not _HEAVY.search(ast.unparse(node.args[0])):
                return None   # DETR's `torch.save(coco_evaluator.coco_eval["bbox"].eval, ...)`: tens of MB of scores
            return Site(node.lineno, label, save_kind("save" if parts == ["save"] else name))
        return None

    def _in_a_short_loop(self, node: ast.AST) -> bool:
        """Is this inside a loop that leaves at a small count (see :meth:`_stops_after_a_few`)?"""
        key = ("short_loops", "")
        if key not in self.memo:
            self.memo[key] = [(n.lineno, n.end_lineno or n.lineno) for n in self.nodes
                              if isinstance(n, (ast.For, ast.AsyncFor)) and self._stops_after_a_few(n)]
        line = getattr(node, "lineno", 0)
        return any(lo <= line <= hi for lo, hi in self.memo[key])   # type: ignore[attr-defined]

    def _pool_of(self, node: ast.Call, recv: str) -> bool:
        """Is ``recv`` bound, in the call's function, to a pool of worker processes (``Pool(n)``,
        ``multiprocessing.Pool(n)``, ``ProcessPoolExecutor(n)``)?"""
        fn = self._scope_of(node.lineno)
        return any(isinstance(a, ast.Assign) and any(dotted(t) == recv for t in a.targets)
                   and isinstance(a.value, ast.Call) and _POOL.search(dotted(a.value.func))
                   or isinstance(a, ast.With) and any(i.optional_vars is not None and dotted(i.optional_vars) == recv
                                                      and isinstance(i.context_expr, ast.Call)
                                                      and _POOL.search(dotted(i.context_expr.func)) for i in a.items)
                   for a in walk_local(fn if fn is not None else self.tree))

    def _walks_timesteps(self, loop: ast.For | ast.AsyncFor) -> bool:
        """Does the loop run the network once per diffusion timestep: over ``self.num_timesteps`` (or a name its
        function binds to it, pcdiff-implant's ``B, T = x_start.shape[0], self.num_timesteps`` then
        ``for t in reversed(range(T))``), calling the denoiser in its body? A thousand forwards: the bits-per-dim
        diagnostic rank 0 ran alone while the others waited (pcdiff-implant's NCCL timeout, collected blind in
        stop 42), as long as sampling."""
        names = {dotted(n) for n in subtree(loop.iter) if isinstance(n, (ast.Name, ast.Attribute))}
        if not any(_TIMESTEPS.search(n) for n in names) and not names & self._timestep_names(
                self.enclosing_function(loop)):
            return False
        return any(isinstance(c, ast.Call) and any(isinstance(x, (ast.Name, ast.Attribute)) and _NETWORK.search(dotted(x))
                                                   for x in [c.func, *c.args, *(k.value for k in c.keywords)])
                   for s in loop.body for c in walk_local(s))

    def _timestep_names(self, fn: ast.AST | None) -> frozenset[str]:
        """The names a function binds to a diffusion process's step count (``B, T = x.shape[0], self.num_timesteps``),
        found once per function."""
        if fn is None:
            return frozenset()
        key = ("timestep names", str(id(fn)))
        if key not in self.memo:
            self.memo[key] = frozenset(
                t.id for a in walk_local(fn) if isinstance(a, ast.Assign) for tgt in a.targets
                for t, v in assigned_pairs(tgt, a.value) if isinstance(t, ast.Name)
                and isinstance(v, (ast.Name, ast.Attribute)) and _TIMESTEPS.search(dotted(v)))
        return self.memo[key]   # type: ignore[return-value]

    def _stops_after_a_few(self, loop: ast.For | ast.AsyncFor, most: int = 100) -> bool:
        """Does the loop leave at a small count, ``if n >= 25: break`` (the bound a constant, or a parameter of the
        function whose default is one)?"""
        fn = self._scope_of(loop.lineno)
        defaults = dict(_param_defaults(fn)) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) else {}

        def small(x: ast.AST) -> bool:
            value = _const(defaults.get(x.id)) if isinstance(x, ast.Name) and x.id in defaults else _const(x)
            return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= most
        # (not a training loop whose step count a small default caps: AnimateDiff's `max_train_steps: int = 100`)
        return any(isinstance(st, ast.If) and len(st.body) == 1 and isinstance(st.body[0], ast.Break)
                   and isinstance(st.test, ast.Compare) and len(st.test.ops) == 1
                   and isinstance(st.test.ops[0], (ast.GtE, ast.Gt, ast.Eq)) and small(st.test.comparators[0])
                   for st in loop.body) and not any(
            isinstance(n, ast.Call) and call_name(n)[1] in ("backward", "step", "zero_grad") for n in walk_local(loop))

    def _under_media_test(self, node: ast.AST) -> bool:
        """Is this in the body of a test of a sample's kind (CogVideo's ``if artifact_type == "image":
        artifact_value.save(filename)``)? Then what is saved is one image, clip or sound."""
        key = ("media_lines", "")
        if key not in self.memo:
            # (or of its class: finetrainers' `if isinstance(artifact, data.ImageArtifact): artifact.value.save(...)`)
            self.memo[key] = [(n.body[0].lineno, n.body[-1].end_lineno or n.body[-1].lineno)
                              for n in self.nodes if isinstance(n, ast.If) and any(
                                  isinstance(c, ast.Constant) and isinstance(c.value, str)
                                  and _MEDIA.search(c.value.lower())
                                  or isinstance(c, ast.Call) and call_name(c)[1] == "isinstance" and len(c.args) == 2
                                  and any(_MEDIA.search(p) for p in _parts(dotted(c.args[1]).rsplit(".", 1)[-1]))
                                  for c in subtree(n.test))]
        line = getattr(node, "lineno", 0)
        return any(a <= line <= b for a, b in self.memo[key])   # type: ignore[attr-defined]

    def _picks_trained_tensors(self, fn: ast.AST | None) -> bool:
        """Is ``fn`` named for saving, and does it read ``requires_grad`` to pick what it writes (AutoTimes: the
        frozen LLM's tensors deleted from the state dict first)? What it writes is the trained part, an adapter's
        size. (Only a function named for saving: lerobot's long train() reads requires_grad for other reasons.)"""
        return isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and save_kind(fn.name) == "save" \
            and any(isinstance(n, ast.Attribute) and n.attr == "requires_grad" and isinstance(n.ctx, ast.Load)
                    for n in walk_local(fn))

    def _under_adapter_test(self, node: ast.AST) -> bool:
        """Is this inside ``if`` a test of LoRA/PEFT/adapters (``if training_args.lora_enable:``)? Then the
        model saved is an adapter of a few MB, not the model."""
        if self._adapter_lines is None:
            self._adapter_lines = []
            for n in self.nodes:
                if isinstance(n, ast.If) and _ADAPTER.search(ast.unparse(n.test)):
                    # `if not self.lora_enabled:` saves the whole model (align-anything); its else, the adapter
                    negated = isinstance(n.test, ast.UnaryOp) and isinstance(n.test.op, ast.Not)
                    side = n.orelse if negated else n.body
                    if side:
                        self._adapter_lines.append((side[0].lineno, side[-1].end_lineno or side[-1].lineno))
        line = getattr(node, "lineno", 0)
        return any(lo <= line <= hi for lo, hi in self._adapter_lines)

    def function_long_work(self, name: str, cls: str | None = None) -> Site | None:
        """The first long work a function of this file does (its name may say it: ``evaluate``); with ``cls``,
        the method of that class."""
        key = f"{cls}.{name}" if cls else name
        if key in self._long:
            return self._long[key]
        self._long[key] = None
        found: Site | None = None
        for fn in self.defs_of(name, cls):
            # (not InternImage's save_config, nor FunCodec's generate_data_list: what they do decides)
            if LONG_PARTS.intersection(_parts(name)) and not _log_line_name(name) and not _lookup_name(name) \
                    and not _small_save_name(name) and not _listing_name(name):
                if not self._writes_metadata_only(fn) and not self._only_light_calls(fn):
                    if _previews_one_batch(fn):
                        # MB-iSTFT-VITS2's evaluate() (held-out round 123, false): the first batch of the loader,
                        # cut to one utterance and synthesised once, for TensorBoard: seconds, weighed as a plot is
                        found = Site(fn.lineno, f"{name}() (one batch of its loader: a preview)", "plot")
                        break
                    found = Site(fn.lineno, f"{name}()", "small save" if self._picks_trained_tensors(fn)
                                 else self._named_save_kind(name, fn))
                    break
                continue
            light: Site | None = None
            for node in walk_local(fn):
                if node is fn:
                    continue
                site = self.long_work_of(node)
                if site is not None and not _light(site):
                    found = site
                    break
                light = light or site
            # only drawings (Tacotron 2's log_validation: TensorBoard images): said so, for the caller to weigh
            found = found or light
            if found:
                break
        self._long[key] = found
        return found

    def _named_save_kind(self, name: str, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
        """The kind of a function named for its long work: ``"save"`` when the name says it saves and nothing
        it does is other long work (an evaluation, a download, a loop over data)."""
        if save_kind(name) != "save":
            return "work"
        for node in walk_local(fn):
            site = self.long_work_of(node) if node is not fn else None
            if site is not None and not _light(site) and site.kind not in SAVE_KINDS:
                return "work"
        return "save"

    def _only_light_calls(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        """Does the function only print, count and hand scalars to a writer, itself or through functions of
        this file that do the same (UniMatch's ``Logger.push(metrics)``: a name that says "upload", a body that
        adds to running sums and calls ``summary_writer.add_scalar``)?"""
        calls = [n for n in walk_local(fn) if isinstance(n, ast.Call)]
        defaults = {p: _const(v) for p, v in _param_defaults(fn)}
        for call in calls:
            recv, name = call_name(call)
            if _light_call(call) or recv in ("self", "") and name in self.functions and name not in self.imported \
                    and self.function_long_work(name) is None:
                continue
            if name == "open" and not recv and self._appends_a_line(call, defaults):
                continue   # MOTIP's Logger._save: `open(os.path.join(self.logdir, filename), mode=mode)`, "a" by default
            ext = self.external(recv, name) if not recv else None
            if ext is not None and ext[0].function_long_work(ext[1]) is None:
                continue   # a helper of another file that does no long work (the recap trainer's `infer_fs(path)`)
            return False
        # no call and no loop: CBIM's `filter_validation_results(dice, asd, hd, args)` slices three lists
        return bool(calls) or not any(isinstance(n, (ast.For, ast.AsyncFor, ast.While)) for n in walk_local(fn))

    @staticmethod
    def _appends_a_line(call: ast.Call, defaults: dict[str, object]) -> bool:
        """Does this ``open()`` append to a text file (mode ``"a"``, given, or the default of the parameter handed
        to it)?"""
        mode = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "mode"), None)
        value = _const(mode) if mode is not None else "r"
        if isinstance(mode, ast.Name) and mode.id in defaults:
            value = defaults[mode.id]
        return isinstance(value, str) and value.startswith("a") and "b" not in value

    def _writes_metadata_only(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        """A function named for saving whose every save writes a small literal or a config file
        (``_save_extra_state``: ``torch.save({"global_step": ..., "epoch": ...}, path)``)."""
        saves = [n for n in walk_local(fn) if isinstance(n, ast.Call) and LONG_PARTS.intersection(_parts(call_name(n)[1]))]
        return bool(saves) and all(_small_literal(n.args[0] if n.args else None) or _small_save_name(call_name(n)[1])
                                   for n in saves)

    def waits_for_others(self, line: int) -> bool:
        """Is this line inside ``with <something that waits>(...)``: composer's
        ``local_rank_zero_download_and_wait``, a file or flag the other ranks wait on before the collective,
        so they do not sit in it while one rank works?"""
        if self._waiting is None:
            self._waiting = [(node.body[0].lineno, node.end_lineno or node.lineno) for node in self.nodes
                             if isinstance(node, (ast.With, ast.AsyncWith)) and any(
                                 isinstance(item.context_expr, ast.Call)
                                 and _WAITING.search(call_name(item.context_expr)[1])
                                 and self.collective_of(item.context_expr) is None for item in node.items)]
        return any(lo <= line <= hi for lo, hi in self._waiting)

    def first_long_work(self, stmts: list[ast.stmt], skip: frozenset[int] = frozenset()) -> Site | None:
        """The first long work of the region, preferring a heavy one (a save, an evaluation) to a plot or a
        log push that comes before it (VITS: four spectrogram plots, then a 1 GB checkpoint)."""
        light: Site | None = None
        for i, stmt in enumerate(stmts):
            best: Site | None = None
            for node in walk_local(stmt, skip):
                site = self.long_work_of(node)
                if site is not None and (best is None or site.line < best.line) and not _light(site):
                    best = site
                elif site is not None and _light(site) and (light is None or site.line < light.line):
                    light = site
            if best is not None:
                other = self._other_work_after(stmts[i:], best) if best.kind in SAVE_KINDS else None
                if other is not None:
                    # a save, then an evaluation: the region's work is long, and the message says what follows
                    return replace(best, kind="work", label=f"{best.label} (then {other})")
                return best
        # a plot alone is not long work (GPT-SoVITS: four spectrogram images every log interval); an upload is, and
        # so is the start of a logging service's run (a note: see checks.SERVICE_NOTE)
        return light if light is not None and light.kind in ("logging", "service") else None

    def _other_work_after(self, stmts: list[ast.stmt], save: Site) -> str | None:
        """The long work other than checkpoint saves in ``stmts`` (the region from the statement of its first
        save) after that save, said with where it is (up to three: stylegan2-pytorch's sample grids, then its FID,
        the longest, which a reader looks for), or None."""
        found = sorted({site.line: site for stmt in stmts for node in walk_local(stmt)
                        if (site := self.long_work_of(node)) is not None and site.line >= save.line
                        and not _light(site) and site.kind not in SAVE_KINDS}.values(), key=lambda s: s.line)
        return ", ".join(f"{s.label} at {s.at}" for s in found[:3]) or None

    def _path_names_a_file(self, call: ast.Call, kinds: tuple[str, ...]) -> bool:
        """Is a path the call is given, held in a local name, always a file name with one of these endings
        (StableCascade's ``full_path = f".../info{suffix}.json"``, then ``safe_save(vars(self.info), full_path)``)?"""
        fn = self._scope_of(call.lineno)
        if fn is None:
            return False
        for arg in [*call.args, *(k.value for k in call.keywords)]:
            if not (isinstance(arg, ast.Name) and _PATH_NAME.search(arg.id)):
                continue
            values = [n.value for n in walk_local(fn) if isinstance(n, ast.Assign)
                      and any(isinstance(t, ast.Name) and t.id == arg.id for t in n.targets)]
            if values and all(_spells_a_file(v, kinds) for v in values):
                return True
        return False

    def may_be_big(self, *, off: frozenset[str] = frozenset()) -> bool:
        """Does this file, or a file named on the command line, say the model may be large (sharded training, a
        large pretrained model)? A rank-0 checkpoint save is then long enough to report. ``off``: the ways of
        sharding (see SHARDING_MODES) the path does not take: sharded training says nothing of the model's size
        there when those are all the file names."""
        def big(f: SourceFacts) -> bool:
            return f.big_model_named or f.big_model and not f.shard_modes <= off if off else f.big_model
        return big(self) or self.project is not None and self.project.any_named(big)

    # -- program order ----------------------------------------------------------------------------------
    def next_collective_after(self, stmt: ast.AST, *, depth: int = 1, sync: bool = False) -> Site | None:
        """The first collective every rank reaches after ``stmt``: later statements, the next pass of an
        enclosing loop, and (``depth`` levels) what follows the calls of the enclosing function. ``sync``: a wait
        at a barrier of the launching processes counts too (see :meth:`cpu_barrier_of`)."""
        first = self.first_sync if sync else self.first_collective
        node = stmt
        leaving: type | None = None   # ast.Break / ast.Continue / ast.Return: the rest of the block is skipped
        while id(node) in self.parents:
            block, i, owner = self.parents[id(node)]
            if leaving is None:
                rest = block[i + 1:]
                for later in rest:
                    # audiolm's `if self.is_main and not (steps % self.save_model_every): self.save(...)`: a branch
                    # taken on the main rank only is not where every rank goes next (its `else` is)
                    site = first(later.orelse if isinstance(later, ast.If)
                                                 and self.on_main_only(later) else later)
                    if site is not None:
                        return site
                    if ends_group(later):
                        return None   # `accelerator.end_training()`, `dist.destroy_process_group()`: no more
                # modded-nanogpt: `if last_step: <rank-0 save>; break` leaves the loop on every rank, so the
                # collectives of the loop's next pass are never reached
                leaving = next((type(s) for s in rest if isinstance(s, (ast.Break, ast.Continue, ast.Return))), None)
            if isinstance(owner, ast.Try) and block is not owner.finalbody:
                # the `else:` of a try body left the usual way, then its `finally:`, which runs on every way out
                # (Composer's download_checkpoint: local rank 0 downloads in the `try:`, every rank meets
                # `dist.barrier()` in the `finally:`)
                for later in ([*owner.orelse] if block is owner.body and leaving is None else []) + owner.finalbody:
                    site = first(later)
                    if site is not None:
                        return site
            loop = isinstance(owner, (ast.For, ast.AsyncFor, ast.While)) and block is owner.body
            if loop and leaving is ast.Break:
                leaving = None   # what follows the loop comes next
            elif loop and leaving in (None, ast.Continue):
                leaving = None
                site = first(block[:i])
                here = block[i]
                flagged_exit = any(isinstance(s, ast.If) and any(isinstance(b, ast.Break) for b in s.body)
                                   for s in block[i + 1:])   # GraphCast: `if terminate_training: break`
                if site is None and node is not stmt and not flagged_exit and not (
                        isinstance(here, ast.If) and self.is_rank_condition(here.test) and not self.deals_round_robin(here)):
                    # the statement we are in runs again in the next pass, for every rank (PreSumm: the rank-0
                    # save sits in `if accum == grad_accum_count:` after that block's all_gather)
                    site = first(here)
                if site is not None:
                    return site
            if isinstance(owner, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if depth <= 0:
                    return None
                for caller in self.callers_of(owner):
                    site = self.next_collective_after(caller, depth=depth - 1, sync=sync)
                    if site is not None:
                        return site
                for other, caller in self.project.callers(self, owner.name) if self.project else ():
                    site = other.next_collective_after(caller, depth=depth - 1, sync=sync)
                    if site is not None:
                        return other._elsewhere(other, site)
                # a method called by a loop of a base class in another file (DBNet's BaseTrainer.train():
                # `for epoch ...: self._train_epoch(epoch); self._on_epoch_finish()`, both overridden here)
                for base, caller in self.base_callers(owner):
                    site = base.next_collective_after(caller, depth=depth - 1, sync=sync) or self._next_pass_in(base, caller, owner)
                    if site is not None:
                        # (no call in the script stands for it: reported here, see RawFinding.across)
                        return replace(base._elsewhere(base, site) if not site.path and base is not self else site,
                                       by_base=True)
                # GPT-SoVITS: `for epoch in ...: train_and_evaluate(...)`: the next pass calls this function again
                for caller in self.callers_of(owner):
                    if self.enclosing_loop(caller) is not None:
                        again = self.function_collective(owner.name)
                        if again is not None:
                            return replace(again, label=f"{again.label}, in the next call of {owner.name}()")
                return None
            if isinstance(owner, ast.Module):
                return None
            node = owner
        return None

    def base_callers(self, fn: ast.AST) -> list[tuple[SourceFacts, ast.stmt]]:
        """The statements of the base classes' files (other files of the project) that call this method
        through ``self.`` (a template method of the base class: its loop, this class's step)."""
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                or not isinstance(self.parents.get(id(fn), (None, None, None))[2], ast.ClassDef):
            return []
        out: list[tuple[SourceFacts, ast.stmt]] = []
        for base in self._base_modules():
            for stmt in base.calls_to.get(fn.name, []):
                if any(isinstance(n, ast.Call) and call_name(n) == ("self", fn.name) for n in walk_local(stmt)) \
                        and all(stmt is not s for _b, s in out):
                    out.append((base, stmt))
        return out

    def _next_pass_in(self, base: SourceFacts, caller: ast.stmt, fn: ast.AST) -> Site | None:
        """The next pass of the base class's loop around ``caller``: the methods of this file it calls through
        ``self.`` (this class's overrides) and the collectives they reach."""
        loop = base.enclosing_loop(caller)
        if loop is None:
            return None
        for node in walk_local(loop):
            if isinstance(node, ast.Call) and call_name(node)[0] == "self" and node is not caller:
                name = call_name(node)[1]
                if name != getattr(fn, "name", "") and name in self.functions:
                    inner = self.function_collective(name)
                    if inner is not None:
                        return Site(node.lineno, f"the next pass of the loop at {Path(base.path).name}:{loop.lineno}: "
                                                 f"self.{name}() (this class's, which reaches {inner.label} at "
                                                 f"{inner.at})",
                                    path=Path(base.path).name, by_base=True)
        return None

    def main_side(self, term: ast.AST) -> bool | None:
        """Does a rank test hold on the main rank (``rank == 0``, ``is_main``, ``local_rank in [-1, 0]``: True)
        or on the others (``rank != 0``, ``not is_main``: False)? None when it cannot tell."""
        if isinstance(term, ast.UnaryOp) and isinstance(term.op, ast.Not):
            inner = self.main_side(term.operand)
            return None if inner is None else not inner
        if isinstance(term, (ast.Name, ast.Attribute)):
            if self.is_rank_value(term):
                return False   # `if local_rank and ...:` holds on the ranks other than 0
            return True if self.is_rank_condition(term) else None
        if isinstance(term, ast.Compare) and len(term.ops) == 1:
            consts = [_const(s) for s in (term.left, *term.comparators)]
            if isinstance(term.comparators[0], (ast.List, ast.Tuple, ast.Set)):
                consts += [_const(e) for e in term.comparators[0].elts]
            if 0 not in consts:
                return None
            if isinstance(term.ops[0], (ast.Eq, ast.In, ast.LtE)):
                return True
            if isinstance(term.ops[0], (ast.NotEq, ast.NotIn, ast.Gt)):
                return False
        return None

    def on_main_only(self, stmt: ast.If) -> bool:
        """Does the ``if`` hold on the main rank only: a test of the rank on the main side (:meth:`main_side`),
        alone or and-ed with other terms?"""
        if not self.rank_branch(stmt):
            return False
        test = stmt.test
        terms = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
        return any(self.is_rank_condition(t) and self.main_side(t) is True for t in terms)

    def rank_branch(self, stmt: ast.If) -> bool:
        """Does the ``if`` test this process's rank (not a loop counter over the ranks' indices)?"""
        return self.is_rank_condition(stmt.test) and not self.counts_over_ranks(stmt)

    def counts_over_ranks(self, stmt: ast.If) -> bool:
        """Is every rank-like name the test reads the target of a loop around it that walks the ranks' indices
        (InternEvo's ``for rank, group_id in product(range(max(zero_sizes)), ...)``, then ``if rank >= size:
        continue``)? Every process runs every pass, so the test holds alike on all of them: a counter, not this
        process's rank. A loop over a rank-derived iterable, or a test that also reads this process's rank, is
        not one."""
        targets: set[str] = set()
        node: ast.AST = stmt
        while id(node) in self.parents:
            owner = self.parents[id(node)][2]
            if isinstance(owner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
                break
            if isinstance(owner, (ast.For, ast.AsyncFor)) and not any(
                    isinstance(n, (ast.Name, ast.Attribute, ast.Call)) and self.is_rank_value(n)
                    for n in subtree(owner.iter)):
                targets.update(n.id for n in subtree(owner.target) if isinstance(n, ast.Name))
            node = owner
        ranks = [n for n in subtree(stmt.test) if isinstance(n, (ast.Name, ast.Attribute, ast.Call))
                 and self.is_rank_value(n)]
        return bool(ranks) and all(isinstance(n, ast.Name) and n.id in targets for n in ranks)

    def deals_round_robin(self, stmt: ast.If) -> bool:
        """``for i, batch in enumerate(train_iter): if i % n_gpu == gpu_rank: <step with its collectives>``
        (PreSumm): the test picks this rank's share of the loop's items, every rank takes its turn at each of
        its own, and all call the collectives inside once per share; not a branch some ranks skip."""
        loop = self.enclosing_loop(stmt)
        if loop is None or not isinstance(loop, (ast.For, ast.AsyncFor)):
            return False
        return any(self.compares_turn(n, loop, ast.Eq) for n in subtree(stmt.test))

    def compares_turn(self, node: ast.AST, loop: ast.For | ast.AsyncFor, op: type[ast.cmpop]) -> bool:
        """Is ``node`` ``i % world <op> rank`` (either way round), with ``i`` a name the loop binds?"""
        if not (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], op)):
            return False
        loop_vars = {n.id for n in subtree(loop.target) if isinstance(n, ast.Name)}
        return any(isinstance(a, ast.BinOp) and isinstance(a.op, ast.Mod) and isinstance(a.left, ast.Name)
                   and a.left.id in loop_vars and self.is_rank_value(b)
                   for a, b in ((node.left, node.comparators[0]), (node.comparators[0], node.left)))

    def callers_of(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.stmt]:
        """The statements of this file that call ``fn``: a function by its bare name, a method through
        ``self``/``cls`` or another receiver; in both cases with arguments it can take. sd-scripts'
        ``NetworkTrainer.train(self, args)`` is not called by ``unet.train()``, nor is a module-level
        ``train(...)`` by ``model.train()``."""
        owner = self.parents.get(id(fn), (None, None, None))[2]
        method = isinstance(owner, ast.ClassDef)
        params = fn.args.posonlyargs + fn.args.args
        if method and params and params[0].arg in ("self", "cls"):
            params = params[1:]
        required = len(params) - len(fn.args.defaults)
        names = {a.arg for a in params + fn.args.kwonlyargs}
        out = []
        for stmt in self.calls_to.get(fn.name, []):
            for call in (n for n in subtree(stmt) if isinstance(n, ast.Call)):
                recv, name = call_name(call)
                if name != fn.name or (not method and recv) or (method and not recv):
                    continue
                if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
                    out.append(stmt)
                    break
                given = len(call.args) + sum(k.arg in names for k in call.keywords)
                fits = (len(call.args) <= len(params) or fn.args.vararg is not None) and given >= required \
                    and all(k.arg in names or fn.args.kwarg is not None for k in call.keywords)
                if fits:
                    out.append(stmt)
                    break
        return out

    def enclosing_loop(self, stmt: ast.AST) -> ast.For | ast.AsyncFor | ast.While | None:
        """The innermost loop around the statement, within its own function (or the module), or None."""
        node = stmt
        while id(node) in self.parents:
            _block, _i, owner = self.parents[id(node)]
            if isinstance(owner, (ast.For, ast.AsyncFor, ast.While)):
                return owner
            if isinstance(owner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
                return None
            node = owner
        return None

    def single_process_only(self, line: int, depth: int = 4) -> bool:
        """Does the code at ``line`` run only in a run of one process, where no rank waits for another? It is in
        a top-level function every call of which, in this file and in the project's others, sits under a test
        that the run is not distributed (YOLOv9's ``if RANK == -1 and batch_size == -1:
        check_train_batch_size(...)``, whose autobatch profiles a forward and a backward in ``except
        Exception``), or in such a function in turn (``depth`` levels). A call from the ``__main__`` block of an
        imported file counts like any other: that file may be a script of its own (Atlas's ``evaluate.py``,
        which ``train.py`` imports and users also launch on every rank)."""
        top = next((n for n in self.tree.body if n.lineno <= line <= (n.end_lineno or n.lineno)), None)
        if not isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef)) or depth <= 0:
            return False
        key = ("single process", f"{top.name}:{depth}")
        if key not in self.memo:
            self.memo[key] = False   # (a call of itself, or a cycle: not known to be guarded)
            # handed on rather than called (`mp.spawn(run, ...)` beside `if n_gpus == 1: run(0, ...)`, DGL's
            # GraphSAGE; `Process(target=main_worker)`): it runs where that is called, not known to be one process
            files = self.project.checked() if self.project is not None else [self]
            if any(top.name in f.handed_on_names() for f in files):
                return False
            calls = [(self, stmt) for stmt in self.calls_to.get(top.name, [])
                     if not top.lineno <= stmt.lineno <= (top.end_lineno or top.lineno)]
            if self.project is not None:
                calls += self.project.callers(self, top.name)
            calls = [(other, stmt) for other, stmt in calls if other._calls_function_of(stmt, top.name, self)]
            self.memo[key] = bool(calls) and all(
                other._under_single_process_test(stmt) or other.single_process_only(stmt.lineno, depth - 1)
                for other, stmt in calls)
        return bool(self.memo[key])

    def handed_on_names(self) -> frozenset[str]:
        """The names this file hands to a call as a value (``mp.spawn(run, ...)``, ``Process(target=worker)``,
        ``pool.submit(mod.task)``), other than a function's own parameters and variables (YOLOv9's
        ``self._forward_once(x, profile, visualize)`` hands on its ``profile`` flag, not the function)."""
        key = ("handed on names", "")
        if key not in self.memo:
            out: set[str] = set()
            scopes: list[ast.AST] = [self.tree, *(n for n in self.nodes if isinstance(n, _NESTED))]
            for scope in scopes:
                nodes = list(walk_local(scope))
                own: set[str] = set()
                if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                    a = scope.args
                    own = {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if x}
                own |= {n.id for n in nodes if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
                for call in (n for n in nodes if isinstance(n, ast.Call)):
                    for value in [*call.args, *(k.value for k in call.keywords)]:
                        if isinstance(value, ast.Name) and value.id not in own:
                            out.add(value.id)
                        elif isinstance(value, ast.Attribute):
                            out.add(value.attr)
            self.memo[key] = frozenset(out)
        return self.memo[key]   # type: ignore[return-value]

    def _calls_function_of(self, stmt: ast.AST, name: str, owner: SourceFacts) -> bool:
        """Does the statement call the top-level function ``name`` of ``owner`` (resolved as :meth:`external`
        resolves any call), not a method or another library's function of that name (YOLOv9's
        ``thop.profile(m, ...)`` beside its own ``profile``)?"""
        for node in subtree(stmt):
            if not isinstance(node, ast.Call):
                continue
            recv, called = call_name(node)
            if owner is self and not recv and called == name \
                    or (ext := self.external(recv, called)) is not None and ext[0] is owner and ext[1] == name:
                return True
        return False

    def _under_single_process_test(self, stmt: ast.AST) -> bool:
        """Is the statement in the body of an ``if`` that holds only when the run is not distributed?"""
        node = stmt
        while id(node) in self.parents:
            block, _i, owner = self.parents[id(node)]
            if isinstance(owner, ast.If) and block is owner.body and _tests_single_process(owner.test):
                return True
            node = owner
        return False

    def enclosing_function(self, stmt: ast.AST) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        node = stmt
        while id(node) in self.parents:
            _block, _i, owner = self.parents[id(node)]
            if isinstance(owner, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return owner
            node = owner
        return None

    # -- constants --------------------------------------------------------------------------------------
    def field_defaults(self, name: str) -> list[ast.AST]:
        """The constant defaults of the fields called ``name`` in this file's classes: ``name: int = 120``,
        ``name: int = field(default=120)``, ``name = 120`` in a class body."""
        key = ("field_defaults", name)
        if key not in self.memo:
            out: list[ast.AST] = []
            for cls in (n for n in self.nodes if isinstance(n, ast.ClassDef)):
                for stmt in cls.body:
                    target = stmt.target if isinstance(stmt, ast.AnnAssign) else stmt.targets[0] \
                        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None
                    if not (isinstance(target, ast.Name) and target.id == name and stmt.value is not None):
                        continue
                    value = stmt.value
                    if isinstance(value, ast.Call) and call_name(value)[1] == "field":
                        value = next((k.value for k in value.keywords if k.arg == "default"), None)
                    if value is not None and isinstance(_const(value), (int, float)):
                        out.append(value)
            self.memo[key] = out
        return self.memo[key]   # type: ignore[return-value]

    def seconds(self, node: ast.AST, _depth: int = 0) -> float | None:
        """The number of seconds an expression evaluates to, when it can be read from the file."""
        if _depth > 5:
            return None
        c = _const(node)
        if isinstance(c, (int, float)) and not isinstance(c, bool):
            return float(c)
        if isinstance(c, str):
            try:
                return float(c.replace("_", ""))
            except ValueError:
                return None
        if isinstance(node, ast.IfExp):
            # ``timeout_s if num_workers > 0 else 0`` (MU-Diff): the larger branch is the timeout in force
            # whenever there is one (a DataLoader takes a timeout only with workers)
            values = [v for v in (self.seconds(node.body, _depth + 1), self.seconds(node.orelse, _depth + 1))
                      if v is not None]
            return max(values) if values else None
        if isinstance(node, ast.BinOp):
            a, b = self.seconds(node.left, _depth + 1), self.seconds(node.right, _depth + 1)
            if a is None or b is None:
                return None
            ops = {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b}
            if isinstance(node.op, (ast.Div, ast.FloorDiv)):
                return a / b if b else None
            return ops.get(type(node.op))
        if isinstance(node, ast.Call):
            recv, name = call_name(node)
            if name == "timedelta":
                units = {"days": 86400, "seconds": 1, "microseconds": 1e-6, "milliseconds": 1e-3, "minutes": 60,
                         "hours": 3600, "weeks": 604800}
                total = 0.0
                for value, unit in zip(node.args, ("days", "seconds", "microseconds"), strict=False):
                    v = self.seconds(value, _depth + 1)
                    if v is None:
                        return None
                    total += v * units[unit]
                for kw in node.keywords:
                    v = self.seconds(kw.value, _depth + 1)
                    if v is None or kw.arg not in units:
                        return None
                    total += v * units[kw.arg]
                return total
            if name in ("int", "float") and node.args:
                return self.seconds(node.args[0], _depth + 1)
            if name == "total_seconds" and isinstance(node.func, ast.Attribute):
                return self.seconds(node.func.value, _depth + 1)
            if name in ("get", "getenv") and len(node.args) == 2:
                return self.seconds(node.args[1], _depth + 1)
            return None
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                node.attr in self.argparse_defaults and node.value.id in ("args", "opt", "opts", "cfg", "config", "hparams"):
            return self.seconds(self.argparse_defaults[node.attr], _depth + 1)
        if isinstance(node, ast.Attribute):
            # a field of a settings class of the project, with its default (open-instruct's
            # `timedelta(minutes=args.backend_timeout)`, `backend_timeout: int = 120` in grpo_utils.py's dataclass;
            # blind collection of stop 46): one value wherever the name is a field
            defaults = [d for facts in (self, *self.local_modules()) for d in facts.field_defaults(node.attr)]
            if defaults and len({ast.dump(d) for d in defaults}) == 1:
                return self.seconds(defaults[0], _depth + 1)
        if isinstance(node, ast.Name):
            values = [n.value for n in self.nodes if isinstance(n, ast.Assign)
                      and any(isinstance(t, ast.Name) and t.id == node.id for t in n.targets)]
            if len(values) == 1:
                return self.seconds(values[0], _depth + 1)
            if not values:
                # a parameter with a default (``def __init__(self, timeout_s: float = 1800.0)``)
                defaults = [d for fn in (n for defs in self.functions.values() for n in defs)
                            for a, d in _param_defaults(fn) if a == node.id]
                if len(defaults) == 1:
                    return self.seconds(defaults[0], _depth + 1)
        return None


def _returns_false_without(fn: ast.FunctionDef | ast.AsyncFunctionDef, param: str) -> bool:
    """Does ``fn`` begin (after guards that return False, before any other statement) with ``if not param: return
    False`` or ``if not (... or param): return False``?"""
    for stmt in fn.body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue   # the docstring
        if not (isinstance(stmt, ast.If) and not stmt.orelse and len(stmt.body) == 1
                and isinstance(stmt.body[0], ast.Return) and isinstance(stmt.body[0].value, ast.Constant)
                and stmt.body[0].value.value in (False, None, 0)):
            return False   # (a guard that returns False before it, `if not interval: return False`, is fine)
        test = stmt.test
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            inner = test.operand
            terms = inner.values if isinstance(inner, ast.BoolOp) and isinstance(inner.op, ast.Or) else [inner]
            if any(isinstance(t, ast.Name) and t.id == param for t in terms):
                return True
    return False
