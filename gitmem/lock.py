"""The old home of :mod:`gitmem.git.lock`, kept while callers move there."""

from gitmem.git.lock import *  # noqa: F401,F403
