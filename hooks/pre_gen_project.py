"""Check every answer before anything is generated.

The rules are local_extensions.RULES, the same that copier's questions apply
(copier.yml): the first broken one is reported in one line that names the
answer, shows the value and says what is allowed. A failing check exits
non-zero; cookiecutter then removes the partly created output directory, so
a rejected answer leaves nothing behind.
"""

import sys

REFUSAL = {{ cookiecutter | refusal | tojson }}

if __name__ == "__main__" and REFUSAL:
    sys.exit(f"ERROR: {REFUSAL}")
