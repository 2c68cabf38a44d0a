"""Runs a command and reports its peak resident set size, for `cargo xtask bench`.

Prints the command's stdout, then one line `{"peak_rss_kb": N}`: the largest peak RSS among
the command and the descendants it waited for (getrusage(RUSAGE_CHILDREN).ru_maxrss).
Exits with the command's status; its stderr passes through.

    python peak_rss.py PROGRAM [ARGS...]
"""

import json
import resource
import subprocess
import sys


def main() -> int:
    completed = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, check=False)
    sys.stdout.write(completed.stdout.decode())
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(json.dumps({"peak_rss_kb": peak}))
    return completed.returncode


if __name__ == "__main__":
    sys.exit(main())
