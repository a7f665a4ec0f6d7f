"""The one error type for a user's mistake: a bad config, sweep file, log or results folder.

Its message is one line naming the field, the value and what is allowed. The CLI catches it
once and prints ``spikebench <command>: error: <message>`` with exit code 2; anything else
that escapes is a bug and keeps its traceback.
"""


class UserError(ValueError):
    """A problem with the user's input, described in one line."""
