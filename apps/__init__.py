"""sigconv's terminal UI (Textual). Installed as ``sigconv.apps``; run from a checkout as ``apps``.

The UI itself (``sigconv tui``) is issue 6; this package is where its screens and widgets live.
"""
