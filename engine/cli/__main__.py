"""``python -m engine.cli``: the same as the ``pmw`` console script."""

from engine.cli import main

main()
