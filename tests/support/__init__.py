"""What the tests share, in plain modules named by what they hold; conftest.py files keep only
fixtures and hooks, and a test imports a helper from here by its module's name."""
