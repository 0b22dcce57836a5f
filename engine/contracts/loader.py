"""Read the action contracts (``contracts/actions/*.yaml``): validated at load, or refused as ``file:line: field``.

Each file holds one contract (:class:`~engine.contracts.model.ActionContract`) whose ``action`` is the
file's stem. Files are read by :mod:`engine.yaml_input` (size, depth and alias bounds; plain data only: the
safe constructor builds no objects, so a contract can never name code to run). A directory is loaded whole
or not at all: the first problem (a syntax error, an unknown or missing field, a schema keyword outside the
subset, two classes that disagree, an inverse action that has no contract) is
:class:`~engine.errors.ContractInvalid` with the file, the line and the field. The directory is separate
from ``policies/`` (which the policy tooling compiles for the PDP) and from ``rules/``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from engine.contracts.json_schema import SchemaProblem
from engine.contracts.model import ActionContract, CompensationKind
from engine.errors import ContractInvalid, NotFound, YamlRefused
from engine.yaml_input import YamlDocument, load_yaml, node_line

#: The repository's contracts (governance edits them; a deployment may point elsewhere).
DEFAULT_CONTRACT_DIR = Path(__file__).resolve().parents[2] / "contracts"
MAX_CONTRACT_BYTES = 256 * 1024
MAX_CONTRACTS = 1000


class ContractBook(Mapping[str, ActionContract]):
    """The loaded contracts by action name (read-only)."""

    def __init__(self, contracts: Mapping[str, ActionContract], source: str) -> None:
        self._contracts = dict(contracts)
        self.source = source

    def __getitem__(self, action: str) -> ActionContract:
        return self._contracts[action]

    def __iter__(self) -> Iterator[str]:
        return iter(self._contracts)

    def __len__(self) -> int:
        return len(self._contracts)

    def contract(self, action: str) -> ActionContract:
        """The contract of ``action``; ``NotFound`` (kind ``contract``) when none is declared."""
        found = self._contracts.get(action) if isinstance(action, str) else None
        if found is None:
            raise NotFound("contract", str(action)[:100])
        return found


def load_contracts(directory: Path = DEFAULT_CONTRACT_DIR) -> ContractBook:
    """Every contract in ``directory / "actions"`` (none there: an empty book). Raises ``ContractInvalid``."""
    folder = directory / "actions"
    files = sorted(folder.glob("*.yaml")) if folder.is_dir() else []
    if len(files) > MAX_CONTRACTS:
        raise ContractInvalid(str(folder), 0, "actions", f"more than {MAX_CONTRACTS} contract files")
    found: dict[str, ActionContract] = {}
    nodes: dict[str, tuple[Path, yaml.Node]] = {}
    for path in files:
        contract, node = load_contract_file(path)
        found[contract.action] = contract
        nodes[contract.action] = (path, node)
    for name, contract in found.items():
        inverse = contract.compensation.inverse
        if contract.compensation.kind is CompensationKind.TRUE_ROLLBACK and inverse not in found:
            path, node = nodes[name]
            raise ContractInvalid(str(path), line_of(node, ("compensation", "inverse")), "compensation.inverse",
                                  f"no contract declares the inverse action {inverse!r}")
    return ContractBook(found, str(directory))


def load_contract_file(path: Path) -> tuple[ActionContract, yaml.Node]:
    """One contract file, validated; its composed root node (for line numbers)."""
    data, node = _parse(path)
    try:
        contract = ActionContract.model_validate(data)
    except ValidationError as exc:
        raise _refusal(path, node, exc) from exc
    if contract.action != path.stem:
        raise ContractInvalid(str(path), line_of(node, ("action",)), "action",
                              f"the contract of {contract.action!r} must be in {contract.action}.yaml")
    return contract, node


def read_data_file(path: Path) -> YamlDocument:
    """A governance data file of this folder (``retention.yaml``, ``attention.yaml``) as parsed YAML, bounded
    like a contract; unreadable, too large or bad YAML is ``ContractInvalid`` naming the file and line."""
    try:
        return load_yaml(path, max_bytes=MAX_CONTRACT_BYTES)
    except YamlRefused as exc:
        raise ContractInvalid(str(path), exc.line, "file", exc.reason) from exc
    except (OSError, yaml.YAMLError) as exc:  # unreadable, or a YAML syntax error
        mark = getattr(exc, "problem_mark", None)
        raise ContractInvalid(str(path), mark.line + 1 if mark is not None else 0, "file", str(exc)[:500]) from exc


def _parse(path: Path) -> tuple[Any, yaml.Node]:
    try:
        document = load_yaml(path, max_bytes=MAX_CONTRACT_BYTES)
    except OSError as exc:
        raise ContractInvalid(str(path), 0, "file", f"cannot read the file: {exc}") from exc
    except YamlRefused as exc:
        raise ContractInvalid(str(path), exc.line, "file", exc.reason) from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise ContractInvalid(str(path), mark.line + 1 if mark is not None else 0, "file",
                              f"YAML syntax error: {problem}") from exc
    if document.node is None or not isinstance(document.data, dict):
        raise ContractInvalid(str(path), 1, "file", "a contract is a mapping of its fields")
    _check_duplicate_keys(path, document.node)
    return document.data, document.node


def _refusal(path: Path, node: yaml.Node, exc: ValidationError) -> ContractInvalid:
    first = exc.errors()[0]
    loc: tuple[str | int, ...] = tuple(first["loc"])
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, SchemaProblem):  # a schema keyword: point at the keyword inside the schema
        loc = (*loc, *cause.path)
        reason = cause.reason
    elif first["type"] == "extra_forbidden":
        reason = "unknown field"
    elif first["type"] == "missing":
        reason = "missing field"
    else:
        reason = str(first["msg"]).removeprefix("Value error, ")
    field = ".".join(str(p) for p in loc) or "contract"
    return ContractInvalid(str(path), line_of(node, loc), field, reason)


def _check_duplicate_keys(path: Path, node: yaml.Node) -> None:
    """PyYAML keeps the last of two equal keys; a contract must not have any."""
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                if key.value in seen:
                    raise ContractInvalid(str(path), key.start_mark.line + 1, str(key.value), "duplicate key")
                seen.add(key.value)
            _check_duplicate_keys(path, value)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _check_duplicate_keys(path, item)


def line_of(node: yaml.Node | None, loc: Sequence[str | int]) -> int:
    """The 1-based line of the deepest node on ``loc`` (0 when there is no node)."""
    return node_line(node, loc) or 0


__all__ = ["DEFAULT_CONTRACT_DIR", "ContractBook", "line_of", "load_contract_file", "load_contracts",
           "read_data_file"]
