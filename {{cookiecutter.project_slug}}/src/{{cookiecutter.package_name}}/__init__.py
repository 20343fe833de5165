{{ (cookiecutter.project_name ~ ": " ~ cookiecutter.description) | tojson }}

# Importing the package hands the service (service.py) to the runtime, so every
# process of the service runs it: the worker, the starter, the codec server,
# the workflow sandbox (which imports the workflow's package afresh for each
# run) and the tests.
from {{ cookiecutter.package_name }}.service import SERVICE as SERVICE
