"""Remove what the chosen answers do not need.

The template carries one module per sandbox backend; the generated service
keeps only those it uses (the primary backend and any additional ones), so it
reads as if written for them alone. Tests of features that were not chosen go
too. The list is local_extensions.unused_files, which copier reads too (it
never writes these files). Runs offline: it only deletes files (and a
directory whose files all go).
"""

import shutil
from pathlib import Path

UNUSED = {{ cookiecutter | unused_files | tojson }}

if __name__ == "__main__":
    for path in map(Path, UNUSED):
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
