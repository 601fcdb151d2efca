"""What a source-tree runtime is: :class:`SourceRuntime` (what was named, what is compiled
and where) and :class:`TreeApi` (what the tree's headers offer the agent).

:mod:`harness.runtime.source_tree` makes one (``ET_HARNESS_RUNTIME=PATH[@REV]``); the
:class:`~harness.runtime.wheel_sdk.SdkPaths` of a source tree carries it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path


@dataclasses.dataclass(frozen=True)
class TreeApi:
    """What a tree's headers offer the agent; each absent part is one line of HELLO."""

    load_time_map: bool  # Program::load_method takes a LoadBackendOptionsMap ("3/x")
    module_load_map: bool  # Module::load(map) and Module::load_method(..., &map) ("4/x")
    entry_at: bool  # LoadBackendOptionsMap::entry_at(i): a map can be walked (#19645)
    load_method_kernel_registry: bool  # Module::load_method(..., kernel_registry) (#19641)

    def defines(self) -> tuple[str, ...]:
        """The agent's compile definitions (agent/runtime/src/tree_api.h)."""
        return tuple(
            f"ETB_HAS_{name.upper()}={int(getattr(self, name))}"
            for name in ("load_time_map", "module_load_map", "entry_at",
                         "load_method_kernel_registry")
        )  # fmt: skip

    def absent(self) -> tuple[str, ...]:
        """One line per capability the tree lacks (HELLO ``lacks``, the run summary)."""
        lines = []
        if not self.load_time_map:
            lines.append(
                "load-time map: Program::load_method takes no LoadBackendOptionsMap in this "
                "tree (before '3/x: Wire LoadBackendOptionsMap through Program and Method'); "
                "no load path is served"
            )
        if self.load_time_map and not self.module_load_map:
            lines.append(
                "Module::load(map): extension::Module takes no LoadBackendOptionsMap in this "
                "tree (before '4/x'); the module load paths are not served"
            )
        if not self.entry_at:
            lines.append("LoadBackendOptionsMap::entry_at: a map cannot be walked in this tree")
        return tuple(lines)


@dataclasses.dataclass(frozen=True)
class SourceRuntime:
    """A runtime compiled from a source tree: what was named, what is compiled, where."""

    checkout: Path  # the tree the user named (only read)
    revision: str | None  # the revision named, if any
    tree: Path  # what is compiled: the checkout, or the revision's export in the cache
    home: Path  # the cache directory of this runtime: generated headers, agent builds
    flatbuffers: Path  # the flatbuffers headers the tree's schema code needs
    commit: str  # the full hash, or "" when the tree is no git checkout
    subject: str
    upstream: str  # "pytorch/executorch@<hash>" when the commit message names one
    version: str  # version.txt
    digest: str  # of the compiled files (the commit's tree hash for a revision)
    api: TreeApi

    @property
    def label(self) -> str:
        """How HELLO's ``runtime`` fact and the summary name it."""
        at = f" @ {self.commit[:10]}" if self.commit else ""
        return f"{self.version} from source {self.checkout}{at}"

    @property
    def from_source(self) -> str:
        """HELLO ``from_source``: the parts compiled from the tree."""
        return "runtime core,extension/module,data loaders,data maps,probe backends"
