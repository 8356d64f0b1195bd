"""User-facing errors: the CLI prints their message as one line and exits non-zero."""

from __future__ import annotations

from fathom.packages import install_command


class FathomError(Exception):
    """A problem with the user's input or environment; the message names the problem and the fix."""


class SpecError(FathomError):
    """An invalid run specification (lengths, depths, samples, names)."""


class TokenizerError(FathomError):
    """A tokenizer that cannot be found, loaded or used."""


class CorpusError(FathomError):
    """A haystack corpus that cannot be found, read or used."""


class PromptError(FathomError):
    """A prompt that cannot be built honestly (too short a length, a missed target)."""


class RunFolderError(FathomError):
    """A run folder that cannot be used for this spec."""


class MissingExtraError(FathomError):
    """An optional heavy dependency is not installed."""

    def __init__(self, module: str, extra: str) -> None:
        super().__init__(f"{module} is not installed; install it with: {install_command(extra)}")


class NewerSchemaError(RunFolderError):
    """A record, manifest or summary of a schema newer than this fathom reads: a newer fathom wrote
    it, and what its fields mean cannot be known here, so it is refused rather than misread."""

    def __init__(self, what: str, found: int, known: int, where: str | None = None) -> None:
        super().__init__(
            f"{where or f'this {what}'} was written by a newer fathom ({what} schema {found}, this "
            f"fathom reads up to {known}): upgrade fathom"
        )
        self.what, self.found, self.known = what, found, known

    def at(self, where: str) -> NewerSchemaError:
        """The same refusal, naming where the newer form was found (a file, a line of one)."""
        return NewerSchemaError(self.what, self.found, self.known, where)


def first_line(exc: BaseException) -> str:
    """What an exception says, its first line (a library's message may run on for pages), or its type's
    name where it says nothing: the reason a one-line error gives."""
    said = str(exc).strip()
    return said.splitlines()[0] if said else type(exc).__name__
