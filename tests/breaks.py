"""A graph break for tests: `print` no longer breaks (its call is replayed after the graph,
spec/runtime.md "Side effects"), so tests that need a break call this instead."""

import refcomp


@refcomp.disable
def graph_break(*args, **kwargs):
    """Prints like print; a traced call to it is a graph break (RB016) that CPython runs."""
    print(*args, **kwargs)
