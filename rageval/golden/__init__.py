"""The golden set and its sources over time: the cases and the corpus they point at (``set``,
``corpus``), editing (``edit``, writing YAML text with ``yaml_text``), lifecycle checks
(``lifecycle``), the file's versions in git (``history``) and proposing new cases from chat logs
(``candidates``)."""
