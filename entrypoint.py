"""The action's entrypoint: hand the runner's environment to rageval.github.action.main().

The Docker image runs it, and so does the native mode (native/action.yml) in the job's own
Python. For the Docker action, the runner starts the container with the workspace mounted at
/github/workspace (the working directory), the action inputs as INPUT_* variables and
GITHUB_OUTPUT / GITHUB_STEP_SUMMARY pointing at files it reads afterwards. The exit code is the gate's: 0 pass, 1 blocked,
2 bad input, 3 internal error.

It first re-starts itself without the token in its environment (rageval.github.sandbox), so that
the evaluated app cannot read it from /proc/<pid>/environ.
"""

import os
import sys

from rageval.github.action import entry

if __name__ == "__main__":
    raise SystemExit(entry(os.environ, sys.orig_argv, sys.executable))
