#!/usr/bin/env python3
"""Runs a command and appends its resource usage to a file: the peak RSS of
one omptensor subprocess (getrusage(RUSAGE_CHILDREN) in the benchmark would
give the largest of all its children so far, not this one's).

    rusage_wrap.py OUT.jsonl CMD [ARGS...]

The command keeps stdin, stdout and stderr; its exit status is this one's
(128 + N for signal N). It dies with this process (PR_SET_PDEATHSIG), so a
benchmark that kills a case on its timeout kills the command too. OUT gets
one line: {"argv", "maxrss_bytes", "utime_s", "stime_s", "exit"}."""
import ctypes
import json
import os
import signal
import subprocess
import sys

PR_SET_PDEATHSIG = 1


def _die_with_parent():
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    out, cmd = argv[0], argv[1:]
    try:
        p = subprocess.Popen(cmd, preexec_fn=_die_with_parent)
    except OSError as e:
        print(f"rusage_wrap: cannot run {cmd[0]}: {e}", file=sys.stderr)
        return 127
    _, status, ru = os.wait4(p.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    with open(out, "a") as f:
        f.write(json.dumps(dict(argv=cmd, maxrss_bytes=ru.ru_maxrss * 1024, utime_s=ru.ru_utime,
                                stime_s=ru.ru_stime, exit=code)) + "\n")
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
