from engine.world import World


def test_every_backend_opens_and_writes(world: World) -> None:
    world.register_agent("alice", "Alice", "worker", "t1")
    entry = world.compare_and_set_state("alice", "plan", 0, {"step": 1})
    assert entry.version == 1
    assert world.get_state("plan").value == {"step": 1}
