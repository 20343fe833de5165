"Remote Agent: A durable AI agent with its own sandbox, running on Temporal."

# Importing the package hands the service (service.py) to the runtime, so every
# process of the service runs it: the worker, the starter, the codec server,
# the workflow sandbox (which imports the workflow's package afresh for each
# run) and the tests.
from remote_agent.service import SERVICE as SERVICE
