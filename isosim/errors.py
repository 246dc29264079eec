"""Errors that mean "the user asked for something invalid" (the CLI prints one line, exit 2)."""


class IsosimError(ValueError):
    """A user-facing error: bad input, a bad file, an impossible setting."""
