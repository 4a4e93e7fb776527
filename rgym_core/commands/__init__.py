"""The core's CLI commands, one module per group of commands.

They are registered by :mod:`rgym_core.builtin` through ``rgym_cli_commands``
as lazy commands (see :func:`rgym_core.lazy_command`), like any plugin's.
"""
