"""Sandbox backends: everything specific to where the agent's sandbox runs.

Each module exposes ``sandbox_client()``, which the worker calls to build the
real client, and ``sandbox_options()``, which the workflow passes with every
run, plus the credentials the worker needs (``REQUIRED_ENVIRONMENT``). Changing
backend means changing which module the worker and workflow use; nothing else
in the service knows where the sandbox lives.
"""
