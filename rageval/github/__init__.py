"""Everything GitHub's: the REST client, the baseline artifact, the sticky comment and the
action's modes. Nothing outside this package knows about GitHub."""
