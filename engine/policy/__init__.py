"""The permission layer: a Cerbos policy decision point (PDP) decides every read, invoke and mutate.

- :mod:`engine.policy.pdp_process` starts and owns a local ``cerbos server`` (or none, for an external PDP);
- :mod:`engine.policy.cerbos_adapter` is the only module that talks to Cerbos (gRPC, per-call deadlines);
- :mod:`engine.policy.model` holds the boundary models (principals, resources, decisions, plan filters).
"""
