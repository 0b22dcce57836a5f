"""The Durable Collaboration Protocol run loop (PMW-DCP): wake -> rehydrate -> observe -> decide -> act ->
commit -> receipt. See :mod:`engine.protocol.worker` and :mod:`engine.protocol.adapters`."""
