"""Tool bindings: a benchmark's own tool, under its own name and argument names, mapped onto a domain tool.

Real benchmarks name their tools themselves: AgentDojo's ``send_money(recipient, amount)`` is the bank
domain's ``transfer(to, amount)``; another suite's ``make_symlink(target, link)`` is the files domain's
``symlink(target, path)``. A binding says so, and the replay sends the domain tool the bound call::

    bindings:
      - tool: make_symlink            # the name the benchmark recorded
        to: symlink                   # a tool of one of the world's domains
        args: {link: path}            # recorded argument -> domain argument (others keep their name)
        const: {}                     # domain arguments fixed by the binding
        output: {field: path}         # optional: how the domain's output is presented back

``output`` shapes what the stub world answers before it is compared with the recorded result: ``field``
picks one value out of a mapping (a dotted path), ``text`` renders it as the benchmark's text would
(strings as they are, anything else as JSON). The binding itself is judged by nobody: the policy sees the
call as the world executed it (``tool``, ``params``), and the recorded call as ``recorded_tool`` and
``recorded_params``.

Bindings are validated when loaded: a binding to a tool the world does not have, or to an argument the
tool does not take, is one line naming the file and the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Mapping
from typing import Annotated, Any, Iterable, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError, model_validator

from .errors import ScenarioError
from .model import first_error
from .tools import tool_arguments
from .yaml_io import read_yaml

__all__ = [
    "Binding",
    "BindingSpec",
    "Bindings",
    "BindingsField",
    "OutputSpec",
    "load_bindings_file",
    "parse_bindings",
    "resolve_bindings",
]


class OutputSpec(BaseModel):
    """How a domain tool's output is presented back as the benchmark's tool would have."""

    model_config = ConfigDict(extra="forbid")

    field: str | None = Field(None, min_length=1, description="A dotted path picking one value out of the output.")
    text: bool = Field(False, description="Render the output as text: strings as they are, anything else as JSON.")


class BindingSpec(BaseModel):
    """One binding as written in a world, scenario or bindings file."""

    model_config = ConfigDict(extra="forbid")

    tool: str = Field(..., min_length=1, description="The benchmark's tool name, as recorded.")
    to: str = Field(..., min_length=1, description="The domain tool it is.")
    args: dict[str, str] = Field(default_factory=dict, description="Recorded argument name -> domain argument name.")
    const: dict[str, Any] = Field(default_factory=dict, description="Domain arguments the binding fixes.")
    drop: list[str] = Field(default_factory=list, description="Recorded arguments the domain tool has no use for.")
    output: OutputSpec | None = None

    @model_validator(mode="after")
    def _no_overlap(self) -> "BindingSpec":
        clash = sorted(set(self.args.values()) & set(self.const))
        if clash:
            raise ValueError(f"argument(s) {', '.join(clash)} both renamed into and fixed by const")
        return self


# A world or scenario holds its bindings inline, or names a bindings file beside it.
BindingsField = Annotated[
    Union[Annotated[list[BindingSpec], Tag("inline-bindings")], Annotated[str, Tag("bindings-file")]],
    Discriminator(lambda value: "bindings-file" if isinstance(value, str) else "inline-bindings"),
]


class BindingsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format_version: int = 1
    description: str = ""
    bindings: list[BindingSpec] = Field(default_factory=list)


@dataclass(frozen=True)
class Binding:
    """A validated binding: turns a recorded call into the domain call, and the domain's output back."""

    spec: BindingSpec

    @property
    def tool(self) -> str:
        return self.spec.tool

    @property
    def to(self) -> str:
        return self.spec.to

    def params(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The domain tool's parameters for a recorded call's arguments."""
        dropped = set(self.spec.drop)
        params = {self.spec.args.get(name, name): value for name, value in arguments.items() if name not in dropped}
        params.update(self.spec.const)
        return params

    def present(self, output: Any) -> Any:
        """The domain's output as the benchmark's tool would have shown it."""
        spec = self.spec.output
        if spec is None:
            return output
        if spec.field is not None:
            for part in spec.field.split("."):
                if not isinstance(output, Mapping) or part not in output:
                    return None
                output = output[part]
        if spec.text and not isinstance(output, str):
            output = json.dumps(output, sort_keys=True, default=str)
        return output


@dataclass(frozen=True)
class Bindings:
    """A world's bindings, by recorded tool name."""

    by_tool: Mapping[str, Binding] = field(default_factory=dict)

    def get(self, tool: str) -> Binding | None:
        return self.by_tool.get(tool)

    def __contains__(self, tool: str) -> bool:
        return tool in self.by_tool

    def __len__(self) -> int:
        return len(self.by_tool)

    @property
    def tools(self) -> frozenset[str]:
        return frozenset(self.by_tool)


def parse_bindings(
    entries: Iterable[BindingSpec], tools: Mapping[str, Any], file: str, where: str = "bindings"
) -> Bindings:
    """Validate bindings against the world's tools (name -> tool method); raises :class:`ScenarioError`."""
    by_tool: dict[str, Binding] = {}
    for index, spec in enumerate(entries):
        at = f"{where}[{index}]"
        if spec.tool in by_tool:
            raise ScenarioError(file, f"{at}.tool", f"{spec.tool!r} is bound twice")
        if spec.to not in tools:
            raise ScenarioError(
                file, f"{at}.to", f"no tool {spec.to!r} in the world; its tools are: {', '.join(sorted(tools)) or '(none)'}"
            )
        arguments = tool_arguments(tools[spec.to])
        if arguments is not None:
            accepted = [argument.name for argument in arguments]
            for name, target in spec.args.items():
                if target not in accepted:
                    raise ScenarioError(
                        file, f"{at}.args.{name}", f"{spec.to!r} takes no argument {target!r}; it takes: {', '.join(accepted)}"
                    )
            for name in spec.const:
                if name not in accepted:
                    raise ScenarioError(
                        file, f"{at}.const.{name}", f"{spec.to!r} takes no argument {name!r}; it takes: {', '.join(accepted)}"
                    )
        by_tool[spec.tool] = Binding(spec)
    return Bindings(by_tool)


def resolve_bindings(spec: list[BindingSpec] | str, tools: Mapping[str, Any], file: Path) -> Bindings:
    """A world's or scenario's bindings, inline or from the bindings file it names (relative to ``file``)."""
    if isinstance(spec, str):
        target = file.parent / spec
        return parse_bindings(load_bindings_file(target, str(file), "bindings"), tools, str(target))
    return parse_bindings(spec, tools, str(file))


def load_bindings_file(path: Path, file: str, field_name: str) -> list[BindingSpec]:
    """The bindings of a separate bindings file (``bindings: [...]``), named from a world or scenario file."""
    if not path.is_file():
        raise ScenarioError(file, field_name, f"no bindings file {path}")
    data = read_yaml(path)
    try:
        return BindingsFile.model_validate(data).bindings
    except ValidationError as exc:
        where, message = first_error(exc)
        raise ScenarioError(str(path), where, message) from None
