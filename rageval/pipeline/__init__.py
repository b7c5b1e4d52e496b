"""How answers are obtained and scored: text → chunks → index → retrieval → generation (``apps``),
the one model client (``llm``), and the runner that turns an App's traces into a RunResult."""
