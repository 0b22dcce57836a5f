"""Action contracts as data (seed 003 §3.3, §11-13): the model, the loader, the attempt record and the Operator.

``load_contracts`` reads ``contracts/actions/*.yaml`` (``file:line: field`` on any problem); the World
enforces a contract before an action begins (``engine.world.actions``); ``run_action`` drives a
:class:`Connector` so that a retry after a timeout asks for the status and never repeats a done effect.
"""

from engine.contracts.attempt import ActionAttempt, AttemptStatus, evidence_completeness
from engine.contracts.loader import DEFAULT_CONTRACT_DIR, ContractBook, load_contracts
from engine.contracts.model import ActionContract, CompensationKind, EvidenceLevel, IdempotencyPolicy, SideEffectClass
from engine.contracts.operator import Connector, EffectFailed, EffectOutcome, EffectTimeout, compensate, run_action

__all__ = ["DEFAULT_CONTRACT_DIR", "ActionAttempt", "ActionContract", "AttemptStatus", "CompensationKind",
           "Connector", "ContractBook", "EffectFailed", "EffectOutcome", "EffectTimeout", "EvidenceLevel",
           "IdempotencyPolicy", "SideEffectClass", "compensate", "evidence_completeness", "load_contracts",
           "run_action"]
