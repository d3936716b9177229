import sys


def warn(msg, *args, **kwargs):
    print("gymnasium warn:", msg, file=sys.stderr)
