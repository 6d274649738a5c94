"""sigconv's terminal UI (Textual), ``sigconv tui``. Installed as ``sigconv.apps``; run from a checkout as ``apps``.

``loading``, ``running`` and ``latency`` hold what the UI does (no Textual import there); the other modules are
its screens and widgets, and ``app.make_app`` builds the application for the command line and the tests.
"""
