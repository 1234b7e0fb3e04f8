"""The exceptions of sketchps (python/src/errors.h maps the C++ core's errors onto them)."""


class Error(RuntimeError):
    """Any sketchps failure."""


class ConfigError(Error, ValueError):
    """A bad job spec, environment variable, argument or model (the message names it)."""


class ModelMismatchError(Error):
    """The model differs between the ranks, from the job's layout, or a replica diverged."""


class OrderError(Error):
    """A call out of order: before init(), after finish(), past the job's last round."""


class TransportError(Error):
    """The servers or peers could not be reached, or a round failed on the way."""
