"""The subcommands of the `rageval` command, one module per group, each imported only when one of
its commands runs (``rageval.cli`` holds the arguments and names each command's function as
``module:function``): ``validate``; ``run`` (run, baseline); ``gate`` (gate, report); ``judge``
(judge-agreement, judge-pair); ``golden`` (golden add, golden candidates). A command reads its
arguments, calls the library, writes what it found to ``out`` and returns the exit code; errors
propagate to the CLI, which prints them."""
