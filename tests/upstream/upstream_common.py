"""What the plugins of tests/upstream/ share: leaving out the SDK tests that do not apply."""

from __future__ import annotations


def deselect(config, items, not_applying: dict[str, str]) -> None:
    """Deselect the tests named in ``not_applying`` (by name, parameters left out; or
    ``Class::name``), and print each with its reason."""
    kept, left_out = [], []
    for item in items:
        name = item.originalname if hasattr(item, "originalname") else item.name
        owner = item.cls.__name__ + "::" if getattr(item, "cls", None) is not None else ""
        reason = not_applying.get(owner + name) or not_applying.get(name)
        (left_out if reason else kept).append((item, reason))
    if left_out:
        config.hook.pytest_deselected(items=[item for item, _ in left_out])
        items[:] = [item for item, _ in kept]
        for item, reason in left_out:
            print(f"left out: {item.nodeid}: {reason}")


made = {"count": 0}  # how many of gitmem's objects the tests made: none would mean no swap


def said_made(terminalreporter) -> None:
    """The closing line tests/test_upstream_suites.py reads: how many were made."""
    terminalreporter.write_line(f"gitmem objects made: {made['count']}")
