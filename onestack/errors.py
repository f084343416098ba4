"""The one base of every error onestack reports to its user: each says what
is wrong and the fix, and the command line prints it (onestack/cli.py)
without a traceback. Anything else is a defect, and shows one."""


class OnestackError(Exception):
    pass
