"""The shape every scenario module fills in: a rank program, parameters, variants, ground truth.

A scenario module defines

- a frozen ``Params`` dataclass (every knob of the rank program, with the defaults nbval runs),
- ``program(ctx, params) -> dict`` (a module-level function: it is pickled by reference and runs
  on every engine), and
- ``SCENARIO = Scenario(...)`` naming the variants: ``broken`` and one or more fixes, each a
  :class:`Variant` that changes params and/or the process-group timeout.

Registering the module in :mod:`nccl_workbook.scenarios` makes it available to the CLI, the
notebooks and the tests. See ``rank0_work_before_barrier.py`` for a complete example.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Scenario", "Variant"]

_ID = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


@dataclass(frozen=True)
class Variant:
    """One way to run a scenario.

    ``params`` overrides fields of the scenario's ``Params``; ``pg_timeout_s`` (a function of the
    requested timeout and the params) gives the process-group timeout this variant uses, e.g.
    the seed's "make the timeout longer" fix.
    """

    name: str
    description: str
    params: Mapping[str, Any] = field(default_factory=dict)
    expect_ok: bool = True
    pg_timeout_s: Callable[[float, Any], float] | None = None
    debug_level: str | None = None


@dataclass(frozen=True)
class Scenario:
    """A reproducible incident: see the module docstring."""

    id: str
    title: str
    symptom: str
    seed: str
    program: Callable[..., dict[str, Any] | None]
    params_type: type
    variants: tuple[Variant, ...]
    expected_culprits: Callable[[Any, int], tuple[int, ...]]
    expected_op: str
    notebook: str
    #: client-side deadline for one run, from (params, pg_timeout_s); generous, only hangs hit it
    deadline_s: Callable[[Any, float], float] = lambda p, t: 4 * t + 30
    default_timeout_s: float = 3.0
    #: False: the rank program calls ``init_process_group`` itself (from ``ctx.init_method``), for
    #: scenarios about init; the run then skips its own group init (``RankSpec.init_group``)
    init_group: bool = True

    def __post_init__(self) -> None:
        if not _ID.match(self.id):
            raise ValueError(f"scenario id {self.id!r} must be kebab-case")
        names = [v.name for v in self.variants]
        if "broken" not in names:
            raise ValueError(f"scenario {self.id!r} needs a 'broken' variant, has {names}")
        if len(set(names)) != len(names):
            raise ValueError(f"scenario {self.id!r} has duplicate variant names: {names}")
        fields = {f.name for f in dataclasses.fields(self.params_type)}
        for v in self.variants:
            unknown = set(v.params) - fields
            if unknown:
                raise ValueError(f"variant {v.name!r} of {self.id!r} sets unknown params {sorted(unknown)}; known: {sorted(fields)}")

    @property
    def variant_names(self) -> list[str]:
        return [v.name for v in self.variants]

    @property
    def fix_names(self) -> list[str]:
        return [v.name for v in self.variants if v.name != "broken"]

    def variant(self, name: str) -> Variant:
        for v in self.variants:
            if v.name == name:
                return v
        raise KeyError(f"Unknown variant {name!r} of scenario {self.id!r}; known: {', '.join(self.variant_names)}")

    def params_for(self, variant: str, **overrides: Any) -> Any:
        """The params a variant runs with: the defaults, then the caller's overrides, then the
        variant's own settings (which define the variant, so they win)."""
        v = self.variant(variant)
        fields = {f.name for f in dataclasses.fields(self.params_type)}
        unknown = set(overrides) - fields
        if unknown:
            raise ValueError(f"unknown parameter(s) {sorted(unknown)} for {self.id!r}; known: {sorted(fields)}")
        return self.params_type(**{**overrides, **dict(v.params)})

    def timeout_for(self, variant: str, requested_s: float, params: Any) -> float:
        v = self.variant(variant)
        return float(v.pg_timeout_s(requested_s, params)) if v.pg_timeout_s else float(requested_s)
