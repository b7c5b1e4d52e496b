"""The golden set and its sources over time: the cases and the corpus they point at (``set``,
``corpus``), editing (``edit``), lifecycle checks (``lifecycle``) and proposing new cases from
chat logs (``candidates``)."""
