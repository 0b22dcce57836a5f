"""PMW engine: the domain models, the World facade and (later) the protocol loop and adapters."""
