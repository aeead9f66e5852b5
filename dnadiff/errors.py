"""The one user-facing error type.

Anything the user can cause (bad file, bad config value, unknown name) raises
:class:`DnadiffError` with a one-line message naming the file or field. The CLI
prints ``error: <message>`` and exits with code 2, without a traceback.
"""

from __future__ import annotations


class DnadiffError(Exception):
    """A problem with the user's input: the message is shown as is, on one line."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


__all__ = ["DnadiffError"]
