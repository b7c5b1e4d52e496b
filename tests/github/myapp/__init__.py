"""A stand-in for a team's own RAG application, used by the action's tests: the package lives only
in the job's Python (the native mode) or on PYTHONPATH, never in rag-eval-gate's own install."""
