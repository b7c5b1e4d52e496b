"""The decision: compare a candidate RunResult with a baseline (``decide``), the statistics it
uses (``stats``), and the report it renders (``report``, ``templates/``)."""
